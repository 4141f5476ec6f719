// Opens an artifacts folder's generate graph in this fresh process, as the local rollout engine
// and `flowgrpo serve` do (one batcher), samples `rows` rows of `newTokens` tokens after a short
// prompt, and prints {peakMiB} as one JSON line: the process's VmHWM, the session's load included
// (test/memory-preflight.test.ts compares it with the estimate of a process that only samples).
import { readFileSync } from 'node:fs';
import { DecoderArtifacts, DecoderGenerator } from '@flowgrpo/models';

const [dir, rowsArg, promptArg, newArg] = process.argv.slice(2);
const artifacts = await DecoderArtifacts.open(dir!, { graphs: ['generate'], device: 'cpu' });
const generator = new DecoderGenerator(artifacts, { generateWorkers: 0 });
const prompts = Array.from({ length: Number(rowsArg) }, (_, i) =>
  Array.from({ length: Number(promptArg) }, (_, j) => ((i * 131 + j * 7) % 1000) + 10),
);
await generator.generate(prompts, { maxNewTokens: Number(newArg), temperature: 1, seed: 1 });
const peakMiB = Number(/VmHWM:\s+(\d+)/.exec(readFileSync('/proc/self/status', 'utf8'))![1]) / 1024;
console.log(JSON.stringify({ peakMiB }));
await artifacts.release();
