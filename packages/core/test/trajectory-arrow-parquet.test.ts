import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { tableFromIPC } from 'apache-arrow';
import { readParquet } from 'parquet-wasm';
import { describe, expect, it } from 'vitest';
import {
  readTrajectoriesParquet,
  type Trajectory,
  TrajectorySchema,
  tableToTrajectories,
  writeTrajectoriesParquet,
} from '../src/index.js';
import { testDir } from './temp-dir.js';

const dir = testDir('trajpq');

function sample(): Trajectory[] {
  return [
    TrajectorySchema.parse({
      queryId: 'q1',
      groupId: 'g1',
      turns: [
        {
          index: 0,
          promptTokens: [151644, 872, 198],
          actionTokens: [40, 1184],
          actionLogprobs: new Float32Array([-0.25, Number.NEGATIVE_INFINITY]),
          text: 'search',
          toolName: 'search',
          toolInput: { query: 'capital of France' },
          toolResult: 'Paris is the capital of France.',
          advantage: -0.5,
        },
        {
          index: 1,
          promptTokens: [151644, 872, 198, 40, 1184],
          actionTokens: [],
          actionLogprobs: [],
          text: '',
          parsed: false,
        },
      ],
      finalAnswer: 'Paris',
      reward: 0.5,
      advantage: -0.5,
      stopReason: 'max_turns',
      timings: { planner: 1.5 },
    }),
    TrajectorySchema.parse({
      queryId: 'q1',
      groupId: 'g1',
      segments: [
        { tokens: [1, 2], trainable: false, kind: 'prompt' },
        { tokens: [3], logprobs: [-0.125], trainable: true, kind: 'action' },
      ],
      finalAnswer: 'Lyon',
      reward: 0,
      stopReason: 'answer',
      metadata: { seed: 3 },
    }),
    TrajectorySchema.parse({ queryId: 'q2', groupId: 'g2', finalAnswer: '', stopReason: 'error' }),
  ];
}

describe('trajectories as Parquet', () => {
  it('round-trips through a Parquet file', async () => {
    const path = join(dir, 'rollouts.parquet');
    await writeTrajectoriesParquet(path, sample());
    expect(await readTrajectoriesParquet(path)).toEqual(sample());
  });

  it('arrow-rs (parquet-wasm, an independent reader) reads the same turns', async () => {
    const path = join(dir, 'rollouts-rs.parquet');
    await writeTrajectoriesParquet(path, sample());
    const table = tableFromIPC(readParquet(new Uint8Array(await readFile(path))).intoIPCStream());
    expect(table.numRows).toBe(2 + 2 + 1);
    expect(Array.from(table.getChild('promptTokens')!.get(1).toArray())).toEqual([
      151644, 872, 198, 40, 1184,
    ]);
    expect(tableToTrajectories(table)).toEqual(sample());
  });
});
