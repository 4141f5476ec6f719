import type { IndexArray, MaskArray } from './arrays.js';
import { GrpoInputError } from './errors.js';

/**
 * The packed token layout the trainer's collator produces: N tokens of several sequences
 * (trajectories) laid end to end, no padding. Per-token values (log-probs, advantages, losses)
 * travel beside it as arrays of length N.
 *
 * Tokens of one sequence need not be contiguous and sequences may be absent; only the indices
 * matter.
 */
export interface PackedTokens {
  /** 1 = trainable token (carries loss), 0 = prompt, observation or padding. Length N. */
  mask: MaskArray;
  /** Which sequence (trajectory) each token belongs to, in [0, numSeqs). Length N. */
  seqIndex: IndexArray;
  /** Which turn within its trajectory each token belongs to (≥ 0). Needed by the `flow` aggregation. */
  turnIndex?: IndexArray;
  /** Number of sequences; defaults to max(seqIndex) + 1 (0 when there are no tokens). */
  numSeqs?: number;
}

/** What `validatePackedTokens` learned about a layout. */
export interface PackedTokensInfo {
  /** N, all tokens. */
  numTokens: number;
  /** Number of sequences (given, or max(seqIndex) + 1). */
  numSeqs: number;
  /** Tokens with mask 1. */
  numMasked: number;
  /** Per sequence: its number of tokens, masked or not. */
  seqTokens: Int32Array;
  /** Per sequence: its number of masked tokens. */
  seqMasked: Int32Array;
  /** Sequences with at least one masked token. */
  numActiveSeqs: number;
}

function isIndex(v: number): boolean {
  return Number.isInteger(v) && v >= 0;
}

/**
 * Checks a layout (equal lengths, mask ∈ {0, 1}, indices non-negative integers in range) and
 * counts tokens per sequence. Throws `GrpoInputError` naming the first problem.
 */
export function validatePackedTokens(
  layout: PackedTokens,
  options: { requireTurns?: boolean } = {},
): PackedTokensInfo {
  const { mask, seqIndex, turnIndex } = layout;
  if (mask === undefined || seqIndex === undefined) {
    throw new GrpoInputError('a layout needs mask and seqIndex', {
      field: mask === undefined ? 'mask' : 'seqIndex',
    });
  }
  const n = mask.length;
  if (seqIndex.length !== n) {
    throw new GrpoInputError(`length ${seqIndex.length}, expected ${n} (mask length)`, {
      field: 'seqIndex',
    });
  }
  if (turnIndex !== undefined && turnIndex.length !== n) {
    throw new GrpoInputError(`length ${turnIndex.length}, expected ${n} (mask length)`, {
      field: 'turnIndex',
    });
  }
  if (options.requireTurns && turnIndex === undefined) {
    throw new GrpoInputError('the flow aggregation needs turnIndex', { field: 'turnIndex' });
  }
  let maxSeq = -1;
  for (let i = 0; i < n; i++) {
    const m = mask[i];
    if (m !== 0 && m !== 1) {
      throw new GrpoInputError(`value ${m} at ${i} is not 0 or 1`, { field: 'mask', index: i });
    }
    const s = seqIndex[i];
    if (!isIndex(s)) {
      throw new GrpoInputError(`value ${s} at ${i} is not a non-negative integer`, {
        field: 'seqIndex',
        index: i,
      });
    }
    if (s > maxSeq) maxSeq = s;
    if (turnIndex !== undefined && !isIndex(turnIndex[i])) {
      throw new GrpoInputError(`value ${turnIndex[i]} at ${i} is not a non-negative integer`, {
        field: 'turnIndex',
        index: i,
      });
    }
  }
  let numSeqs = maxSeq + 1;
  if (layout.numSeqs !== undefined) {
    if (!isIndex(layout.numSeqs)) {
      throw new GrpoInputError(`${layout.numSeqs} is not a non-negative integer`, {
        field: 'numSeqs',
      });
    }
    if (layout.numSeqs < maxSeq + 1) {
      const at = Array.prototype.findIndex.call(seqIndex, (s: number) => s >= layout.numSeqs!);
      throw new GrpoInputError(`index ${maxSeq} out of range for numSeqs ${layout.numSeqs}`, {
        field: 'seqIndex',
        index: at,
      });
    }
    numSeqs = layout.numSeqs;
  }
  const seqTokens = new Int32Array(numSeqs);
  const seqMasked = new Int32Array(numSeqs);
  let numMasked = 0;
  for (let i = 0; i < n; i++) {
    const s = seqIndex[i];
    seqTokens[s]++;
    if (mask[i] === 1) {
      seqMasked[s]++;
      numMasked++;
    }
  }
  let numActiveSeqs = 0;
  for (let s = 0; s < numSeqs; s++) if (seqMasked[s] > 0) numActiveSeqs++;
  return { numTokens: n, numSeqs, numMasked, seqTokens, seqMasked, numActiveSeqs };
}

/**
 * Per sequence, its number of masked (trainable) tokens — the completion length when only the
 * completion is trainable.
 */
export function sequenceLengths(layout: PackedTokens): Int32Array {
  return validatePackedTokens(layout).seqMasked;
}
