// vllm_importance_sampling_mode: the four ways TRL weighs tokens sampled by another engine or an
// earlier adapter (trl GRPOTrainer._generate_and_score_completions: ρ = exp(old − sampled) per
// token, or exp of its sum over the completion; clamp(max=cap) for *_truncate, masked_fill(ρ >
// cap, 0) for *_mask). Expected values are worked by hand below from probabilities chosen so that
// every ratio is exact: a turn here is TRL's completion.
import { describe, expect, it } from 'vitest';
import type { Targets } from '../src/update/collate.js';
import { applyImportanceWeights, type ImportanceSamplingMode } from '../src/update/lora-policy.js';

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
