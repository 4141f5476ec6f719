// Shared by the graph/ops/autodiff/optim tests: run an exported graph in a real onnxruntime-node
// session (CPU EP) and compare it with the float64 reference evaluator. ORT is a devDependency of
// @flowgrpo/graph: only tests touch a runtime.
import * as ort from 'onnxruntime-node';
import { expect } from 'vitest';
import {
  encodeModel,
  evaluate,
  type Graph,
  type HostTensor,
  tensor,
  toOnnxModel,
  toTypedArray,
} from '../src/index.js';
import { tensorMismatch } from '../src/testing/index.js';

export function toOrt(t: HostTensor): ort.Tensor {
  return new ort.Tensor(t.dtype as ort.Tensor.Type, toTypedArray(t) as never, [...t.shape]);
}

export function fromOrt(t: ort.Tensor): HostTensor {
  const data = t.data as ArrayLike<number | bigint | boolean>;
  return tensor(t.type as HostTensor['dtype'], [...t.dims], Array.from(data, Number));
}

export async function createSession(graph: Graph): Promise<ort.InferenceSession> {
  const bytes = encodeModel(toOnnxModel(graph, { opset: 21 }));
  return ort.InferenceSession.create(bytes, { logSeverityLevel: 3, intraOpNumThreads: 1 });
}

/** Runs the graph's outputs in onnxruntime-node (CPU EP). */
export async function runOrt(
  graph: Graph,
  feeds: Readonly<Record<string, HostTensor>>,
): Promise<Record<string, HostTensor>> {
  const session = await createSession(graph);
  const inputs = Object.fromEntries(graph.inputs.map((v) => [v.name, toOrt(feeds[v.name]!)]));
  const out = await session.run(inputs);
  await session.release();
  return Object.fromEntries(Object.entries(out).map(([k, v]) => [k, fromOrt(v)]));
}

/** |got − want| ≤ rtol · max(1, max|want|) elementwise (float32 results vs float64 reference). */
export function expectClose(got: HostTensor, want: HostTensor, rtol = 1e-5, what = ''): void {
  expect(tensorMismatch(got, want, rtol, what)).toBeUndefined();
}

/** Exports the graph, runs it in ORT and checks every output against the TS evaluator. */
export async function expectOrtMatches(
  graph: Graph,
  feeds: Readonly<Record<string, HostTensor>>,
  rtol = 1e-5,
): Promise<void> {
  const want = evaluate(graph, feeds);
  const got = await runOrt(graph, feeds);
  for (const [name, t] of Object.entries(want)) expectClose(got[name]!, t, rtol, name);
}
