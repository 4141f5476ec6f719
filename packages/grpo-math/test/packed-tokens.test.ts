import { FlowGrpoError } from '@flowgrpo/core';
import { describe, expect, it } from 'vitest';
import {
  aggregateTokens,
  GrpoInputError,
  grpoLoss,
  type PackedTokens,
  sequenceLengths,
  tokenWeights,
  validatePackedTokens,
} from '../src/index.js';

function errorOf(f: () => unknown): GrpoInputError {
  try {
    f();
  } catch (e) {
    if (GrpoInputError.isInstance(e)) return e;
    throw e;
  }
  throw new Error('expected a GrpoInputError, nothing was thrown');
}

const good: PackedTokens = {
  mask: Uint8Array.from([0, 1, 1, 1, 0]),
  seqIndex: Int32Array.from([0, 0, 2, 2, 2]),
  turnIndex: Int32Array.from([0, 0, 0, 1, 1]),
};

describe('validatePackedTokens', () => {
  it('counts tokens per sequence (sequence 1 absent)', () => {
    const info = validatePackedTokens(good);
    expect(info.numTokens).toBe(5);
    expect(info.numSeqs).toBe(3);
    expect(info.numMasked).toBe(3);
    expect(Array.from(info.seqTokens)).toEqual([2, 0, 3]);
    expect(Array.from(info.seqMasked)).toEqual([1, 0, 2]);
    expect(info.numActiveSeqs).toBe(2);
    expect(Array.from(sequenceLengths(good))).toEqual([1, 0, 2]);
    expect(validatePackedTokens({ ...good, numSeqs: 5 }).numSeqs).toBe(5);
    expect(validatePackedTokens({ mask: [], seqIndex: [] }).numSeqs).toBe(0);
  });

  it('names the field and position of a bad layout', () => {
    const cases: [PackedTokens, string, number | undefined][] = [
      [{ ...good, seqIndex: Int32Array.from([0, 0, 1]) }, 'seqIndex', undefined],
      [{ ...good, turnIndex: Int32Array.from([0]) }, 'turnIndex', undefined],
      [{ ...good, mask: Uint8Array.from([0, 1, 2, 1, 0]) }, 'mask', 2],
      [{ ...good, seqIndex: [0, 0, -1, 2, 2] }, 'seqIndex', 2],
      [{ ...good, seqIndex: [0, 0.5, 2, 2, 2] }, 'seqIndex', 1],
      [{ ...good, turnIndex: [0, 0, 0, Number.NaN, 1] }, 'turnIndex', 3],
      [{ ...good, numSeqs: 2 }, 'seqIndex', 2],
      [{ ...good, numSeqs: -1 }, 'numSeqs', undefined],
    ];
    for (const [layout, field, index] of cases) {
      const e = errorOf(() => validatePackedTokens(layout));
      expect(e.field).toBe(field);
      expect(e.index).toBe(index);
      expect(e.code).toBe('GRPO_INPUT_ERROR');
      expect(FlowGrpoError.isInstance(e)).toBe(true);
      expect(e.message).toContain(field);
    }
  });

  it('flow needs turnIndex', () => {
    const { turnIndex: _, ...noTurns } = good;
    expect(errorOf(() => tokenWeights(noTurns, 'flow')).field).toBe('turnIndex');
    expect(errorOf(() => aggregateTokens([1, 2, 3, 4, 5], noTurns, 'flow')).field).toBe(
      'turnIndex',
    );
    expect(() => tokenWeights(noTurns, 'token-mean')).not.toThrow();
  });
});

describe('grpoLoss input checks', () => {
  const base = { layout: good, logp: [0, -1, -1, -1, 0], advantages: [0, 1, 1, 1, 0] };

  it('rejects mismatched lengths, non-finite masked values and inconsistent options', () => {
    expect(errorOf(() => grpoLoss({ ...base, logp: [0, 1] })).field).toBe('logp');
    expect(errorOf(() => grpoLoss({ ...base, oldLogp: [0, 1] })).field).toBe('oldLogp');
    const nan = errorOf(() => grpoLoss({ ...base, logp: [0, -1, Number.NaN, -1, 0] }));
    expect([nan.field, nan.index]).toEqual(['logp', 2]);
    expect(errorOf(() => grpoLoss({ ...base, oldLogp: [0, -Infinity, 0, 0, 0] })).field).toBe(
      'oldLogp',
    );
    expect(errorOf(() => grpoLoss(base, { beta: 0.1 })).field).toBe('refLogp');
    expect(errorOf(() => grpoLoss({ ...base, seqAdvantages: [1, 2, 3] })).field).toBe('advantages');
    expect(
      errorOf(() => grpoLoss({ ...base, advantages: undefined, seqAdvantages: [1, 2] })).field,
    ).toBe('seqAdvantages');
    expect(errorOf(() => grpoLoss({ ...base, advantages: undefined })).field).toBe('advantages');
    expect(errorOf(() => grpoLoss(base, { aggregation: 'sum' as 'token-mean' })).field).toBe(
      'aggregation',
    );
    expect(errorOf(() => grpoLoss(base, { clipLow: -0.1 })).field).toBe('clipLow');
    expect(errorOf(() => grpoLoss(base, { klEstimator: 'k4' as 'k1' })).field).toBe('klEstimator');
    expect(errorOf(() => grpoLoss(base, { aggregation: 'seq-sum-norm', maxLen: 0 })).field).toBe(
      'maxLen',
    );
  });

  it('ignores anything, NaN included, at unmasked tokens', () => {
    const r = grpoLoss({
      ...base,
      logp: [Number.NaN, -1, -1, -1, Number.POSITIVE_INFINITY],
      advantages: [Number.NaN, 1, 1, 1, Number.NaN],
    });
    expect(r.loss).toBe(-1); // ρ = 1 everywhere, A = 1 → −1
  });
});
