// WorkerLoraPolicy: the GRPO trainer's policy in a worker thread (used when rollouts are sampled
// while the update runs: max_staleness ≥ 1). The reference is the same LoraPolicy on this thread,
// opened from the same artifacts and adapter: log-probs, two optimizer updates (their statistics,
// the log-probs they return, the adapter after them) and the exported optimizer state must be the
// same bits — the worker only moves the calls. Failures come back as typed errors, and a released
// policy refuses further calls.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FlowGrpoError } from '@flowgrpo/core';
import { initLoraParams } from '@flowgrpo/models';
import { afterAll, describe, expect, it } from 'vitest';
import { LoraPolicy } from '../src/index.js';
import { TrainLoopError } from '../src/optimizer-step/errors.js';
import { WorkerLoraPolicy } from '../src/update/policy-worker.js';
import {
  oneTurnBatch,
  tinyLora,
  tinyLoraArtifacts,
  tinyUpdateHp,
} from './support/tiny-lora-policy.js';

const tmp = mkdtempSync(join(tmpdir(), 'flowgrpo-policy-worker-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const { config, dir } = tinyLoraArtifacts(tmp, 2, 'policy-worker');
/** Four one-turn trajectories of random ids, advantages of both signs. */
const batch = () =>
  oneTurnBatch(config, {
    rngSeed: 'policy-worker',
    advantages: [1, -1, 0.5, -0.5],
    promptLength: 5,
    actionLength: (k) => 2 + k,
    logprob: () => 0,
  });

const hp = tinyUpdateHp(4096);

/** Log-probs, two updates and the state, through `policy`. */
async function drive(
  policy: Pick<LoraPolicy, 'logprobs' | 'update' | 'params' | 'step' | 'exportState'>,
) {
  const { rows, targets } = batch();
  const pgWeights = new Float64Array(targets.count).fill(1 / targets.count);
  const before = await policy.logprobs(rows, targets, {
    loraScale: 1,
    temperature: 1,
    maxTokensPerMicrobatch: 4096,
  });
  const first = await policy.update(rows, targets, { pgWeights }, hp);
  const second = await policy.update(rows, targets, { old: first.logprobs, pgWeights }, hp);
  const state = await policy.exportState();
  return {
    before: [...before],
    updates: [first, second].map((u) => ({ ...u, logprobs: [...u.logprobs] })),
    params: Object.fromEntries([...policy.params].map(([k, v]) => [k, [...v]])),
    step: policy.step,
    moments: Object.fromEntries(
      Object.entries(state.m).map(([k, t]) => [k, [...(t.data as Float32Array)]]),
    ),
  };
}

describe('WorkerLoraPolicy', () => {
  it('computes what LoraPolicy computes on this thread, to the bit', async () => {
    const options = {
      artifacts: dir,
      params: initLoraParams(config, tinyLora, 3),
      intraOpThreads: 1,
    };
    const here = await LoraPolicy.open(options);
    const there = await WorkerLoraPolicy.open(options);
    try {
      const a = await drive(here);
      const b = await drive(there);
      expect(b.step).toBe(2);
      expect(b).toEqual(a);
      // The updates moved the adapter (a test of equal copies would pass on a no-op too).
      expect(b.params).not.toEqual(
        Object.fromEntries([...initLoraParams(config, tinyLora, 3)].map(([k, v]) => [k, [...v]])),
      );
    } finally {
      await here.release();
      await there.release();
    }
  }, 60_000);

  it('reports a failure inside the worker as a typed error, and refuses calls once released', async () => {
    // An adapter of the wrong shape fails LoraPolicy.open inside the thread.
    const wrong = initLoraParams(config, { ...tinyLora, r: 3 }, 3);
    const e = await WorkerLoraPolicy.open({ artifacts: dir, params: wrong }).catch((x) => x);
    expect(FlowGrpoError.isInstance(e)).toBe(true);
    expect((e as Error).message).toMatch(/not of shape/);

    const policy = await WorkerLoraPolicy.open({
      artifacts: dir,
      params: initLoraParams(config, tinyLora, 3),
    });
    await policy.release();
    const { rows, targets } = batch();
    const after = await policy
      .logprobs(rows, targets, { loraScale: 1, temperature: 1, maxTokensPerMicrobatch: 4096 })
      .catch((x) => x);
    expect(after).toBeInstanceOf(TrainLoopError);
    expect((after as Error).message).toMatch(/released/);
  }, 60_000);
});
