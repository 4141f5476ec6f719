// max_staleness: rollouts sampled while the update runs (async-rollouts.ts), on the tiny demo
// setup of the other GRPOTrainer tests (real ORT sessions, CPU EP): 0 is the synchronous loop as
// it was, 1 keeps every batch within one update of the trained adapter and still learns, and a
// run resumed from a checkpoint continues exactly as the uninterrupted one.
import { cpSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { PolicyEngine } from '@flowgrpo/agent';
import { ConfigError, readTrajectoriesParquet } from '@flowgrpo/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { thrown } from '../../../test-utils/folder-snapshot.js';
import { makeQuestions, questionRows } from '../src/demo/index.js';
import { type GRPOConfigInput, loadCheckpoint, type TrainResult } from '../src/index.js';
import { comparable, tinyConfig, tinySetup, tinyTrainer } from './support/tiny-grpo.js';

const root = mkdtempSync(join(tmpdir(), 'flowgrpo-async-rollouts-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

// Four questions a step and a high learning rate: the tiny model's reward (the share of double
// quotes in its text) climbs within a few dozen steps, synchronous or not.
const learning = (out: string, extra: Partial<GRPOConfigInput> = {}) =>
  tinyConfig(join(root, out), { queries_per_step: 4, learning_rate: 0.03, ...extra });

const steps = (r: TrainResult) => r.metrics.filter((m) => typeof m.reward === 'number');
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

beforeAll(async () => {
  await tinySetup(root);
}, 120_000);

describe('max_staleness', () => {
  it('0 is the synchronous loop: the metrics recorded before max_staleness existed, no async/* key', async () => {
    const r = await (
      await tinyTrainer(root, learning('sync', { max_steps: 8, max_staleness: 0 }))
    ).train();
    // Recorded with commit bc74516 (before this key existed) on the same config, and identical
    // there to every digit of every non-timing metric. The rewards (shares of quotes in the
    // sampled text) are compared exactly; loss and grad_norm to 1e-4 relative: a change of the
    // loop moves them far more, another CPU's kernels may round their last bits differently.
    const recorded = [
      [0.005681818181818182, 5.587935447692871e-9, 0.00435437960550189],
      [0, 2.235730562460958e-6, 3.065439886995591e-5],
      [0.005321557971014492, 3.641955572675215e-6, 0.00856305006891489],
      [0.0026041666666666665, 1.5239503227348905e-5, 0.005587627645581961],
      [0.003289473684210526, 4.1256942495238036e-5, 0.013118110597133636],
      [0.002840909090909091, 0.0001714541285764426, 0.017260601744055748],
      [0.008049242424242424, 0.0003606141544878483, 0.027568377554416656],
      [0.03125, 0.0008888859301805496, 0.021593989804387093],
    ];
    const got = steps(r);
    expect(got.map((m) => m.step)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    got.forEach((m, i) => {
      const [reward, loss, gradNorm] = recorded[i]!;
      expect(m.reward).toBe(reward);
      expect(Math.abs((m.loss as number) - loss!)).toBeLessThanOrEqual(1e-4 * Math.abs(loss!));
      expect(Math.abs((m.grad_norm as number) - gradNorm!)).toBeLessThanOrEqual(
        1e-4 * Math.abs(gradNorm!),
      );
      expect(Object.keys(m).filter((k) => k.startsWith('async/') || k.includes('wait_'))).toEqual(
        [],
      );
    });
  }, 120_000);

  it('1: every batch within one update of the trained adapter, versions recorded, and it still learns', async () => {
    const out = join(root, 'k1');
    const r = await (
      await tinyTrainer(root, learning('k1', { max_steps: 24, max_staleness: 1 }))
    ).train();
    const got = steps(r);
    expect(got).toHaveLength(24);
    // Batch 0 has nothing to be sampled ahead of; batch b ≥ 1 is sampled from the adapter batch
    // b − 1 started from, one update (μ = 1) before the one it is trained on (the schedule).
    expect(got.map((m) => m['async/staleness_max'])).toEqual([0, ...Array(23).fill(1)]);
    expect(got.map((m) => m['async/staleness_mean'])).toEqual([0, ...Array(23).fill(1)]);
    for (const m of got) {
      for (const k of ['timing/wait_rollout_s', 'timing/wait_train_s', 'timing/rollout_s'])
        expect(m[k], k).toBeGreaterThanOrEqual(0);
    }
    // The sampler's log-probs are those of the stale copy, not of the adapter trained: they agree
    // with the trainer's to the graphs' precision on the first batch only (the local engine's
    // log-probs are the training graph's, DESIGN §5.7).
    expect(got[0]!['logprob_mismatch/max']).toBeLessThanOrEqual(1e-4);
    expect(
      Math.max(...got.slice(1).map((m) => m['logprob_mismatch/max'] as number)),
    ).toBeGreaterThan(1e-3);
    // Every rollout says the adapter it came from: global_step max(0, b − 1) for batch b.
    const files = readdirSync(join(out, 'rollouts')).sort();
    expect(files).toHaveLength(24);
    for (const [b, file] of files.entries())
      for (const tr of await readTrajectoriesParquet(join(out, 'rollouts', file)))
        expect(tr.metadata?.policy_version).toBe(Math.max(0, b - 1));
    // It learns: the mean reward of the last 8 steps well above the first 8 (measured: 0.002 →
    // 0.12; the synchronous run: 0.007 → 0.47 on the same 24 steps).
    const rewards = got.map((m) => m.reward as number);
    expect(mean(rewards.slice(-8))).toBeGreaterThan(mean(rewards.slice(0, 8)) + 0.05);
  }, 180_000);

  // Stopped once step 3 is logged (checkpoint-3 is written; batch 3, sampled ahead from the
  // adapter of step 2, is in flight or done, and discarded), then resumed; against a run of the
  // same config that was never stopped.
  const interrupted = async (name: string, extra: Partial<GRPOConfigInput>) => {
    const config = (out: string, more: Partial<GRPOConfigInput> = {}) =>
      learning(out, { max_steps: 6, max_staleness: 1, save_steps: 1, ...extra, ...more });
    const full = await (await tinyTrainer(root, config(`${name}-full`))).train();
    const stop = new AbortController();
    const first = await (
      await tinyTrainer(root, config(name), {
        extra: { signal: stop.signal, onLog: (m) => m.step === 3 && stop.abort() },
      })
    ).train();
    expect(first.stopped).toBe('aborted');
    expect(first.globalStep).toBe(3);
    // A copy without the adapter kept for batch 3, to show the resume needs it.
    cpSync(join(root, name), join(root, `${name}-without`), { recursive: true });
    rmSync(join(root, `${name}-without`, 'checkpoint-3', 'rollout_policies.safetensors'));
    const resumed = await (
      await tinyTrainer(root, config(name, { resume_from_checkpoint: true }))
    ).train();
    expect(resumed.globalStep).toBe(6);
    const byStep = (r: TrainResult) => new Map(steps(r).map((m) => [m.step, comparable(m)]));
    expect([...byStep(resumed).keys()]).toEqual([1, 2, 3, 4, 5, 6]);
    return { full: byStep(full), resumed: byStep(resumed), config };
  };

  it('1: aborted and resumed, continues exactly as the uninterrupted run (the batch in flight sampled again)', async () => {
    // Rollouts on this thread (generate_workers 0): where each row's turns join the continuous
    // batch is then the same in both runs, so the sampled log-probs — the importance weights'
    // denominators — are the same bits, and so is every metric.
    const { full, resumed, config } = await interrupted('resume', { generate_workers: 0 });
    for (const step of [4, 5, 6]) expect(resumed.get(step), `step ${step}`).toEqual(full.get(step));
    const ck = await loadCheckpoint(
      join(root, 'resume', 'checkpoint-3'),
      (await tinySetup(root)).model.weights.config,
    );
    // Batch 3 is sampled from the adapter batch 2 started from (step 2), kept in checkpoint-3.
    expect(ck.rolloutPolicies.map((p) => [p.batch, p.step])).toEqual([[2, 2]]);
    // Without it, batch 3 is sampled from the adapter resumed with (step 3): another run.
    const other = await (
      await tinyTrainer(root, { ...config('resume-without'), resume_from_checkpoint: true })
    ).train();
    const step4 = steps(other).find((m) => m.step === 4)!;
    expect(step4['async/staleness_max']).toBe(0);
    expect(comparable(step4)).not.toEqual(full.get(4));
  }, 240_000);

  it('1 with worker batchers: the same samples and rewards after a resume; log-probs to their last bits', async () => {
    // With worker batchers (the default here), the updates running on this thread shift when a
    // rollout's next turn reaches its batcher, so a row may run in another batch than in the
    // uninterrupted run: its tokens are the same, its sampled log-probs move by ~1e-7
    // (docs/performance.md, "Continuous batching"), and the importance weights carry that into
    // the loss (measured: 2e-7 relative at step 4, 2.4e-5 at step 6, where the loss is ~1e-4).
    const { full, resumed } = await interrupted('resume-workers', {});
    for (const step of [4, 5, 6]) {
      const a = full.get(step)!;
      const b = resumed.get(step)!;
      for (const k of ['reward', 'reward_std', 'accuracy', 'completions/mean_length'])
        expect(b[k], `${k} at step ${step}`).toBe(a[k]);
      for (const k of ['loss', 'grad_norm', 'kl', 'logprob_mismatch/mean'])
        expect(
          Math.abs((b[k] as number) - (a[k] as number)),
          `${k} at step ${step}`,
        ).toBeLessThanOrEqual(1e-3 * Math.abs(a[k] as number) + 1e-9);
    }
  }, 240_000);

  it('refuses what it could not keep: a negative or fractional bound, a bound below num_iterations, a remote engine that serves one adapter at a time', async () => {
    for (const max_staleness of [-1, 1.5]) {
      const e = await thrown(() => tinyTrainer(root, learning('bad', { max_staleness })));
      expect(ConfigError.isInstance(e)).toBe(true);
      expect((e as ConfigError).key).toBe('max_staleness');
    }
    const mu = await thrown(() =>
      tinyTrainer(root, learning('bad', { max_staleness: 1, num_iterations: 2 })),
    );
    expect((mu as ConfigError).key).toBe('max_staleness, num_iterations');
    // An engine with updateAdapter alone (no loadAdapter / unloadAdapter / withAdapter) cannot
    // keep an older version loaded beside the newer one; OpenAIPolicyEngine can
    // (train-remote-rollouts.test.ts).
    const remote = await thrown(() =>
      tinyTrainer(root, learning('bad', { max_staleness: 1 }), {
        extra: { rolloutEngine: { updateAdapter: async () => {} } as unknown as PolicyEngine },
      }),
    );
    expect(ConfigError.isInstance(remote)).toBe(true);
    expect((remote as ConfigError).key).toBe('max_staleness');
    expect((remote as ConfigError).message).toContain('rolloutEngine');
    expect((remote as ConfigError).message).toContain('several adapters at once');
    expect((remote as ConfigError).hint).toContain('max_staleness: 0');
  });

  it('counts staleness in optimizer steps (μ = 2, bound 2: one batch ahead, two steps stale); evaluates between batches', async () => {
    const { almanac } = await tinySetup(root);
    const r = await (
      await tinyTrainer(
        root,
        learning('mu2', { max_steps: 6, num_iterations: 2, max_staleness: 2, eval_steps: 2 }),
        { extra: { evalDataset: questionRows(makeQuestions(almanac, 'test', 4, 'tiny')) } },
      )
    ).train();
    // Batches start at steps 0, 2, 4; batch b ≥ 1 is sampled from batch b − 1's adapter.
    expect(steps(r).map((m) => [m.step, m['async/staleness_max']])).toEqual([
      [2, 0],
      [4, 2],
      [6, 2],
    ]);
    // The evaluations at steps 2 and 4 took the engine between two batches, and the final one
    // after the sampler stopped.
    const evalSteps = r.metrics.filter((m) => typeof m['eval/accuracy'] === 'number');
    expect(evalSteps.map((m) => m.step)).toEqual([2, 4, 6]);
  }, 120_000);
});
