import { describe, expect, it } from 'vitest';
import {
  clampLogRatio,
  GrpoInputError,
  klEstimate,
  policyRatio,
  tokenPolicyLoss,
} from '../src/index.js';
import { expectClose } from './close.js';

const asym = { clipLow: 0.2, clipHigh: 0.28 };

describe('tokenPolicyLoss (PPO-clip with clip-higher), hand derivations', () => {
  it('A > 0, ρ = e^0.5 = 1.6487 above 1 + 0.28: clipped high, loss = −1.28', () => {
    const t = tokenPolicyLoss(-1, -1.5, 1, asym);
    expectClose(t.ratio, Math.exp(0.5));
    expectClose(t.loss, -1.28);
    expect([t.clippedLow, t.clippedHigh, t.dualClipped]).toEqual([false, true, false]);
  });

  it('A < 0, ρ = e^−0.5 = 0.6065 below 1 − 0.2: clipped low, loss = −min(−0.6065, −0.8) = 0.8', () => {
    const t = tokenPolicyLoss(-1.5, -1, -1, asym);
    expectClose(t.loss, 0.8);
    expect([t.clippedLow, t.clippedHigh]).toEqual([true, false]);
  });

  it('A < 0 with a large ρ is not clipped by PPO; dual-clip caps it at −c·A', () => {
    // ρ = e^0.5 = 1.6487213, A = −2: −min(−3.2974425, −1.28·2) = 3.2974425
    const t = tokenPolicyLoss(-1, -1.5, -2, asym);
    expectClose(t.loss, 2 * Math.exp(0.5));
    expect(t.clippedLow || t.clippedHigh || t.dualClipped).toBe(false);
    // c = 1.5: cap −c·A = 3.0 < 3.2974 → loss 3.0
    const d = tokenPolicyLoss(-1, -1.5, -2, { ...asym, clipRatioC: 1.5 });
    expectClose(d.loss, 3);
    expect(d.dualClipped).toBe(true);
    // c = 3: cap 6.0 > 3.2974 → unchanged
    expectClose(tokenPolicyLoss(-1, -1.5, -2, { ...asym, clipRatioC: 3 }).loss, 2 * Math.exp(0.5));
    // dual-clip never touches A > 0
    expectClose(tokenPolicyLoss(-1, -1.5, 1, { ...asym, clipRatioC: 1.5 }).loss, -1.28);
  });

  it('inside the trust region the loss is −ρA', () => {
    const t = tokenPolicyLoss(0.1, 0, 1, asym);
    expectClose(t.loss, -Math.exp(0.1)); // −1.1051709
    expect(t.clippedLow || t.clippedHigh).toBe(false);
  });

  it('asymmetric bounds: ρ = 1.25, A = 1 is free under clipHigh 0.28 but clipped at 1.2 when symmetric', () => {
    const lr = Math.log(1.25);
    expectClose(tokenPolicyLoss(lr, 0, 1, asym).loss, -1.25);
    expectClose(tokenPolicyLoss(lr, 0, 1, { clipLow: 0.2 }).loss, -1.2);
    expect(tokenPolicyLoss(lr, 0, 1, { clipLow: 0.2 }).clippedHigh).toBe(true);
  });

  it('rejects clip options out of their domain', () => {
    expect(() => tokenPolicyLoss(0, 0, 1, { clipLow: 1.5 })).toThrow(GrpoInputError);
    expect(() => tokenPolicyLoss(0, 0, 1, { clipHigh: -0.1 })).toThrow(GrpoInputError);
    expect(() => tokenPolicyLoss(0, 0, 1, { clipRatioC: 1 })).toThrow(GrpoInputError);
  });
});

describe('exp-overflow guard', () => {
  it('clamps the log-ratio to ±20 before exp', () => {
    expect(clampLogRatio(1000)).toBe(20);
    expect(clampLogRatio(-1000)).toBe(-20);
    expect(clampLogRatio(3.5)).toBe(3.5);
    // Unclamped, exp(1000) is Infinity in float64 (and exp(100) already overflows float32).
    expect(Math.exp(1000)).toBe(Number.POSITIVE_INFINITY);
    expectClose(policyRatio(0, -1000), 485165195.4097903); // e^20
    expectClose(policyRatio(-1000, 0), 2.061153622438558e-9); // e^−20
  });

  it('keeps the loss finite on the unclipped side and exact on the clipped side', () => {
    // A = −1, log-ratio 1000 → ρ clamps to e^20: loss = −min(−e^20, −1.28) = e^20
    const t = tokenPolicyLoss(0, -1000, -1, asym);
    expectClose(t.loss, Math.exp(20));
    expect(Number.isFinite(t.loss)).toBe(true);
    // A = +1 on the same token is clipped high: −1.28, as without the clamp
    expectClose(tokenPolicyLoss(0, -1000, 1, asym).loss, -1.28);
    // log-ratio −1000, A = +1: −min(e^−20, 0.8) = −e^−20
    expectClose(tokenPolicyLoss(-1000, 0, 1, asym).loss, -Math.exp(-20));
  });

  it('guards k3 the same way', () => {
    // ref − logp = 1000 → 20: e^20 − 20 − 1
    const k = klEstimate(-1000, 0, 'k3');
    expectClose(k, Math.exp(20) - 21);
    expect(Number.isFinite(k)).toBe(true);
  });
});

describe('KL estimators (hand derivations)', () => {
  it('d = logp − ref = 0.5', () => {
    expectClose(klEstimate(-1, -1.5, 'k1'), 0.5);
    expectClose(klEstimate(-1, -1.5, 'k2'), 0.125); // ½·0.25
    // exp(−0.5) − (−0.5) − 1 = 0.6065306597 − 0.5 = 0.1065306597
    expectClose(klEstimate(-1, -1.5, 'k3'), 0.1065306597126334);
  });

  it('d = −1', () => {
    expectClose(klEstimate(-2, -1, 'k1'), -1);
    expectClose(klEstimate(-2, -1, 'k2'), 0.5);
    expectClose(klEstimate(-2, -1), Math.E - 2); // e¹ − 1 − 1 = 0.7182818; k3 is the default
  });

  it('all three are 0 when the policies agree', () => {
    for (const k of ['k1', 'k2', 'k3'] as const) expect(klEstimate(-0.7, -0.7, k)).toBe(0);
  });
});
