// Shared by the graph/ops/autodiff/optim tests: a seeded RNG and a real onnxruntime-node session
// over an exported graph, compared with the reference evaluator.
import * as ort from 'onnxruntime-node';
import { expect } from 'vitest';
import {
  encodeModel,
  evaluate,
  type Graph,
  type Tensor,
  tensor,
  toOnnxModel,
  toTypedArray,
} from '../src/index.js';

export function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

export function randomTensor(r: () => number, shape: number[], lo = -1, hi = 1): Tensor {
  const n = shape.reduce((p, d) => p * d, 1);
  return tensor(
    'float32',
    shape,
    Array.from({ length: n }, () => Math.fround(lo + (hi - lo) * r())),
  );
}

const ORT_TYPE: Record<string, ort.Tensor.Type> = {
  float32: 'float32',
  float64: 'float64',
  int64: 'int64',
  int32: 'int32',
  bool: 'bool',
  float16: 'float16',
  uint8: 'uint8',
  int8: 'int8',
};

export function toOrt(t: Tensor): ort.Tensor {
  return new ort.Tensor(ORT_TYPE[t.dtype]!, toTypedArray(t) as never, [...t.shape]);
}

export function fromOrt(t: ort.Tensor): Tensor {
  const data = t.data as ArrayLike<number | bigint | boolean>;
  return tensor(
    (t.type === 'bool' ? 'bool' : t.type) as Tensor['dtype'],
    [...t.dims],
    Array.from(data, Number),
  );
}

export async function createSession(graph: Graph): Promise<ort.InferenceSession> {
  const bytes = encodeModel(toOnnxModel(graph, { opset: 21 }));
  return ort.InferenceSession.create(bytes, { logSeverityLevel: 3, intraOpNumThreads: 1 });
}

/** Runs the graph's outputs in onnxruntime-node (CPU EP). */
export async function runOrt(
  graph: Graph,
  feeds: Readonly<Record<string, Tensor>>,
): Promise<Record<string, Tensor>> {
  const session = await createSession(graph);
  const inputs = Object.fromEntries(graph.inputs.map((v) => [v.name, toOrt(feeds[v.name]!)]));
  const out = await session.run(inputs);
  await session.release();
  return Object.fromEntries(Object.entries(out).map(([k, v]) => [k, fromOrt(v)]));
}

/** |got − want| ≤ rtol · max(1, max|want|) elementwise (float32 results vs float64 reference). */
export function expectClose(got: Tensor, want: Tensor, rtol = 1e-5, what = ''): void {
  expect(got.shape, `${what} shape`).toEqual(want.shape);
  let scale = 1;
  for (const x of want.data) scale = Math.max(scale, Math.abs(x));
  let worst = 0;
  for (let i = 0; i < want.data.length; i++)
    worst = Math.max(worst, Math.abs(got.data[i]! - want.data[i]!));
  expect(worst / scale, `${what} max error`).toBeLessThanOrEqual(rtol);
}

/** Exports the graph, runs it in ORT and checks every output against the TS evaluator. */
export async function expectOrtMatches(
  graph: Graph,
  feeds: Readonly<Record<string, Tensor>>,
  rtol = 1e-5,
): Promise<void> {
  const want = evaluate(graph, feeds);
  const got = await runOrt(graph, feeds);
  for (const [name, t] of Object.entries(want)) expectClose(got[name]!, t, rtol, name);
}
