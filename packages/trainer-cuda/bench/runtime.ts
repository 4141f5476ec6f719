// Runtime benchmarks: per-call overhead of a session run, and MatMul throughput per device.
// Speed is measured here, never asserted in tests.

import {
  DEFAULT_IR_VERSION,
  DEFAULT_OPSET,
  encodeModel,
  OnnxDataType,
  type OnnxGraph,
  onnxTensor,
} from '@flowgrpo/graph';
import {
  type CreateSessionOptions,
  createSession,
  deviceAvailability,
  SessionWorker,
} from '@flowgrpo/models';
import * as ort from 'onnxruntime-node';
import type { BenchSection } from './table.js';

const F = OnnxDataType.FLOAT;

function bytes(graph: OnnxGraph): Uint8Array {
  return encodeModel({
    irVersion: DEFAULT_IR_VERSION,
    opsetImports: [{ domain: '', version: DEFAULT_OPSET }],
    producerName: 'flowgrpo-bench',
    producerVersion: '0',
    graph,
  });
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** Time `fn` repeatedly: `warmup` untimed calls, then until `minRuns` and `budgetMs` are met. */
async function timeRuns(
  fn: () => Promise<unknown>,
  o: { warmup: number; minRuns: number; maxRuns: number; budgetMs: number },
): Promise<number[]> {
  for (let i = 0; i < o.warmup; i++) await fn();
  const times: number[] = [];
  const start = performance.now();
  while (
    times.length < o.maxRuns &&
    (times.length < o.minRuns || performance.now() - start < o.budgetMs)
  ) {
    const t0 = performance.now();
    await fn();
    times.push(performance.now() - t0);
  }
  return times;
}

const tinyModel = bytes({
  name: 'tiny',
  nodes: [{ opType: 'Add', inputs: ['x', 'x'], outputs: ['y'] }],
  inputs: [{ name: 'x', elemType: F, shape: [4] }],
  outputs: [{ name: 'y', elemType: F, shape: [4] }],
  initializers: [],
});

export async function benchOverhead(): Promise<BenchSection> {
  const rows: string[][] = [];
  const x = new ort.Tensor('float32', new Float32Array([1, 2, 3, 4]), [4]);
  const opts = { warmup: 200, minRuns: 2000, maxRuns: 20_000, budgetMs: 1500 };

  const raw = await ort.InferenceSession.create(tinyModel, {
    executionProviders: ['cpu'],
    intraOpNumThreads: 1,
  });
  const tRaw = await timeRuns(() => raw.run({ x }), opts);
  rows.push(['ort InferenceSession.run', 'cpu', String(tRaw.length), us(median(tRaw))]);
  await raw.release();

  const s = await createSession(tinyModel, { device: 'cpu', intraOpThreads: 1 });
  const tS = await timeRuns(() => s.run({ x }), opts);
  rows.push(['flowgrpo Session.run (validated feeds)', 'cpu', String(tS.length), us(median(tS))]);
  await s.release();

  const w = new SessionWorker();
  const ws = await w.load(tinyModel, { device: 'cpu', intraOpThreads: 1 });
  const tW = await timeRuns(() => ws.run({ x }), { ...opts, minRuns: 1000, maxRuns: 5000 });
  rows.push(['flowgrpo WorkerSession.run (round trip)', 'cpu', String(tW.length), us(median(tW))]);
  await w.terminate();

  return {
    title: 'Per-call overhead: y = x + x on 4 floats (median over runs)',
    header: ['path', 'device', 'runs', 'median µs'],
    rows,
    notes: [],
  };
}

function us(ms: number): string {
  return (ms * 1000).toFixed(1);
}

function matmulModel(n: number): Uint8Array {
  const b = new Float32Array(n * n);
  for (let i = 0; i < b.length; i++) b[i] = ((i * 7919) % 13) / 13 - 0.5;
  return bytes({
    name: `matmul_${n}`,
    nodes: [{ opType: 'MatMul', inputs: ['a', 'b'], outputs: ['c'] }],
    inputs: [{ name: 'a', elemType: F, shape: [n, n] }],
    outputs: [{ name: 'c', elemType: F, shape: [n, n] }],
    initializers: [onnxTensor('b', b, [n, n])],
  });
}

export async function benchMatMul(sizes = [256, 512, 1024]): Promise<BenchSection> {
  const rows: string[][] = [];
  const notes: string[] = [];
  const configs: { label: string; options: CreateSessionOptions }[] = [
    { label: 'cpu, 1 thread', options: { device: 'cpu', intraOpThreads: 1 } },
    { label: 'cpu, 2 threads', options: { device: 'cpu', intraOpThreads: 2 } },
  ];
  for (const device of ['webgpu', 'cuda'] as const) {
    const a = await deviceAvailability(device);
    if (a.available) configs.push({ label: device, options: { device, disableCpuFallback: true } });
    else notes.push(`${device} skipped: ${a.reason}`);
  }
  for (const n of sizes) {
    const model = matmulModel(n);
    const a = new ort.Tensor(
      'float32',
      Float32Array.from({ length: n * n }, (_, i) => ((i * 31) % 17) / 17 - 0.5),
      [n, n],
    );
    const flops = 2 * n * n * n;
    for (const c of configs) {
      const s = await createSession(model, c.options);
      const times = await timeRuns(() => s.run({ a }), {
        warmup: 2,
        minRuns: 5,
        maxRuns: 500,
        budgetMs: 600,
      });
      await s.release();
      const ms = median(times);
      rows.push([
        String(n),
        c.label,
        String(times.length),
        ms.toFixed(3),
        (flops / (ms * 1e6)).toFixed(1),
      ]);
    }
  }
  notes.push('times include copying the input in and the output out (host tensors)');
  return {
    title: 'MatMul [n,n]·[n,n] fp32 (B an initializer), median run',
    header: ['n', 'device', 'runs', 'median ms', 'GFLOP/s'],
    rows,
    notes,
  };
}
