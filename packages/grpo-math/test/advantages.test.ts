import { FlowGrpoError } from '@flowgrpo/core';
import { describe, expect, it } from 'vitest';
import {
  broadcastAdvantages,
  broadcastToTurns,
  computeAdvantages,
  GrpoInputError,
  groupStats,
} from '../src/index.js';
import { expectAllClose } from './close.js';

const EPS = 1e-6;

describe('computeAdvantages', () => {
  it('group scale: rewards [1,0,0,1] (hand derivation)', () => {
    // mean 0.5; deviations ±0.5; Σd² = 4·0.25 = 1; unbiased var = 1/3; std = √(1/3) = 0.5773502692
    // A = ±0.5 / (0.5773502692 + 1e-6) = ±0.866024...
    const a = 0.5 / (Math.sqrt(1 / 3) + EPS);
    expectAllClose(computeAdvantages([1, 0, 0, 1], 4), [a, -a, -a, a]);
    expectAllClose(computeAdvantages(Float32Array.from([1, 0, 0, 1]), 4, { scale: 'group' }), [
      a,
      -a,
      -a,
      a,
    ]);
    expect(a).toBeCloseTo(0.866024, 6);
  });

  // Groups by id, in any order: 7 → {2, 9}, 3 → {4, 1}, 5 → {1, 1}.
  const rewards = [2, 4, 9, 1, 1, 1];
  const ids = [7, 3, 7, 3, 5, 5];

  it('group scale with group ids, one zero-variance group (hand derivation)', () => {
    // group 7: mean 5.5, d = ∓3.5, Σd² = 24.5, var = 24.5/1, std = √24.5
    // group 3: mean 2.5, d = ±1.5, Σd² = 4.5, std = √4.5; group 5: identical rewards → 0
    const s7 = Math.sqrt(24.5) + EPS;
    const s3 = Math.sqrt(4.5) + EPS;
    expectAllClose(computeAdvantages(rewards, ids), [
      -3.5 / s7,
      1.5 / s3,
      3.5 / s7,
      -1.5 / s3,
      0,
      0,
    ]);
  });

  it('batch scale divides by the std of the whole batch (hand derivation)', () => {
    // batch mean 18/6 = 3; d = −1, 1, 6, −2, −2, −2; Σd² = 1+1+36+4+4+4 = 50; var = 50/5 = 10
    const s = Math.sqrt(10) + EPS;
    expectAllClose(computeAdvantages(rewards, ids, { scale: 'batch' }), [
      -3.5 / s,
      1.5 / s,
      3.5 / s,
      -1.5 / s,
      0,
      0,
    ]);
  });

  it('none only centres (Dr.GRPO)', () => {
    expectAllClose(
      computeAdvantages(rewards, ids, { scale: 'none' }),
      [-3.5, 1.5, 3.5, -1.5, 0, 0],
    );
  });

  it('string group ids and a custom eps', () => {
    // group a = {1, 3}: mean 2, d = ∓1, var = 2, std = √2; A = ∓1/(√2 + 0.5)
    const s = Math.SQRT2 + 0.5;
    expectAllClose(computeAdvantages([1, 5, 3], ['a', 'b', 'a'], { eps: 0.5 }), [-1 / s, 0, 1 / s]);
  });

  it('a zero-variance group gets exactly 0, even where the float mean is inexact', () => {
    // (0.1 + 0.1 + 0.1)/3 = 0.10000000000000002 in float64, so r − mean would be −1.4e-17.
    for (const scale of ['group', 'batch', 'none'] as const) {
      const a = computeAdvantages([0.1, 0.1, 0.1, 0, 1, 0], 3, { scale });
      expect(Array.from(a.subarray(0, 3))).toEqual([0, 0, 0]);
      expect(a[4]).toBeGreaterThan(0);
    }
  });

  it('groups of one get 0 under every scale', () => {
    for (const scale of ['group', 'batch', 'none'] as const) {
      expect(Array.from(computeAdvantages([5, 3, -1], 1, { scale }))).toEqual([0, 0, 0]);
    }
  });

  it('rejects bad inputs with GrpoInputError', () => {
    const cases: [() => unknown, string][] = [
      [() => computeAdvantages([1, 2, 3], 2), 'groupSize'],
      [() => computeAdvantages([1, 2, 3], 0), 'groupSize'],
      [() => computeAdvantages([1, 2, 3], [0, 1]), 'groupIds'],
      [() => computeAdvantages([1, Number.NaN], 2), 'rewards'],
      [() => computeAdvantages([1, 2], 2, { eps: -1 }), 'eps'],
      [() => computeAdvantages([1, 2], 2, { scale: 'std' as 'group' }), 'scale'],
    ];
    for (const [f, field] of cases) {
      let err: unknown;
      try {
        f();
      } catch (e) {
        err = e;
      }
      expect(GrpoInputError.isInstance(err)).toBe(true);
      expect(FlowGrpoError.isInstance(err)).toBe(true);
      expect((err as GrpoInputError).field).toBe(field);
      expect((err as GrpoInputError).code).toBe('GRPO_INPUT_ERROR');
    }
  });
});

describe('groupStats', () => {
  it('reports means, unbiased stds and zero-variance groups by first appearance', () => {
    const s = groupStats([2, 4, 9, 1, 1, 1], ['x', 'y', 'x', 'y', 'z', 'z']);
    expect(s.groupIds).toEqual(['x', 'y', 'z']);
    expect(Array.from(s.groupOf)).toEqual([0, 1, 0, 1, 2, 2]);
    expectAllClose(s.mean, [5.5, 2.5, 1]);
    expectAllClose(s.std, [Math.sqrt(24.5), Math.sqrt(4.5), 0]);
    expect(Array.from(s.zeroVariance)).toEqual([0, 0, 1]);
  });
});

describe('Flow-GRPO broadcast', () => {
  it('gives every token (or turn) its trajectory advantage', () => {
    expect(Array.from(broadcastAdvantages([0.5, -1], Int32Array.from([0, 0, 1, 1, 1])))).toEqual([
      0.5, 0.5, -1, -1, -1,
    ]);
    expect(Array.from(broadcastToTurns([0.5, -1, 2], [2, 0, 3]))).toEqual([0.5, 0.5, 2, 2, 2]);
  });

  it('rejects indices out of range', () => {
    expect(() => broadcastAdvantages([1], [0, 1])).toThrow(GrpoInputError);
    expect(() => broadcastToTurns([1, 2], [1])).toThrow(GrpoInputError);
  });
});
