// Training memory and speed against PyTorch eager: the LoRA train step (forward + backward,
// r = 16, alpha = 32 on q/k/v/o/gate/up/down, mean next-token NLL) of the two shapes of
// ../shared/anchors/torch/train_step.py, each side in its own process so that peak RSS is the
// train step's. Our side runs the train_step graph with each candidate set of session memory
// options (bench/train-step-child.ts); the table shows what each one does to the peak and the
// speed, and which is the default (createSession's).

import { execFile, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { CreateSessionOptions, DecoderConfig } from '@flowgrpo/models';
import { LORA_TARGET_MODULES } from '@flowgrpo/models';
import { buildTrainingArtifacts } from '../src/index.js';
import { ANCHORS, loadAverage, median } from './anchors.js';
import { qwen05, randomWeights } from './models.js';
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

async function ourStep(
  dir: string,
  B: number,
  T: number,
  options: CreateSessionOptions,
): Promise<{ ms: number; peakMiB: number }> {
  const { stdout } = await run(
    process.execPath,
    [
      '--conditions=@flowgrpo/source',
      '--import',
      'tsx',
      join(import.meta.dirname, 'train-step-child.ts'),
      dir,
      `${B}x${T}`,
      JSON.stringify(options),
      '4',
    ],
    { timeout: 600_000, maxBuffer: 1 << 24 },
  );
  const line = stdout.trim().split('\n').at(-1)!;
  return JSON.parse(line) as { ms: number; peakMiB: number };
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
        ]);
      }
      for (const v of VARIANTS) {
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
        ]);
      }
    }
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  notes.push(
    `shape a: hidden 256, 4 layers, vocab 4096, batch 4 × 256; b: hidden 896, 2 layers (Qwen2.5-0.5B), vocab 8192, batch 1 × 512. ` +
      `Peak = the process's VmHWM (its peak resident set) over a warm-up and 4 steps, each side in a fresh process; ` +
      `flowgrpo rows: the median over their processes; ORT's default is one thread per core (2 here). ` +
      `Load average at the end: ${loadAverage()}`,
  );
  return {
    title:
      'training memory and speed vs PyTorch: LoRA train step (forward + backward), fresh process each',
    header: ['shape', 'run', 'tokens/s', 'peak MiB', '× torch tok/s', '× torch peak'],
    rows,
    notes,
  };
}
