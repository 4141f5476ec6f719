// Where the time goes: ORT's profiler over one decode step (B = the shape's largest decode batch,
// a 16-token past) and one LoRA train step (the shape's train batch) on a device, the top ops by
// total duration. The GPU run has one call, so the costs that would explain a gap to PyTorch are
// recorded in the same run as the gap. The first run of each session (shader compilation, the
// upload of the weights) is left out: only kernels inside the later `model_run` windows count.
// The host's view (ORT's `Node` events) and, on WebGPU, the GPU's (its `Api` timestamp events)
// are kept apart: the first is dispatch cost, the second kernel time.

import { mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { Device } from '@flowgrpo/models';
import {
  type GraphManifest,
  LORA_TARGET_MODULES,
  parseDecoderConfig,
  readArtifactsManifest,
} from '@flowgrpo/models';
import * as ort from 'onnxruntime-node';
import { buildTrainingArtifacts } from '../../src/index.js';
import { randomWeights, trainStepFeeds } from '../models.js';
import type { ShapeSpec } from './ours.js';

interface TraceEvent {
  cat?: string;
  name?: string;
  ts?: number;
  dur?: number;
  args?: { op_name?: string; provider?: string };
}

const RUNS = 4;

/** A decode step's feeds from the graph's input specs: B rows, one new token after P cached. */
function decodeFeeds(graph: GraphManifest, B: number, P: number, vocab: number) {
  const feeds: Record<string, ort.Tensor> = {};
  let s = 12345;
  const rand = () => {
    s = (s * 1103515245 + 12345) % 2 ** 31;
    return s / 2 ** 31 - 0.5;
  };
  for (const spec of graph.inputs) {
    const dims = spec.shape.map((d) =>
      typeof d === 'number'
        ? d
        : d === 'batch'
          ? B
          : d === 'seq'
            ? 1
            : d === 'past_seq'
              ? P
              : d === 'total_seq'
                ? P + 1
                : 1,
    );
    const n = dims.reduce((a, b) => a * b, 1);
    if (spec.dtype === 'int64') {
      const v =
        spec.name === 'input_ids'
          ? (i: number) => (i * 7919 + 13) % vocab
          : spec.name === 'position_ids'
            ? () => P
            : () => 1;
      feeds[spec.name] = new ort.Tensor(
        'int64',
        BigInt64Array.from({ length: n }, (_, i) => BigInt(v(i))),
        dims,
      );
    } else {
      // The adapter small (as a trained one is), lora_scale 1, the past KV random.
      const f = spec.name.includes('.lora_')
        ? () => 0.01 * rand()
        : spec.name === 'lora_scale'
          ? () => 1
          : rand;
      feeds[spec.name] = new ort.Tensor('float32', Float32Array.from({ length: n }, f), dims);
    }
  }
  return feeds;
}

/**
 * Top ops by total duration over every run after the first, in two lists: `Node` events (the
 * EP's kernel calls as the host sees them: on WebGPU, mostly recording and dispatch) and `Api`
 * events (on WebGPU, the GPU timestamps of each node, named `<node>&<op>&<op>`), grouped by op.
 */
function topOps(traceFile: string, top = 12) {
  const events = JSON.parse(readFileSync(traceFile, 'utf8')) as TraceEvent[];
  const runs = events
    .filter((e) => e.cat === 'Session' && e.name === 'model_run')
    .sort((a, b) => a.ts! - b.ts!);
  const counted = runs.slice(1).map((r) => [r.ts!, r.ts! + r.dur!] as const);
  const n = Math.max(1, counted.length);
  const inside = (t: number) => counted.some(([a, b]) => t >= a && t <= b);
  const host = new Map<string, { us: number; count: number }>();
  const gpu = new Map<string, { us: number; count: number }>();
  const add = (m: typeof host, key: string, us: number) => {
    const g = m.get(key) ?? { us: 0, count: 0 };
    g.us += us;
    g.count++;
    m.set(key, g);
  };
  for (const e of events) {
    if (e.dur === undefined || e.ts === undefined || !inside(e.ts)) continue;
    if (e.cat === 'Node' && e.name?.endsWith('_kernel_time'))
      add(host, `${e.args?.op_name ?? e.name} (${e.args?.provider ?? '?'})`, e.dur);
    else if (e.cat === 'Api') add(gpu, e.name?.split('&')[1] ?? e.name ?? '?', e.dur);
  }
  const list = (m: typeof host) => {
    const total = [...m.values()].reduce((a, g) => a + g.us, 0);
    return {
      msPerRun: total / 1000 / n,
      top: [...m.entries()]
        .sort((a, b) => b[1].us - a[1].us)
        .slice(0, top)
        .map(([op, g]) => ({ op, msPerRun: g.us / 1000 / n, callsPerRun: g.count / n })),
    };
  };
  return {
    runs: counted.length,
    msPerRun: counted.reduce((a, [s, e]) => a + (e - s), 0) / 1000 / n,
    hostKernels: list(host),
    gpuKernels: list(gpu),
  };
}

async function profileGraph(
  file: string,
  device: Device,
  feeds: Record<string, ort.Tensor>,
  dir: string,
) {
  const prefix = join(dir, 'profile');
  const session = await ort.InferenceSession.create(file, {
    executionProviders: [device === 'webgpu' ? 'webgpu' : 'cpu'],
    enableProfiling: true,
    profileFilePrefix: prefix,
    logSeverityLevel: 3,
  });
  try {
    for (let i = 0; i < RUNS; i++) await session.run(feeds);
    session.endProfiling();
  } finally {
    await session.release();
  }
  const trace = readdirSync(dir).find((f) => f.startsWith('profile') && f.endsWith('.json'));
  if (!trace) throw new Error(`ORT wrote no profile into ${dir}`);
  return topOps(join(dir, trace));
}

export async function profileShape(
  shape: ShapeSpec,
  device: Device,
  work: string,
): Promise<Record<string, unknown>> {
  const config = parseDecoderConfig(shape.config);
  const B = Math.max(...shape.decode.batches);
  const P = shape.decode.prompt;
  const { batch, seq } = shape.train;
  const dir = join(work, `profile-${device}`);
  try {
    buildTrainingArtifacts(randomWeights(config), join(dir, 'art'), {
      graphs: ['decode', 'train_step'],
      maxPositions: Math.max(seq, P + 1),
      lora: { ...shape.train.lora, targetModules: LORA_TARGET_MODULES },
    });
    const manifest = readArtifactsManifest(join(dir, 'art'));
    const decodeGraph = manifest.graphs.decode!;
    const trainGraph = manifest.graphs.train_step!;
    mkdirSync(join(dir, 'decode'), { recursive: true });
    mkdirSync(join(dir, 'train'), { recursive: true });
    // The LoRA inputs of the decode graph are fed like any float input (random, small enough).
    const decode = await profileGraph(
      join(dir, 'art', decodeGraph.file),
      device,
      decodeFeeds(decodeGraph, B, P, config.vocabSize),
      join(dir, 'decode'),
    );
    const train = await profileGraph(
      join(dir, 'art', trainGraph.file),
      device,
      trainStepFeeds(trainGraph.inputs, batch, seq, config.vocabSize),
      join(dir, 'train'),
    );
    return {
      device,
      decode: { batch: B, past: P, ...decode },
      trainStep: { batch, seq, note: 'forward + backward (AdamW is a separate graph)', ...train },
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
