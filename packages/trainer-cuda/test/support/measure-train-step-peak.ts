// Runs train-step-peak.ts or sampling-peak.ts in a fresh process (the memory a test measures is
// that process's alone) and returns what it printed: for a train step, the resident memory with
// the session loaded, the peak after one step, and the step's targets and loss; for sampling, the
// peak of a process that opened the generate graph and sampled.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { CreateSessionOptions } from '@flowgrpo/models';

export interface TrainStepPeak {
  beforeMiB: number;
  peakMiB: number;
  targets: number;
  loss: number;
  /** RssAnon taken by opening the session(s): what they hold of their own. */
  anonOpenMiB: number;
}

/** `script` (a file beside this one) in a fresh process: its last stdout line, as JSON. */
async function freshProcessJson<T>(script: string, args: readonly string[]): Promise<T> {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    [
      '--conditions=@flowgrpo/source',
      '--import',
      'tsx',
      join(import.meta.dirname, script),
      ...args,
    ],
    { timeout: 300_000 },
  );
  return JSON.parse(stdout.trim().split('\n').at(-1)!) as T;
}

/** One step of the train_step graph `onnx` on `rows` × `tokens` token ids below `vocab`. */
export async function measureTrainStepPeak(
  onnx: string,
  rows: number,
  tokens: number,
  vocab: number,
  /** Session options; a logprobs graph to open beside it; a file for the outputs (JSON). */
  o: { session?: CreateSessionOptions; logprobs?: string; outputs?: string } = {},
): Promise<TrainStepPeak> {
  return freshProcessJson('train-step-peak.ts', [
    onnx,
    `${rows}x${tokens}`,
    String(vocab),
    JSON.stringify(o),
  ]);
}

/**
 * The peak of a process that opens `dir`'s generate graph (or `o.graph`, with `o.prepackWeights`)
 * and samples `rows` rows.
 */
export async function measureSamplingPeak(
  dir: string,
  rows: number,
  promptTokens: number,
  newTokens: number,
  o: { graph?: 'generate' | 'decode'; prepackWeights?: boolean } = {},
): Promise<{ peakMiB: number }> {
  return freshProcessJson('sampling-peak.ts', [
    dir,
    String(rows),
    String(promptTokens),
    String(newTokens),
    JSON.stringify(o),
  ]);
}
