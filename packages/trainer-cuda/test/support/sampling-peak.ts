// Opens an artifacts folder's generate graph in this fresh process, as the local rollout engine
// and `flowgrpo serve` do (one batcher) — or the decode graph without prepacking, as the engine
// does with share_sampling_weights — samples `rows` rows of `newTokens` tokens after a short
// prompt, and prints {peakMiB} as one JSON line: the process's VmHWM, the session's load included
// (test/memory-preflight.test.ts compares it with the estimate of a process that only samples).
import { readFileSync } from 'node:fs';
import { DecoderArtifacts, DecoderGenerator } from '@flowgrpo/models';

const [dir, rowsArg, promptArg, newArg, optionsArg] = process.argv.slice(2);
// share_sampling_weights' session: {"graph": "decode", "prepackWeights": false}.
const o = JSON.parse(optionsArg ?? '{}') as {
  graph?: 'generate' | 'decode';
  prepackWeights?: boolean;
};
const artifacts = await DecoderArtifacts.open(dir!, {
  graphs: [o.graph ?? 'generate'],
  device: 'cpu',
  ...(o.prepackWeights === false && { prepackWeights: false }),
});
// The fused generator opens the generate graph of its own accord: not when decode was asked for.
const generator = new DecoderGenerator(artifacts, {
  generateWorkers: 0,
  useGenerateGraph: (o.graph ?? 'generate') === 'generate',
});
const prompts = Array.from({ length: Number(rowsArg) }, (_, i) =>
  Array.from({ length: Number(promptArg) }, (_, j) => ((i * 131 + j * 7) % 1000) + 10),
);
await generator.generate(prompts, { maxNewTokens: Number(newArg), temperature: 1, seed: 1 });
const peakMiB = Number(/VmHWM:\s+(\d+)/.exec(readFileSync('/proc/self/status', 'utf8'))![1]) / 1024;
console.log(JSON.stringify({ peakMiB }));
await artifacts.release();
