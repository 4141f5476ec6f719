import { describe, expect, it } from 'vitest';
import {
  aggregateTokens,
  type GrpoLossInput,
  grpoLoss,
  LOSS_AGGREGATIONS,
  type LossAggregation,
  type PackedTokens,
  tokenWeights,
} from '../src/index.js';
import { expectAllClose, expectClose } from './close.js';

// A packed batch of 4 trajectories, 12 tokens:
//   i     0 1 2 3 4 | 5 6 7 8 | 9 10 | 11
//   seq   0 0 0 0 0 | 1 1 1 1 | 2 2  | 3
//   turn  0 0 0 1 1 | 0 0 1 2 | 0 0  | 2
//   mask  0 1 1 0 1 | 1 1 1 0 | 0 0  | 1
// Masked tokens: 1, 2, 4, 5, 6, 7, 11 (M = 7). Sequence 2 has none and turn 2 of sequence 1 has
// none: both are left out of the means. Active sequences S = 3. Token counts per sequence
// 5, 4, 2, 1 → default maxLen 5.
const layout: PackedTokens = {
  mask: Uint8Array.from([0, 1, 1, 0, 1, 1, 1, 1, 0, 0, 0, 1]),
  seqIndex: Int32Array.from([0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 3]),
  turnIndex: Int32Array.from([0, 0, 0, 1, 1, 0, 0, 1, 2, 0, 0, 2]),
};
const masked = [1, 2, 4, 5, 6, 7, 11];
const seqAdvantages = [1, -0.5, 2, 2];

// Per masked token: ratio ρ = exp(logp − oldLogp) and δ = refLogp − logp.
const rho = [1.5, 1, 0.5, 0.7, 1.25, 1.1, 1.3];
const delta = [0, Math.LN2, -Math.LN2, 0, Math.LN2, 0, -Math.LN2];

function inputs(): GrpoLossInput {
  // Unmasked tokens hold NaN: they must never be read.
  const logp = new Float64Array(12).fill(Number.NaN);
  const oldLogp = new Float64Array(12).fill(Number.NaN);
  const refLogp = new Float64Array(12).fill(Number.NaN);
  masked.forEach((i, k) => {
    logp[i] = -1 - 0.1 * k;
    oldLogp[i] = logp[i] - Math.log(rho[k]);
    refLogp[i] = logp[i] + delta[k];
  });
  return { layout, logp, oldLogp, refLogp, seqAdvantages };
}

// clipLow 0.2, clipHigh 0.28 → ρ clipped to [0.8, 1.28]. Per token −min(ρA, clip(ρ)A):
//   t1  A=1    ρ=1.5  → clip 1.28            → −1.28 (clipped high)
//   t2  A=1    ρ=1                          → −1
//   t4  A=1    ρ=0.5  → min(0.5, 0.8)        → −0.5
//   t5  A=−0.5 ρ=0.7  → −min(−0.35, −0.4)   → 0.4 (clipped low)
//   t6  A=−0.5 ρ=1.25 → −min(−0.625, −0.625) → 0.625
//   t7  A=−0.5 ρ=1.1                         → 0.55
//   t11 A=2    ρ=1.3  → clip 1.28 → −2.56 (clipped high; symmetric 0.2 would give −2.4)
// k3 = e^δ − δ − 1: δ = 0 → 0; δ = ln 2 → 1 − ln 2 =: a; δ = −ln 2 → ln 2 − 0.5 =: b; a + b = 0.5.
// beta 0.1 → ℓ = pg + 0.1·k3.
const a = 1 - Math.LN2;
const b = Math.LN2 - 0.5;
const pg = [-1.28, -1, -0.5, 0.4, 0.625, 0.55, -2.56];
const k3 = [0, a, b, 0, a, 0, b];
const ell = pg.map((p, k) => p + 0.1 * k3[k]);
const options = { clipLow: 0.2, clipHigh: 0.28, beta: 0.1 } as const;
// Σℓ = (−1.28 − 1 − 0.5 + 0.4 + 0.625 + 0.55 − 2.56) + 0.1·(2a + 2b) = −3.765 + 0.1 = −3.665
const sumEll = -3.665;

function checkCommon(r: ReturnType<typeof grpoLoss>): void {
  expectClose(r.clipFracLow, 1 / 7); // t5
  expectClose(r.clipFracHigh, 2 / 7); // t1, t11
  expectClose(r.clipFrac, 3 / 7);
  expect(r.clipFracDual).toBe(0);
  expectClose(r.kl!, 1 / 7); // Σk3 = 2(a + b) = 1 over 7 tokens
  expect(r.numTokens).toBe(7);
  expect(r.numSeqs).toBe(3);
  expectAllClose(
    masked.map((i) => r.perTokenLoss[i]),
    ell,
  );
  // loss = Σ w_i ℓ_i with the returned weights.
  let s = 0;
  for (let i = 0; i < 12; i++) s += r.weights[i] * r.perTokenLoss[i];
  expectClose(s, r.loss, 1e-12);
  expectClose(r.pgLoss + 0.1 * r.klLoss, r.loss, 1e-12);
}

describe('grpoLoss: one aggregation each, with KL (k3, beta 0.1) and clip-higher', () => {
  it('token-mean: Σℓ / 7', () => {
    const r = grpoLoss(inputs(), { ...options, aggregation: 'token-mean' });
    expectClose(r.loss, sumEll / 7); // −0.5235714
    expectClose(r.pgLoss, -3.765 / 7);
    expectClose(r.klLoss, 1 / 7);
    checkCommon(r);
  });

  it('seq-mean-token-mean: mean of the 3 active sequences’ token means', () => {
    // s0 = (−1.28 + (−1 + 0.1a) + (−0.5 + 0.1b))/3 = (−2.78 + 0.05)/3 = −0.91
    // s1 = (0.4 + 0.625 + 0.1a + 0.55)/3 = (1.575 + 0.1a)/3
    // s3 = −2.56 + 0.1b
    const expected = (-0.91 + (1.575 + 0.1 * a) / 3 + (-2.56 + 0.1 * b)) / 3;
    const r = grpoLoss(inputs(), { ...options, aggregation: 'seq-mean-token-mean' });
    expectClose(r.loss, expected);
    checkCommon(r);
  });

  it('seq-mean-token-sum: mean of the 3 active sequences’ token sums', () => {
    // (−2.73 + (1.575 + 0.1a) + (−2.56 + 0.1b))/3 = (−3.715 + 0.05)/3 = −3.665/3
    const r = grpoLoss(inputs(), { ...options, aggregation: 'seq-mean-token-sum' });
    expectClose(r.loss, sumEll / 3);
    checkCommon(r);
  });

  it('seq-sum-norm: Σℓ / (normSeqs × maxLen), default 3 × 5, or given', () => {
    const r = grpoLoss(inputs(), { ...options, aggregation: 'seq-sum-norm' });
    expectClose(r.loss, sumEll / 15); // −0.2443333
    checkCommon(r);
    const g = grpoLoss(inputs(), {
      ...options,
      aggregation: 'seq-sum-norm',
      maxLen: 8,
      normSeqs: 4,
    });
    expectClose(g.loss, sumEll / 32);
  });

  it('flow: mean over trajectories of mean over turns of mean over tokens', () => {
    // s0: turn 0 = (−1.28 + (−1 + 0.1a))/2, turn 1 = −0.5 + 0.1b → s0 = mean of the two
    // s1: turn 0 = (0.4 + 0.625 + 0.1a)/2, turn 1 = 0.55, turn 2 has no masked token → mean of two
    // s3: turn 2 = −2.56 + 0.1b
    const s0 = ((-1.28 + (-1 + 0.1 * a)) / 2 + (-0.5 + 0.1 * b)) / 2;
    const s1 = ((0.4 + 0.625 + 0.1 * a) / 2 + 0.55) / 2;
    const s3 = -2.56 + 0.1 * b;
    const r = grpoLoss(inputs(), { ...options, aggregation: 'flow' });
    expectClose(r.loss, (s0 + s1 + s3) / 3);
    checkCommon(r);
    // Weights 1/(S·T_s·m_{s,t}): t1, t2, t5, t6 → 1/(3·2·2); t4, t7 → 1/(3·2·1); t11 → 1/3.
    expectAllClose(r.weights, [0, 1 / 12, 1 / 12, 0, 1 / 6, 1 / 12, 1 / 12, 1 / 6, 0, 0, 0, 1 / 3]);
  });

  it('float32 inputs and per-token advantages give the same token-mean', () => {
    const x = inputs();
    const adv = Float32Array.from([1, 1, 1, 1, 1, -0.5, -0.5, -0.5, -0.5, 2, 2, 2]);
    const r = grpoLoss(
      {
        layout,
        logp: Float32Array.from(x.logp),
        oldLogp: Float32Array.from(x.oldLogp!),
        refLogp: Float32Array.from(x.refLogp!),
        advantages: adv,
      },
      options,
    );
    expectClose(r.loss, sumEll / 7);
  });

  it('symmetric clipping (clipHigh defaults to clipLow) changes t1 and t11 to −1.2 and −2.4', () => {
    const r = grpoLoss(inputs(), { clipLow: 0.2, beta: 0.1 });
    expectClose(r.loss, (sumEll + 0.08 + 0.16) / 7);
  });

  it('k1 and k2 estimators', () => {
    // k1 = −δ: Σ = −(ln2 − ln2 + ln2 − ln2) = 0; k2 = ½δ²: Σ = 4·½(ln 2)² = 2(ln 2)²
    const r1 = grpoLoss(inputs(), { ...options, klEstimator: 'k1' });
    expectClose(r1.kl!, 0);
    expectClose(r1.loss, -3.765 / 7);
    const r2 = grpoLoss(inputs(), { ...options, klEstimator: 'k2' });
    expectClose(r2.kl!, (2 * Math.LN2 ** 2) / 7);
    expectClose(r2.loss, (-3.765 + 0.2 * Math.LN2 ** 2) / 7);
  });

  it('dual-clip: A < 0 with ρ = e² is capped at −c·A', () => {
    // one token, A = −1, ρ = e² = 7.389: PPO loss 7.389; c = 3 → 3
    const one: PackedTokens = { mask: [1], seqIndex: [0] };
    const r = grpoLoss(
      { layout: one, logp: [0], oldLogp: [-2], advantages: [-1] },
      { clipRatioC: 3 },
    );
    expectClose(r.loss, 3);
    expect(r.clipFracDual).toBe(1);
    expect(r.kl).toBeUndefined();
  });

  it('without oldLogp the ratio is 1 and the loss is −mean(A)', () => {
    const r = grpoLoss({ ...inputs(), oldLogp: undefined, refLogp: undefined }, { beta: 0 });
    // advantages over masked tokens: 1, 1, 1, −0.5, −0.5, −0.5, 2 → Σ = 3.5 → −0.5
    expectClose(r.loss, -0.5);
    expect(r.clipFrac).toBe(0);
  });

  it('entropy is the token mean over masked tokens', () => {
    const entropy = new Float64Array(12).fill(100);
    masked.forEach((i, k) => {
      entropy[i] = k;
    });
    expectClose(grpoLoss({ ...inputs(), entropy }, options).entropy!, 3); // (0+…+6)/7
  });

  it('an all-masked-out batch has loss 0', () => {
    const r = grpoLoss(
      { layout: { mask: [0, 0], seqIndex: [0, 1] }, logp: [0, 0], advantages: [1, 1] },
      { aggregation: 'seq-mean-token-mean' },
    );
    expect([r.loss, r.numTokens, r.clipFrac]).toEqual([0, 0, 0]);
  });
});

describe('tokenWeights: loss = Σ w_i·ℓ_i for every aggregation', () => {
  // A small deterministic generator, so the layouts below are reproducible.
  function lcg(seed: number) {
    let s = seed >>> 0;
    return () => {
      s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
      return s / 2 ** 32;
    };
  }

  function randomLayout(seed: number): { layout: PackedTokens; values: Float64Array } {
    const rnd = lcg(seed);
    const n = 40 + Math.floor(rnd() * 40);
    const mask = new Uint8Array(n);
    const seqIndex = new Int32Array(n);
    const turnIndex = new Int32Array(n);
    const values = new Float64Array(n);
    for (let i = 0; i < n; i++) {
      mask[i] = rnd() < 0.7 ? 1 : 0;
      seqIndex[i] = Math.floor(rnd() * 6);
      turnIndex[i] = Math.floor(rnd() * 4);
      values[i] = rnd() * 4 - 2;
    }
    return { layout: { mask, seqIndex, turnIndex, numSeqs: 7 }, values };
  }

  for (const agg of LOSS_AGGREGATIONS) {
    it(`${agg}: matches the nested-mean definition and its finite differences`, () => {
      for (const seed of [1, 2, 3]) {
        const { layout: l, values } = randomLayout(seed);
        const w = tokenWeights(l, agg);
        const loss = aggregateTokens(values, l, agg);
        let s = 0;
        for (let i = 0; i < values.length; i++) s += w[i] * values[i];
        expectClose(s, loss, 1e-12);
        // The aggregation is linear, so a finite difference recovers each weight.
        const h = 1e-3;
        for (let i = 0; i < values.length; i++) {
          const bumped = Float64Array.from(values);
          bumped[i] += h;
          const fd = (aggregateTokens(bumped, l, agg) - loss) / h;
          expect(Math.abs(fd - w[i])).toBeLessThan(1e-9);
          if (l.mask[i] === 0) expect(w[i]).toBe(0);
        }
      }
    });
  }

  it('weights of the mean-type aggregations sum to 1', () => {
    const { layout: l } = randomLayout(9);
    for (const agg of ['token-mean', 'seq-mean-token-mean', 'flow'] as LossAggregation[]) {
      const w = tokenWeights(l, agg);
      expectClose(
        w.reduce((x, y) => x + y, 0),
        1,
        1e-12,
      );
    }
  });
});

describe('grpoLoss call forms', () => {
  it('takes options inside the first argument as well', () => {
    const flat = grpoLoss({ ...inputs(), ...options, aggregation: 'seq-mean-token-sum' });
    expectClose(flat.loss, sumEll / 3);
    // the second argument wins over the first
    const both = grpoLoss(
      { ...inputs(), aggregation: 'flow' },
      { ...options, aggregation: 'token-mean' },
    );
    expectClose(both.loss, sumEll / 7);
  });
});
