// vllm_importance_sampling_mode: the four ways TRL weighs tokens sampled by another engine or an
// earlier adapter (trl GRPOTrainer._generate_and_score_completions: ρ = exp(old − sampled) per
// token, or exp of its sum over the completion; clamp(max=cap) for *_truncate, masked_fill(ρ >
// cap, 0) for *_mask). Expected values are worked by hand below from probabilities chosen so that
// every ratio is exact: a turn here is TRL's completion.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { initLoraParams } from '@flowgrpo/models';
import { afterAll, describe, expect, it } from 'vitest';
import { LoraPolicy } from '../src/index.js';
import type { Targets } from '../src/update/collate.js';
import {
  aggregationWeights,
  applyImportanceWeights,
  type ImportanceSamplingMode,
  type TokenImportanceSamplingMode,
} from '../src/update/lora-policy.js';
import {
  oneTurnBatch,
  tinyLora,
  tinyLoraArtifacts,
  tinyUpdateHp,
} from './support/tiny-lora-policy.js';

// Five tokens: trajectory 0 turn 0 (tokens 0, 1), trajectory 0 turn 1 (2, 3), trajectory 1 turn 0
// (4, no sampled log-prob: the trainer's own engine sampled it, so it is not reweighed).
const old = Float32Array.from([0.6, 0.2, 0.5, 0.5, 0.9].map(Math.log));
const sampled = Float32Array.from([0.2, 0.4, 0.5, 0.25, Number.NaN].map(Math.log));
const targets = {
  count: 5,
  sampleLogprob: sampled,
  trajectory: Int32Array.from([0, 0, 0, 0, 1]),
  turn: Int32Array.from([0, 0, 1, 1, 0]),
} as unknown as Targets;
// Token ratios π_old / π_sampled: 3, 0.5, 1, 2, —; turn ratios: 3 × 0.5 = 1.5 and 1 × 2 = 2.

function weights(mode: ImportanceSamplingMode, cap: number): number[] {
  const w = new Float64Array(5).fill(1);
  applyImportanceWeights(w, old, targets, cap, mode);
  return [...w];
}

describe('applyImportanceWeights (vllm_importance_sampling_mode)', () => {
  const cases: [ImportanceSamplingMode, number, number[]][] = [
    // min(ρ, 2.5) per token
    ['token_truncate', 2.5, [2.5, 0.5, 1, 2, 1]],
    // ρ per token, 0 where ρ > 2.5 (token 0's 3)
    ['token_mask', 2.5, [0, 0.5, 1, 2, 1]],
    // the turn's ρ for each of its tokens, min(ρ, 1.8)
    ['sequence_truncate', 1.8, [1.5, 1.5, 1.8, 1.8, 1]],
    // the second turn's 2 > 1.8: the whole turn leaves the loss
    ['sequence_mask', 1.8, [1.5, 1.5, 0, 0, 1]],
    // under the cap, every mode of a level gives the plain ratio
    ['sequence_mask', 2.5, [1.5, 1.5, 2, 2, 1]],
  ];
  for (const [mode, cap, expected] of cases)
    it(`${mode}, cap ${cap}`, () => {
      const w = weights(mode, cap);
      for (let j = 0; j < 5; j++) expect(w[j], `token ${j}`).toBeCloseTo(expected[j]!, 6);
    });

  it('token_truncate is the default, as it was before the key existed', () => {
    const w = new Float64Array(5).fill(1);
    applyImportanceWeights(w, old, targets, 2.5);
    expect([...w]).toEqual(weights('token_truncate', 2.5));
  });
});

// The per-token modes are weighed inside the train step's graph, from the π_old of the update's
// own forward (no log-probs pass before it). The reference is the host's way, checked by hand
// above: π_old from the logprobs graph, then applyImportanceWeights on the policy-gradient weights.
// One update each way from the same adapter, over three micro-batches: the same loss, statistics
// and adapter after it, to float32 rounding.
describe('importance weights in the train step (token modes)', () => {
  const tmp = mkdtempSync(join(tmpdir(), 'flowgrpo-importance-'));
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));
  const { config, dir } = tinyLoraArtifacts(tmp, 4, 'importance');
  // Three micro-batches: the weights are fed per micro-batch slice.
  const hp = tinyUpdateHp(16);
  const lp = { loraScale: 1, temperature: 1, maxTokensPerMicrobatch: 16 };
  /** Six one-turn trajectories; the last one's tokens have no sampled log-prob. */
  const batch = () =>
    oneTurnBatch(config, {
      rngSeed: 'importance',
      advantages: [1, -1, 0.5, -0.5, 0.8, -0.8],
      promptLength: 4,
      actionLength: () => 3,
      logprob: (k) => (k === 5 ? Number.NaN : 0),
    });

  for (const mode of ['token_truncate', 'token_mask'] as TokenImportanceSamplingMode[])
    it(`${mode}: the graph's weights are the host's`, async () => {
      const open = () =>
        LoraPolicy.open({
          artifacts: dir,
          params: initLoraParams(config, tinyLora, 5),
          intraOpThreads: 1,
        });
      const [host, graph, none] = [await open(), await open(), await open()];
      try {
        const { rows, targets } = batch();
        const old = await host.logprobs(rows, targets, lp);
        // The sampler's log-probs: ratios π_old / π_sampler from e^−1.2 to e^1.5, some above the
        // cap of 2 (e^0.9, e^1.5).
        const offsets = [-1.2, 0.9, 0.3, -0.4, 1.5, 0.1];
        for (let j = 0; j < targets.count; j++)
          if (!Number.isNaN(targets.sampleLogprob[j]!))
            targets.sampleLogprob[j] = old[j]! - offsets[j % offsets.length]!;
        const aggregated = aggregationWeights(targets, 'token-mean');
        const weighted = Float64Array.from(aggregated);
        applyImportanceWeights(weighted, old, targets, 2, mode);

        const a = await host.update(rows, targets, { old, pgWeights: weighted }, hp);
        const b = await graph.update(
          rows,
          targets,
          { pgWeights: aggregated, importance: { cap: 2, mode } },
          hp,
        );
        const c = await none.update(rows, targets, { pgWeights: aggregated }, hp);
        expect(a.microBatches).toBe(3);
        expect(b.stats.pg_loss).toBeCloseTo(a.stats.pg_loss, 6);
        expect(b.stats.loss).toBeCloseTo(a.stats.loss, 6);
        expect(b.gradNorm / a.gradNorm).toBeCloseTo(1, 5);
        for (const [name, p] of host.params) {
          const q = graph.params.get(name)!;
          for (let i = 0; i < p.length; i++) expect(q[i]!, name).toBeCloseTo(p[i]!, 6);
        }
        // The weights matter here: unweighted, the same update is another one.
        expect(Math.abs(c.gradNorm / a.gradNorm - 1)).toBeGreaterThan(1e-3);
      } finally {
        for (const p of [host, graph, none]) await p.release();
      }
    }, 60_000);
});
