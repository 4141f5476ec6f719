// Training memory and speed against PyTorch eager: the LoRA train step (forward + backward,
// r = 16, alpha = 32 on q/k/v/o/gate/up/down, mean next-token NLL) of the two shapes of
// ../shared/anchors/torch/train_step.py, each side in its own process so that peak RSS is the
// train step's. Our side runs the train_step graph with each candidate set of session memory
// options (bench/train-step-child.ts); the table shows what each one does to the peak and the
// speed, and which is the default (createSession's).
//
// `train-memory-vocab` (a section of its own: ~30 min, and its unchunked run peaks near 17 GB)
// measures the step at the real Qwen2.5 vocabulary, 8 × 512 tokens: our train_step with the LM
// head whole (one chunk: the graph from before vocabulary chunks, byte for byte; skipped when the
// machine has not the memory free) and in vocabulary chunks of several sizes, against PyTorch
// eager with the loss whole and in row chunks (bench/anchors/torch-train-step.py).
// `vocab-chunk-price` (a minute or two) prices the chunking itself at shape b's small vocabulary.
//
// Each flowgrpo row carries the memory preflight's estimate of the same step (run/memory-estimate.ts:
// one train_step session, one micro-batch of B × T) beside the measured peak, and their ratio.

import { execFile, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { CreateSessionOptions, DecoderConfig } from '@flowgrpo/models';
import { DEFAULT_VOCAB_CHUNK_SIZE, LORA_TARGET_MODULES, vocabChunks } from '@flowgrpo/models';
import { buildTrainingArtifacts, estimateMemory } from '../src/index.js';
import { ANCHORS, loadAverage, median } from './anchors.js';
import { freshProcessJson } from './fresh-process.js';
import { qwen05, qwen15, randomWeights } from './models.js';
import type { BenchSection } from './table.js';

const run = promisify(execFile);

/** train_step.py's shapes: a (256 wide) and b (896 wide, two Qwen2.5-0.5B layers). */
const SHAPES: Record<'a' | 'b', { config: DecoderConfig; B: number; T: number }> = {
  a: {
    config: {
      ...qwen05(4),
      vocabSize: 4096,
      hiddenSize: 256,
      intermediateSize: 704,
      numAttentionHeads: 4,
      numKeyValueHeads: 2,
      headDim: 64,
    },
    B: 4,
    T: 256,
  },
  b: { config: { ...qwen05(2), vocabSize: 8192 }, B: 1, T: 512 },
};

/** Session memory settings and threads tried; `reps` processes each (the default gets more). */
const VARIANTS: { label: string; options: CreateSessionOptions; reps: number }[] = [
  { label: 'onnxruntime defaults (arena, memory pattern)', options: { memory: 'ort' }, reps: 1 },
  { label: 'no CPU arena', options: { memory: 'ort', enableCpuMemArena: false }, reps: 1 },
  {
    label: 'no arena, no memory pattern',
    options: { memory: 'ort', enableCpuMemArena: false, enableMemPattern: false },
    reps: 1,
  },
  { label: 'default: no memory pattern, 2 threads', options: { intraOpThreads: 2 }, reps: 2 },
  { label: 'default: no memory pattern, 1 thread', options: { intraOpThreads: 1 }, reps: 2 },
  {
    label: 'share_frozen_weights (prepacking off), 2 threads',
    options: { intraOpThreads: 2, prepackWeights: false },
    reps: 2,
  },
];

/** python3 that imports torch (Debian's python3-torch lives in /usr/bin/python3's path). */
function torchPython(): string | undefined {
  for (const py of ['/usr/bin/python3', 'python3']) {
    const r = spawnSync(py, ['-c', 'import torch'], { encoding: 'utf8' });
    if (r.status === 0) return py;
  }
  return undefined;
}

async function torchStep(
  py: string,
  shape: string,
  threads: number,
): Promise<{ ms: number; peakMiB: number } | undefined> {
  // train_step.py run as is, then the process's VmHWM: its own peak. (The script's peak_MiB,
  // ru_maxrss, would start from this bench's RSS: Linux carries it over fork and exec.)
  const script = join(ANCHORS, 'torch', 'train_step.py');
  const wrapper = [
    'import runpy, sys',
    `sys.argv = [${JSON.stringify(script)}, ${JSON.stringify(shape)}, '${threads}', '4']`,
    `runpy.run_path(${JSON.stringify(script)}, run_name='__main__')`,
    "print([l for l in open('/proc/self/status') if l.startswith('VmHWM')][0])",
  ].join('\n');
  const { stdout } = await run(py, ['-c', wrapper], {
    env: { ...process.env, OMP_WAIT_POLICY: 'PASSIVE' },
    timeout: 600_000,
  });
  const m = /ms_med=([\d.]+)/.exec(stdout);
  const hwm = /VmHWM:\s+(\d+)/.exec(stdout);
  return m && hwm ? { ms: Number(m[1]), peakMiB: Number(hwm[1]) / 1024 } : undefined;
}

/** The memory preflight's estimate of one train step of `config` at B × T, in MiB. */
function estimatedMiB(
  config: DecoderConfig,
  B: number,
  T: number,
  chunkSize?: number,
  sharedWeights = false,
  gradientCheckpointing = false,
  halfProjections = false,
): number {
  return (
    estimateMemory({
      config,
      lora: { r: 16, targetModules: LORA_TARGET_MODULES },
      headChunk: vocabChunks(config.vocabSize, chunkSize).size,
      sessions: { trainStep: true, logprobs: false, sampling: 0 },
      microBatch: { rows: B, seqLen: T },
      sharedWeights,
      gradientCheckpointing,
      halfProjections,
    }).bytes /
    2 ** 20
  );
}

async function ourStep(
  dir: string,
  B: number,
  T: number,
  options: CreateSessionOptions,
  steps = 4,
): Promise<{ ms: number; peakMiB: number }> {
  return freshProcessJson(join(import.meta.dirname, 'train-step-child.ts'), [
    dir,
    `${B}x${T}`,
    JSON.stringify(options),
    String(steps),
  ]);
}

export async function benchTrainMemory(): Promise<BenchSection> {
  const rows: string[][] = [];
  const notes: string[] = [];
  const py = existsSync(join(ANCHORS, 'torch', 'train_step.py')) ? torchPython() : undefined;
  if (!py)
    notes.push(
      `PyTorch skipped: ${existsSync(join(ANCHORS, 'torch', 'train_step.py')) ? 'no python3 with torch (apt-get install -y python3-torch libopenblas0-pthread)' : `${join(ANCHORS, 'torch', 'train_step.py')} absent`}`,
    );
  const tmp = mkdtempSync(join(tmpdir(), 'flowgrpo-bench-trainmem-'));
  try {
    for (const shape of ['a', 'b'] as const) {
      const { config, B, T } = SHAPES[shape];
      const dir = join(tmp, shape);
      buildTrainingArtifacts(randomWeights(config), dir, {
        graphs: ['train_step'],
        maxPositions: T,
        lora: { r: 16, alpha: 32, targetModules: LORA_TARGET_MODULES },
      });
      // PyTorch: the better of 1 and 2 threads (train_step.py's docstring), twice each; the
      // rows report each thread count's best and peak.
      let torch: { ms: number; peakMiB: number } | undefined;
      if (py) {
        const tries: { ms: number; peakMiB: number }[] = [];
        for (const threads of [2, 1, 2, 1]) {
          const r = await torchStep(py, shape, threads);
          if (r) tries.push(r);
        }
        torch = {
          ms: Math.min(...tries.map((t) => t.ms)),
          peakMiB: median(tries.map((t) => t.peakMiB)),
        };
        rows.push([
          shape,
          'PyTorch eager (the better of 1 and 2 threads)',
          (((B * T) / torch.ms) * 1000).toFixed(0),
          torch.peakMiB.toFixed(0),
          '1.00',
          '1.00',
          '—',
        ]);
      }
      for (const v of VARIANTS) {
        const estimate = estimatedMiB(config, B, T, undefined, v.options.prepackWeights === false);
        const tries: { ms: number; peakMiB: number }[] = [];
        for (let i = 0; i < v.reps; i++) tries.push(await ourStep(dir, B, T, v.options));
        const ms = median(tries.map((t) => t.ms));
        const peak = median(tries.map((t) => t.peakMiB));
        rows.push([
          shape,
          `flowgrpo: ${v.label}`,
          (((B * T) / ms) * 1000).toFixed(0),
          peak.toFixed(0),
          torch ? (torch.ms / ms).toFixed(2) : '—',
          torch ? (peak / torch.peakMiB).toFixed(2) : '—',
          `${estimate.toFixed(0)} (${(estimate / peak).toFixed(2)}×)`,
        ]);
      }
    }
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  notes.push(
    `shape a: hidden 256, 4 layers, vocab 4096, batch 4 × 256; b: hidden 896, 2 layers (Qwen2.5-0.5B), vocab 8192, batch 1 × 512. ` +
      `Peak = the process's VmHWM (its peak resident set) over a warm-up and 4 steps, each side in a fresh process; ` +
      `flowgrpo rows: the median over their processes; ORT's default is one thread per core (2 here); ` +
      "the estimate is the memory preflight's for the default session settings. " +
      `Load average at the end: ${loadAverage()}`,
  );
  return {
    title:
      'training memory and speed vs PyTorch: LoRA train step (forward + backward), fresh process each',
    header: [
      'shape',
      'run',
      'tokens/s',
      'peak MiB',
      '× torch tok/s',
      '× torch peak',
      'estimate MiB (× peak)',
    ],
    rows,
    notes,
  };
}

/** The real vocabulary's shape: shape b's two Qwen2.5-0.5B layers at 151,936 tokens, 8 × 512. */
const VOCAB_SHAPE = { config: qwen05(2), B: 8, T: 512 };
/** Vocabulary chunk sizes tried (the vocabulary size itself: the unchunked head). */
const VOCAB_CHUNKS = [VOCAB_SHAPE.config.vocabSize, 32768, DEFAULT_VOCAB_CHUNK_SIZE, 8192];
/** PyTorch's chunked loss: rows per chunk (the issue's measurement took 1,024). */
const TORCH_CHUNK_ROWS = 1024;
/**
 * The unchunked head's step peaked at 17,262 MiB (issue #33): it runs only when this much memory
 * is available, so that the bench does not push a shared machine into the OOM killer.
 */
const WHOLE_HEAD_NEEDS_MIB = 20 * 1024;
/** A small vocabulary chunked anyway, to price the chunking itself: shape b, 4 chunks of 2,048. */
const SMALL_VOCAB_CHUNK = 2048;

/** /proc/meminfo's MemAvailable in MiB (Infinity where there is none to read). */
function availableMiB(): number {
  try {
    const m = /MemAvailable:\s+(\d+)/.exec(readFileSync('/proc/meminfo', 'utf8'));
    return m ? Number(m[1]) / 1024 : Number.POSITIVE_INFINITY;
  } catch {
    return Number.POSITIVE_INFINITY;
  }
}

/** torch-train-step.py once, in a fresh process: its median step and its peak (VmHWM). */
async function torchVocabStep(
  py: string,
  chunkRows: number,
  { config: c, B, T } = VOCAB_SHAPE,
  /** Timed steps after the first; each layer under torch.utils.checkpoint (HF's gradient_checkpointing). */
  o: { steps?: number; checkpointing?: boolean } = {},
): Promise<{ ms: number; peakMiB: number } | undefined> {
  const script = join(import.meta.dirname, 'anchors', 'torch-train-step.py');
  const args = [c.hiddenSize, c.numHiddenLayers, c.numAttentionHeads, c.numKeyValueHeads]
    .concat([c.intermediateSize, c.vocabSize, B, T, 2, o.steps ?? 2, chunkRows])
    .concat(o.checkpointing ? [1] : [])
    .map(String);
  const wrapper = [
    'import runpy, sys',
    `sys.argv = ${JSON.stringify([script, ...args])}`,
    `runpy.run_path(${JSON.stringify(script)}, run_name='__main__')`,
    "print([l for l in open('/proc/self/status') if l.startswith('VmHWM')][0])",
  ].join('\n');
  const { stdout } = await run(py, ['-c', wrapper], {
    env: { ...process.env, OMP_WAIT_POLICY: 'PASSIVE' },
    timeout: 3_600_000,
  });
  const m = /ms_med=([\d.]+)/.exec(stdout);
  const hwm = /VmHWM:\s+(\d+)/.exec(stdout);
  return m && hwm ? { ms: Number(m[1]), peakMiB: Number(hwm[1]) / 1024 } : undefined;
}

/**
 * PyTorch's two rows of a shape, loss whole and in row chunks (nothing without python3-torch),
 * pushed onto `rows`; returns the chunked run, the reference of the × columns.
 */
async function torchRows(
  py: string | undefined,
  s: typeof VOCAB_SHAPE,
  shape: string,
  rows: string[][],
): Promise<Measured | undefined> {
  const tokens = s.B * s.T;
  const eager = py ? await torchVocabStep(py, 0, s) : undefined;
  const chunked = py ? await torchVocabStep(py, TORCH_CHUNK_ROWS, s) : undefined;
  if (eager) rows.push(vocabRow(shape, tokens, 'PyTorch eager f32, loss whole', eager, chunked));
  if (chunked)
    rows.push(
      vocabRow(
        shape,
        tokens,
        `PyTorch eager f32, LM head + loss in ${TORCH_CHUNK_ROWS}-row chunks, recomputed`,
        chunked,
        chunked,
      ),
    );
  return chunked;
}

/** Builds the LoRA train_step of `config` with chunks of at most `size` columns into `dir`. */
function buildVocabStep(
  config: DecoderConfig,
  dir: string,
  size: number,
  T: number,
  gradientCheckpointing = false,
  baseWeightsDtype: 'float32' | 'bfloat16' = 'float32',
): void {
  buildTrainingArtifacts(randomWeights(config), dir, {
    graphs: ['train_step'],
    maxPositions: T,
    lora: { r: 16, alpha: 32, targetModules: LORA_TARGET_MODULES },
    vocabChunkSize: size,
    gradientCheckpointing,
    baseWeightsDtype,
  });
}

type Measured = { ms: number; peakMiB: number };

/**
 * One table row: tokens/s and peak, both as ratios to `ref` where there is one, and the memory
 * preflight's estimate of a flowgrpo row (`estimate`, MiB) beside its peak.
 */
function vocabRow(
  shape: string,
  tokens: number,
  label: string,
  r: Measured,
  ref?: Measured,
  estimate?: number,
) {
  return [
    shape,
    label,
    ((tokens / r.ms) * 1000).toFixed(0),
    r.peakMiB.toFixed(0),
    ref ? (ref.ms / r.ms).toFixed(2) : '—',
    ref ? (r.peakMiB / ref.peakMiB).toFixed(2) : '—',
    estimate === undefined ? '—' : `${estimate.toFixed(0)} (${(estimate / r.peakMiB).toFixed(2)}×)`,
  ];
}

const VOCAB_HEADER = [
  'shape',
  'run',
  'tokens/s',
  'peak MiB',
  '× ref tok/s',
  '× ref peak',
  'estimate MiB (× peak)',
];

/**
 * `vocab-chunk-price`: the chunking's own price at a small vocabulary, where the default builds
 * the unchunked graph: shape b of `train-memory` (vocab 8,192) whole and in chunks of 2,048,
 * alternating processes, three each.
 */
export async function benchVocabChunkPrice(): Promise<BenchSection> {
  const { config, B, T } = SHAPES.b;
  const tmp = mkdtempSync(join(tmpdir(), 'flowgrpo-bench-vocab-price-'));
  const rows: string[][] = [];
  try {
    const dirs = [config.vocabSize, SMALL_VOCAB_CHUNK].map((size) => {
      const dir = join(tmp, String(size));
      buildVocabStep(config, dir, size, T);
      return dir;
    });
    const tries: Measured[][] = [[], []];
    for (let rep = 0; rep < 3; rep++)
      for (const [i, dir] of dirs.entries())
        tries[i]!.push(await ourStep(dir, B, T, { intraOpThreads: 2 }));
    const [whole, chunked] = tries.map((t) => ({
      ms: median(t.map((x) => x.ms)),
      peakMiB: median(t.map((x) => x.peakMiB)),
    })) as [Measured, Measured];
    const shape = `b (vocab ${config.vocabSize}, ${B} × ${T})`;
    const { count } = vocabChunks(config.vocabSize, SMALL_VOCAB_CHUNK);
    rows.push(
      vocabRow(
        shape,
        B * T,
        'flowgrpo, LM head whole (the default here)',
        whole,
        whole,
        estimatedMiB(config, B, T),
      ),
    );
    rows.push(
      vocabRow(
        shape,
        B * T,
        `flowgrpo, ${count} vocabulary chunks of ${SMALL_VOCAB_CHUNK}`,
        chunked,
        whole,
        estimatedMiB(config, B, T, SMALL_VOCAB_CHUNK),
      ),
    );
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  return {
    title:
      'the price of vocabulary chunks at a small vocabulary: LoRA train step, fresh process each',
    header: VOCAB_HEADER,
    rows,
    notes: [
      'two Qwen2.5-0.5B layers (hidden 896), tied head, LoRA r=16 on all projections; ORT on 2 threads; ' +
        'a warm-up and the median of 4 steps per process, the median of 3 processes (alternating); × columns against the whole head. ' +
        `Load average at the end: ${loadAverage()}`,
    ],
  };
}

export async function benchTrainMemoryVocab(): Promise<BenchSection> {
  const { config, B, T } = VOCAB_SHAPE;
  const rows: string[][] = [];
  const notes: string[] = [];
  const py = torchPython();
  if (!py)
    notes.push(
      'PyTorch skipped: no python3 with torch (apt-get install -y python3-torch libopenblas0-pthread)',
    );
  const tmp = mkdtempSync(join(tmpdir(), 'flowgrpo-bench-trainmem-vocab-'));
  const shape = `vocab ${config.vocabSize}, ${B} × ${T}`;
  const tokens = B * T;
  try {
    // PyTorch first: the chunked run is the reference of the × columns.
    const chunked = await torchRows(py, VOCAB_SHAPE, shape, rows);
    for (const size of VOCAB_CHUNKS) {
      const { count, size: width } = vocabChunks(config.vocabSize, size);
      const label =
        count === 1
          ? 'flowgrpo, LM head whole (before: the graph without chunks)'
          : `flowgrpo, ${count} vocabulary chunks of ${width}${size === DEFAULT_VOCAB_CHUNK_SIZE ? ' (default)' : ''}`;
      const available = availableMiB();
      if (count === 1 && available < WHOLE_HEAD_NEEDS_MIB) {
        notes.push(
          `${label} skipped: ${available.toFixed(0)} MiB available, it needs ~${WHOLE_HEAD_NEEDS_MIB} (issue #33 measured its peak at 17,262 MiB)`,
        );
        continue;
      }
      const dir = join(tmp, String(size));
      buildVocabStep(config, dir, size, T);
      const ours = await ourStep(dir, B, T, { intraOpThreads: 2 }, 2);
      rows.push(vocabRow(shape, tokens, label, ours, chunked, estimatedMiB(config, B, T, size)));
      rmSync(dir, { recursive: true, force: true });
    }
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  notes.push(
    `two Qwen2.5-0.5B layers (hidden 896), tied head, LoRA r=16 on all projections; every position after the first a target; ` +
      'each run a fresh process, peak = its VmHWM (weights, session, step); PyTorch and ORT on 2 threads; ' +
      'flowgrpo a warm-up and the median of 2 steps, PyTorch a first step and the median of 2; × columns against the PyTorch chunked row. ' +
      `Load average at the end: ${loadAverage()}`,
  );
  return {
    title: `training memory at the real vocabulary: LoRA train step, ${B} × ${T} tokens, fresh process each`,
    header: VOCAB_HEADER,
    rows,
    notes,
  };
}

/**
 * Whole models at the real vocabulary (`train-memory-models`): Qwen2.5-0.5B's 24 layers and
 * Qwen2.5-1.5B's 28 (random weights, tied head, LoRA r=16 on every projection), one row of 512
 * tokens — at 8 × 512 the activations of every layer pass this machine's memory on either side
 * (issue #33: both PyTorch and flowgrpo passed 20 GiB at 0.5B). PyTorch eager f32 with the loss
 * whole and in row chunks; flowgrpo prepacked (the default) and with share_frozen_weights, with
 * float32 and with bfloat16 projections (base_weights_dtype); each a fresh process, skipped when
 * the memory available is below its estimate.
 */
const MODEL_SHAPES = [
  { name: 'Qwen2.5-0.5B (24 layers)', config: qwen05(24), B: 1, T: 512 },
  { name: 'Qwen2.5-1.5B (28 layers)', config: qwen15(28), B: 1, T: 512 },
];

export async function benchTrainMemoryModels(): Promise<BenchSection> {
  const rows: string[][] = [];
  const notes: string[] = [];
  const py = torchPython();
  if (!py)
    notes.push(
      'PyTorch skipped: no python3 with torch (apt-get install -y python3-torch libopenblas0-pthread)',
    );
  const tmp = mkdtempSync(join(tmpdir(), 'flowgrpo-bench-trainmem-models-'));
  try {
    for (const s of MODEL_SHAPES) {
      const { config, B, T } = s;
      const shape = `${s.name}, ${B} × ${T}`;
      const tokens = B * T;
      const chunked = await torchRows(py, s, shape, rows);
      // float32 projections (the default for a float32 checkpoint), then bfloat16 ones (a bf16
      // checkpoint's default, base_weights_dtype: auto): the weights rounded to bf16 here, as a
      // bf16 checkpoint's already are. Each with the other frozen weights prepacked and shared.
      for (const dtype of ['float32', 'bfloat16'] as const) {
        const half = dtype === 'bfloat16';
        const dir = join(tmp, `${config.numHiddenLayers}-${dtype}`);
        let built = false;
        for (const shared of [false, true]) {
          const label = `flowgrpo${half ? ', base_weights_dtype: bfloat16' : ''}, ${shared ? 'share_frozen_weights (prepacking off)' : 'default (prepacked)'}`;
          const estimate = estimatedMiB(config, B, T, undefined, shared, false, half);
          const available = availableMiB();
          if (available < estimate * 1.1) {
            notes.push(
              `${shape}, ${label} skipped: ${available.toFixed(0)} MiB available, the estimate is ${estimate.toFixed(0)}`,
            );
            continue;
          }
          if (!built) buildVocabStep(config, dir, DEFAULT_VOCAB_CHUNK_SIZE, T, false, dtype);
          built = true;
          const options = { intraOpThreads: 2, ...(shared && { prepackWeights: false }) };
          const ours = await ourStep(dir, B, T, options, 2);
          rows.push(vocabRow(shape, tokens, label, ours, chunked, estimate));
        }
        rmSync(dir, { recursive: true, force: true });
      }
    }
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  notes.push(
    'random weights, tied head, LoRA r=16 on all projections, vocabulary 151,936 (flowgrpo: the default chunks of 15,194); ' +
      'every position after the first a target; each run a fresh process, peak = its VmHWM (weights, session, step); ' +
      'PyTorch and ORT on 2 threads; flowgrpo a warm-up and the median of 2 steps, PyTorch a first step and the median of 2; ' +
      '× columns against the PyTorch chunked row of the same model. ' +
      `Load average at the end: ${loadAverage()}`,
  );
  return {
    title:
      'training memory and speed of whole models at the real vocabulary: LoRA train step, fresh process each',
    header: VOCAB_HEADER,
    rows,
    notes,
  };
}

/**
 * gradient_checkpointing at the issue's micro-batch (`train-memory-checkpointing`): Qwen2.5-0.5B's
 * 24 layers at 8 × 512 tokens, where keeping every layer's activations passes this machine's
 * memory. PyTorch eager f32 with the loss in row chunks, without and with each layer under
 * torch.utils.checkpoint (HF's gradient_checkpointing); flowgrpo with gradient_checkpointing,
 * prepacked and with share_frozen_weights, and without it where its estimate fits. A first step
 * and one timed step each (a step is minutes here). Each a fresh process.
 */
export async function benchTrainMemoryCheckpointing(): Promise<BenchSection> {
  const s = { name: 'Qwen2.5-0.5B (24 layers)', config: qwen05(24), B: 8, T: 512 };
  const { config, B, T } = s;
  const shape = `${s.name}, ${B} × ${T}`;
  const tokens = B * T;
  const rows: string[][] = [];
  const notes: string[] = [];
  const py = torchPython();
  if (!py)
    notes.push(
      'PyTorch skipped: no python3 with torch (apt-get install -y python3-torch libopenblas0-pthread)',
    );
  const torch = async (checkpointing: boolean) => {
    if (!py) return undefined;
    const label = `PyTorch eager f32, loss in ${TORCH_CHUNK_ROWS}-row chunks${checkpointing ? ', each layer checkpointed' : ''}`;
    try {
      const r = await torchVocabStep(py, TORCH_CHUNK_ROWS, s, { steps: 1, checkpointing });
      if (r) return { label, r };
      notes.push(`${label}: printed no timing`);
    } catch (e) {
      // Killed for memory, most likely: said, not hidden.
      notes.push(`${label} failed: ${(e as Error).message.split('\n')[0]}`);
    }
    return undefined;
  };
  const tmp = mkdtempSync(join(tmpdir(), 'flowgrpo-bench-trainmem-ckpt-'));
  try {
    // The reference of the × columns: PyTorch checkpointed, as flowgrpo's rows are.
    const ref = await torch(true);
    const kept = await torch(false);
    for (const t of [ref, kept]) if (t) rows.push(vocabRow(shape, tokens, t.label, t.r, ref?.r));
    for (const checkpointing of [true, false]) {
      const dir = join(tmp, String(checkpointing));
      let built = false;
      for (const shared of [true, false]) {
        const label = `flowgrpo, ${checkpointing ? 'gradient_checkpointing' : 'activations kept'}, ${shared ? 'share_frozen_weights' : 'prepacked'}`;
        const estimate = estimatedMiB(config, B, T, undefined, shared, checkpointing);
        const available = availableMiB();
        if (available < estimate * 1.1) {
          notes.push(
            `${label} skipped: ${available.toFixed(0)} MiB available, the estimate is ${estimate.toFixed(0)}`,
          );
          continue;
        }
        if (!built) buildVocabStep(config, dir, DEFAULT_VOCAB_CHUNK_SIZE, T, checkpointing);
        built = true;
        const options = { intraOpThreads: 2, ...(shared && { prepackWeights: false }) };
        const ours = await ourStep(dir, B, T, options, 1);
        rows.push(vocabRow(shape, tokens, label, ours, ref?.r, estimate));
      }
      rmSync(dir, { recursive: true, force: true });
    }
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  notes.push(
    'random weights, tied head, LoRA r=16 on all projections, vocabulary 151,936 (flowgrpo: the default chunks of 15,194); ' +
      'every position after the first a target; each run a fresh process, peak = its VmHWM (weights, session, step); ' +
      'PyTorch and ORT on 2 threads; flowgrpo a warm-up and one timed step, PyTorch a first step and one timed step; ' +
      '× columns against the PyTorch row with each layer checkpointed. ' +
      `Load average at the end: ${loadAverage()}`,
  );
  return {
    title: `activation recomputation per layer (gradient_checkpointing) at ${B} × ${T} tokens: LoRA train step, fresh process each`,
    header: VOCAB_HEADER,
    rows,
    notes,
  };
}
