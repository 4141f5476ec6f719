// Snippets of packages/models/docs/runtime.md (compiled by the test command).
import { join } from 'node:path';
import { GraphBuilder, tensor, toOnnxModel, WeightsFileWriter, writeModel } from '@flowgrpo/graph';
import { createSession, DeviceTensorStore, type FeedValue, SessionWorker } from '@flowgrpo/models';
import type * as ort from 'onnxruntime-node';

export function sharedWeights(dir: string): void {
  // Two graphs built from the same weight array.
  const w = tensor('float32', [256, 256], new Float32Array(256 * 256));
  const modelOf = (name: string) => {
    const b = new GraphBuilder(name);
    b.output(b.matmul(b.input('x', 'float32', ['batch', 256]), b.initializer('w', w)), 'y');
    return toOnnxModel(b.graph);
  };
  const trainStep = modelOf('train_step');
  const decode = modelOf('decode');
  // #region weights-file
  const weights = new WeightsFileWriter(join(dir, 'weights.data')); // 64-byte aligned tensors
  writeModel(trainStep, { dir, fileName: 'train_step.onnx', weights });
  writeModel(decode, { dir, fileName: 'decode.onnx', weights }); // same arrays → stored once
  weights.close();
  // #endregion weights-file
}

export async function kvCacheOnGpu(
  decodePath: string,
  layers: number,
  firstFeeds: Record<string, FeedValue>,
  stepFeeds: Record<string, FeedValue>,
  n: number,
): Promise<void> {
  // #region device-store
  // A decode graph's KV cache: present.<l>.key/value outputs → past_key_values.<l>.* inputs.
  const carryMap: Record<string, string> = {};
  for (let l = 0; l < layers; l++)
    for (const kv of ['key', 'value'])
      carryMap[`present.${l}.${kv}`] = `past_key_values.${l}.${kv}`;
  const presentNames = Object.keys(carryMap);
  const s = await createSession(decodePath, { device: 'webgpu', deviceOutputs: presentNames });
  const store = new DeviceTensorStore();
  let r = await s.run({ ...firstFeeds });
  for (let step = 0; step < n; step++) {
    store.carry(r.device, carryMap); // present.i → past.i (the old ones are disposed)
    r = await s.run({ ...stepFeeds, ...store.feeds(s.inputNames) });
  }
  store.dispose();
  // #endregion device-store
}

export async function onAWorker(feeds: Record<string, ort.Tensor>): Promise<ort.Tensor[]> {
  // #region worker
  const worker = new SessionWorker();
  const carry = { 'present.0.key': 'past_key_values.0.key' }; // output → next run's input
  const policy = await worker.load('decode.onnx', { device: 'auto', carry });
  const out = await policy.run(feeds, { transfer: true }); // main thread stays responsive
  await worker.terminate();
  // #endregion worker
  return Object.values(out);
}
