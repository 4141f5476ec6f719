// One process per measurement of the train step's peak memory (bench/train-memory.ts): opens the
// train_step graph of an artifacts folder with the given session options, runs a warm-up and
// `steps` timed steps on a batch of random ids (every position a target, as the PyTorch anchor's
// next-token loss), and prints {ms, peakMiB, rssMiB, baseMiB, openMiB} as one JSON line: the
// peak, the resident set at the end, before the session was opened (node and ORT loaded) and
// right after it (the weights as the session holds them, prepacked copies included). A fresh
// process, so the peak RSS is the train step's and not the bench's.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { type CreateSessionOptions, createSession, readArtifactsManifest } from '@flowgrpo/models';
import { trainStepFeeds } from './models.js';

const [dir, shape, optionsJson, stepsArg] = process.argv.slice(2);
const [B, T] = shape!.split('x').map(Number) as [number, number];
const options = JSON.parse(optionsJson!) as CreateSessionOptions;
const manifest = readArtifactsManifest(dir!);
const V = manifest.config.vocabSize;
const rssMiB = () => process.memoryUsage().rss / 2 ** 20;
const base = rssMiB();
const session = await createSession(join(dir!, manifest.graphs.train_step!.file), {
  ...options,
  device: 'cpu',
});
const open = rssMiB();
const feeds = trainStepFeeds(session.inputs, B, T, V);
await session.run(feeds);
const times: number[] = [];
for (let i = 0; i < Number(stepsArg ?? 3); i++) {
  const t0 = performance.now();
  await session.run(feeds);
  times.push(performance.now() - t0);
}
times.sort((a, b) => a - b);
const rss = rssMiB();
// VmHWM: this process's own peak. (ru_maxrss would start from the parent's RSS: Linux carries
// the high-water mark over fork and exec.)
const peak = Number(/VmHWM:\s+(\d+)/.exec(readFileSync('/proc/self/status', 'utf8'))![1]) / 1024;
console.log(
  JSON.stringify({
    ms: times[times.length >> 1],
    peakMiB: peak,
    rssMiB: rss,
    baseMiB: base,
    openMiB: open,
  }),
);
await session.release();
