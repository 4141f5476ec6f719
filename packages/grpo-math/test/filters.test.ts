import { describe, expect, it } from 'vitest';
import {
  filterZeroVarianceGroups,
  GrpoInputError,
  maskTruncated,
  overlongPenalties,
  overlongPenalty,
  truncatedSequences,
} from '../src/index.js';
import { expectAllClose } from './close.js';

describe('filterZeroVarianceGroups (DAPO dynamic sampling)', () => {
  it('drops groups with identical rewards', () => {
    // groups of 2: {1, 1} identical, {0, 1} kept, {0.5, 0.5} identical
    const r = filterZeroVarianceGroups([1, 1, 0, 1, 0.5, 0.5], 2);
    expect(Array.from(r.keepSample)).toEqual([0, 0, 1, 1, 0, 0]);
    expect(r.keptGroups).toEqual([1]);
    expect(r.droppedGroups).toEqual([0, 2]);
  });

  it('works with group ids and drops single-sample groups', () => {
    const r = filterZeroVarianceGroups([1, 0, 3, 1], ['q1', 'q1', 'q2', 'q3']);
    expect(r.keptGroups).toEqual(['q1']);
    expect(r.droppedGroups).toEqual(['q2', 'q3']);
    expect(Array.from(r.keepSample)).toEqual([1, 1, 0, 0]);
  });

  it('a tolerance treats near-identical rewards as identical', () => {
    expect(filterZeroVarianceGroups([1, 1 + 1e-9], 2).keptGroups).toEqual([0]);
    expect(filterZeroVarianceGroups([1, 1 + 1e-9], 2, { tolerance: 1e-6 }).keptGroups).toEqual([]);
  });
});

describe('overlong filtering', () => {
  it('finds sequences that hit the limit unfinished', () => {
    // lengths 10, 16, 16, 5 with max 16: only #1 is at the limit without finishing
    expect(Array.from(truncatedSequences([10, 16, 16, 5], [true, false, true, false], 16))).toEqual(
      [0, 1, 0, 0],
    );
  });

  it('zeroes the mask of truncated sequences only', () => {
    const layout = { mask: [0, 1, 1, 0, 1, 1, 1], seqIndex: [0, 0, 0, 1, 1, 2, 2] };
    expect(Array.from(maskTruncated(layout, [0, 1, 0]))).toEqual([0, 1, 1, 0, 0, 1, 1]);
    expect(() => maskTruncated(layout, [1])).toThrow(GrpoInputError);
  });
});

describe('overlongPenalty (DAPO soft overlong punishment), L_max 20, L_cache 4', () => {
  it('is 0 up to L_max − L_cache, linear in the buffer, −1 beyond', () => {
    // L_max − L_cache = 16: len 10 → 0; 16 → 0; 17 → (16 − 17)/4 = −0.25; 18 → −0.5; 20 → −1; 25 → −1
    const o = { maxLength: 20, cacheLength: 4 };
    expectAllClose(overlongPenalties([10, 16, 17, 18, 20, 25], o), [0, 0, -0.25, -0.5, -1, -1]);
    expect(overlongPenalty(18, { ...o, factor: 0.5 })).toBe(-0.25);
  });

  it('rejects a buffer larger than the budget', () => {
    expect(() => overlongPenalty(3, { maxLength: 4, cacheLength: 5 })).toThrow(GrpoInputError);
  });
});
