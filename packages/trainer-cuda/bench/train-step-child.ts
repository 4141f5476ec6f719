// One process per measurement of the train step's peak memory (bench/train-memory.ts): opens the
// train_step graph of an artifacts folder with the given session options, runs a warm-up and
// `steps` timed steps on a batch of random ids (every position a target, as the PyTorch anchor's
// next-token loss), and prints {ms, peakMiB, rssMiB} as one JSON line. A fresh process, so the
// peak RSS is the train step's and not the bench's.
import { join } from 'node:path';
import * as ort from 'onnxruntime-node';
import { readArtifactsManifest } from '../src/artifacts/decoder-artifacts.js';
import { type CreateSessionOptions, createSession } from '../src/runtime/session.js';

const [dir, shape, optionsJson, stepsArg] = process.argv.slice(2);
const [B, T] = shape!.split('x').map(Number) as [number, number];
const options = JSON.parse(optionsJson!) as CreateSessionOptions;
const manifest = readArtifactsManifest(dir!);
const V = manifest.config.vocabSize;
const int64 = (n: number, f: (i: number) => number, dims: number[]) =>
  new ort.Tensor(
    'int64',
    BigInt64Array.from({ length: n }, (_, i) => BigInt(f(i))),
    dims,
  );
const session = await createSession(join(dir!, manifest.graphs.train_step!.file), {
  ...options,
  device: 'cpu',
});
const K = T - 1;
const feeds: Record<string, ort.Tensor> = {
  input_ids: int64(B * T, (i) => (i * 7919 + 13) % V, [B, T]),
  attention_mask: int64(B * T, () => 1, [B, T]),
  position_ids: int64(B * T, (i) => i % T, [B, T]),
  target_positions: int64(B * K, (i) => i % K, [B, K]),
  target_ids: int64(B * K, (i) => ((i + 1) * 7919 + 13) % V, [B, K]),
};
for (const spec of session.inputs) {
  if (feeds[spec.name]) continue;
  const dims = (spec.shape ?? []).map((d) => (typeof d === 'number' ? d : d === 'batch' ? B : K));
  const n = dims.reduce((a, b) => a * b, 1);
  // LoRA A/B small and non-zero; per-target weights uniform (a mean loss); scalars 1 or 0.2.
  const value = spec.name.includes('.lora_')
    ? 0.01
    : spec.name.startsWith('epsilon')
      ? 0.2
      : spec.name.endsWith('weights') || spec.name === 'loss_mask'
        ? 1 / (B * K)
        : spec.name.endsWith('logprobs')
          ? -5
          : 1;
  feeds[spec.name] = new ort.Tensor('float32', new Float32Array(n).fill(value), dims);
}
await session.run(feeds);
const times: number[] = [];
for (let i = 0; i < Number(stepsArg ?? 3); i++) {
  const t0 = performance.now();
  await session.run(feeds);
  times.push(performance.now() - t0);
}
times.sort((a, b) => a - b);
const rss = process.memoryUsage().rss / 2 ** 20;
const peak = process.resourceUsage().maxRSS / 1024;
console.log(JSON.stringify({ ms: times[times.length >> 1], peakMiB: peak, rssMiB: rss }));
await session.release();
