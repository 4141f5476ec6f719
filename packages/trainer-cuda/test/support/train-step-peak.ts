// Runs one train step of a train_step graph in this fresh process and prints, as one JSON line,
// the resident memory before the step (the session loaded: weights, prepacked copies) and the
// process's peak (VmHWM) after it, so that the step's own peak is their difference
// (measure-train-step-peak.ts runs it for test/vocab-chunks.test.ts, test/memory-preflight.test.ts and
// test/shared-weights.test.ts). Batch: B rows × T tokens, every position after the first a
// target; LoRA matrices small and non-zero, a mean NLL objective. Optional (one JSON argument):
// the session options, the logprobs graph to open beside it as a trainer does, and a file to
// write the step's outputs to (JSON, by name). It also prints the anonymous memory the sessions
// took to open (RssAnon: the weights' copies of their own, not the mapped weights file).
import { readFileSync, writeFileSync } from 'node:fs';
import { type CreateSessionOptions, createSession } from '@flowgrpo/models';
import * as ort from 'onnxruntime-node';

const [file, shape, vocab, extraJson] = process.argv.slice(2);
const extra = JSON.parse(extraJson ?? '{}') as {
  session?: CreateSessionOptions;
  logprobs?: string;
  outputs?: string;
};
const options = extra.session ?? {};
const logprobsFile = extra.logprobs;
const [B, T] = shape!.split('x').map(Number) as [number, number];
const V = Number(vocab);
const K = T - 1;
const status = (key: string) =>
  Number(new RegExp(`${key}:\\s+(\\d+)`).exec(readFileSync('/proc/self/status', 'utf8'))![1]) /
  1024;
const int64 = (dims: number[], f: (i: number) => number) =>
  new ort.Tensor(
    'int64',
    BigInt64Array.from({ length: dims[0]! * dims[1]! }, (_, i) => BigInt(f(i))),
    dims,
  );
const anonBefore = status('RssAnon');
const session = await createSession(file!, { ...options, device: 'cpu' });
const logprobs = logprobsFile
  ? await createSession(logprobsFile, { ...options, device: 'cpu' })
  : undefined;
const anonOpenMiB = status('RssAnon') - anonBefore;
const feeds: Record<string, ort.Tensor> = {
  input_ids: int64([B, T], (i) => (i * 7919 + 13) % V),
  attention_mask: int64([B, T], () => 1),
  position_ids: int64([B, T], (i) => i % T),
  segment_ids: int64([B, T], () => 0),
  target_positions: int64([B, K], (i) => i % K),
  target_ids: int64([B, K], (i) => ((i + 1) * 7919 + 13) % V),
  on_policy: new ort.Tensor('bool', Uint8Array.of(0), []),
  is_weighted: new ort.Tensor('bool', new Uint8Array(B * K), [B, K]),
  is_mask: new ort.Tensor('bool', Uint8Array.of(0), []),
};
for (const spec of session.inputs) {
  if (feeds[spec.name]) continue;
  const dims = (spec.shape ?? []).map((d) =>
    typeof d === 'number' ? d : d === 'batch' ? B : d === 'seq' ? T : K,
  );
  const n = dims.reduce((a, b) => a * b, 1);
  const value = spec.name.startsWith('acc.')
    ? 0
    : spec.name.includes('.lora_')
      ? 0.01
      : spec.name === 'nll_weights'
        ? 1 / (B * K)
        : spec.name === 'pg_weights' || spec.name === 'beta' || spec.name === 'kl_coeffs'
          ? 0
          : 1;
  feeds[spec.name] = new ort.Tensor('float32', new Float32Array(n).fill(value), dims);
}
const beforeMiB = status('VmRSS');
const { outputs } = await session.run(feeds);
const peakMiB = status('VmHWM');
const loss = (outputs.loss!.data as Float32Array)[0]!;
if (extra.outputs)
  writeFileSync(
    extra.outputs,
    JSON.stringify(
      Object.fromEntries(
        Object.entries(outputs).map(([k, t]) => [k, Array.from(t.data as Float32Array)]),
      ),
    ),
  );
await session.release();
await logprobs?.release();
console.log(
  JSON.stringify({
    beforeMiB,
    peakMiB,
    targets: B * K,
    loss,
    anonOpenMiB,
  }),
);
