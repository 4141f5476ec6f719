// The agent-vercel-ai example's --quick path: the Vercel AI SDK streams the agent (SSE)
// through the gateway, GRPOTrainer trains on the recorded calls, and every recorded call is
// token-exact (the trainer's recomputed logprobs equal the sampled ones to ≤ 1e-4), while the
// agent streams each answer piece by piece.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readTrajectoriesParquet } from '@flowgrpo/core';
import { afterAll, expect, it } from 'vitest';
import { runAlmanacAgent } from '../src/agent.js';
import { trainAgent } from '../src/train.js';

const out = mkdtempSync(join(tmpdir(), 'flowgrpo-example-vercel-ai-'));
afterAll(() => rmSync(out, { recursive: true, force: true }));

it('trains the agent for 2 steps through the gateway, token-exactly', async () => {
  const lines: string[] = [];
  /** Each run's text as it streamed, piece by piece. */
  const streamed: string[][] = [];
  const r = await trainAgent({
    out,
    steps: 2,
    queriesPerStep: 2,
    generations: 4,
    log: (l) => lines.push(l),
    runAgent: (o) => {
      const pieces: string[] = [];
      streamed.push(pieces);
      return runAlmanacAgent({ ...o, onText: (d) => pieces.push(d) });
    },
  });
  // The agent streams, and the gateway sends text as it is sampled: answers come in pieces.
  expect(streamed.some((pieces) => pieces.length > 1)).toBe(true);
  expect(r.globalStep).toBe(2);
  const steps = r.metrics.filter((m) => typeof m.reward === 'number');
  expect(steps).toHaveLength(2);
  for (const m of steps) {
    expect(m['logprob_mismatch/max'] as number).toBeLessThanOrEqual(1e-4);
    expect(m['train/tokens'] as number).toBeGreaterThan(0);
  }
  const trajectories = await readTrajectoriesParquet(
    join(out, 'run', 'rollouts', 'step-000002.parquet'),
  );
  expect(trajectories).toHaveLength(8);
  for (const t of trajectories) {
    // Each rollout is the agent's model calls as the gateway recorded them, with its reward.
    expect(((t.metadata?.calls ?? []) as unknown[]).length).toBeGreaterThanOrEqual(1);
    expect(t.stopReason).not.toBe('error');
    expect(typeof t.reward).toBe('number');
  }
  expect(lines.some((l) => l.startsWith('step 2: reward'))).toBe(true);
});
