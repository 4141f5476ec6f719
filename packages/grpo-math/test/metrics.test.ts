import { describe, expect, it } from 'vitest';
import { grpoLoss, grpoMetrics } from '../src/index.js';
import { expectClose } from './close.js';

describe('grpoMetrics (TRL names)', () => {
  it('reward statistics, per-function rewards and completion lengths (hand derivation)', () => {
    const m = grpoMetrics({
      rewards: [1, 0, 0, 1, 2, 2, 2, 2],
      groups: 4,
      rewardsPerFunction: { accuracy: [1, 0, 0, 1, 1, 1, 1, 1] },
      completionLengths: [10, 20, 30, 40, 16, 16, 5, 7],
      truncated: [0, 0, 0, 1, 0, 0, 0, 1],
    });
    expectClose(m.reward, 1.25); // 10/8
    // group stds √(1/3) and 0, each over 4 samples → √(1/3)/2 = 0.2886751
    expectClose(m.reward_std, Math.sqrt(1 / 3) / 2);
    expectClose(m.frac_reward_zero_std, 0.5);
    expectClose(m['rewards/accuracy/mean'], 0.75); // 6/8
    // d = 0.25 ×6, −0.75 ×2: Σd² = 0.375 + 1.125 = 1.5; /7 → std √(1.5/7) = 0.4629100
    expectClose(m['rewards/accuracy/std'], Math.sqrt(1.5 / 7));
    expectClose(m['completions/mean_length'], 18); // 144/8
    expect(m['completions/min_length']).toBe(5);
    expect(m['completions/max_length']).toBe(40);
    expectClose(m['completions/clipped_ratio'], 0.25);
    expectClose(m['completions/mean_terminated_length'], 97 / 6); // 10+20+30+16+16+5
    expect(m['completions/min_terminated_length']).toBe(5);
    expect(m['completions/max_terminated_length']).toBe(30);
    expect(m.kl).toBeUndefined();
  });

  it('clip ratios, kl and entropy come from the loss and the given entropies', () => {
    // two tokens: A = 1 with ρ = 1.5 (clipped high at 1.28), A = −1 with ρ = 0.5 (clipped low)
    const loss = grpoLoss(
      {
        layout: { mask: [1, 1, 1, 0], seqIndex: [0, 0, 1, 1] },
        logp: [Math.log(1.5), Math.log(0.5), 0, 0],
        oldLogp: [0, 0, 0, 0],
        refLogp: [0, 0, 0, 0],
        seqAdvantages: [1, -1],
      },
      { clipLow: 0.2, clipHigh: 0.28, beta: 0.04 },
    );
    const m = grpoMetrics({
      rewards: [1, 0],
      groups: 2,
      loss,
      entropy: [0.5, 1.5, 1, 9],
      mask: [1, 1, 1, 0],
    });
    // token 0 clipped high, token 1 (A = +1, ρ = 0.5) not clipped, token 2 (A = −1, ρ = 1) not
    expectClose(m['clip_ratio/high_mean'], 1 / 3);
    expectClose(m['clip_ratio/low_mean'], 0);
    expectClose(m['clip_ratio/region_mean'], 1 / 3);
    // k3 with d = logp − ref: ln1.5 → 1/1.5 + ln1.5 − 1; ln0.5 → 2 + ln0.5 − 1; 0 → 0
    const k = (d: number) => Math.exp(-d) + d - 1;
    expectClose(m.kl, (k(Math.log(1.5)) + k(Math.log(0.5))) / 3);
    expectClose(m.entropy, 1); // (0.5 + 1.5 + 1)/3
  });
});
