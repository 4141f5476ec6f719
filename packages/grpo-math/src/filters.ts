import { checkFinite, checkLength, checkOption, type FloatArray } from './arrays.js';
import { GrpoInputError } from './errors.js';
import { type Groups, groupStats } from './groups.js';
import { type PackedTokens, validatePackedTokens } from './packed-tokens.js';

export interface GroupFilterResult {
  /** Per sample: 1 = its group is kept. */
  keepSample: Uint8Array;
  /** Ids (as given, or dense numbers for a group size) of groups with reward variance. */
  keptGroups: (number | string)[];
  /** Ids of zero-variance groups (identical rewards, or a single sample). */
  droppedGroups: (number | string)[];
}

/**
 * DAPO dynamic sampling: groups whose rewards are all identical give every member a zero
 * advantage and so no gradient; keep only the others. "Identical" is exact equality, or
 * max − min ≤ `tolerance` when one is given.
 */
export function filterZeroVarianceGroups(
  rewards: FloatArray,
  groups: Groups,
  options: { tolerance?: number } = {},
): GroupFilterResult {
  const tol = options.tolerance ?? 0;
  checkOption('tolerance', tol, tol >= 0, 'a non-negative number');
  const stats = groupStats(rewards, groups);
  const k = stats.groupIds.length;
  const min = new Float64Array(k).fill(Number.POSITIVE_INFINITY);
  const max = new Float64Array(k).fill(Number.NEGATIVE_INFINITY);
  for (let i = 0; i < rewards.length; i++) {
    const g = stats.groupOf[i];
    if (rewards[i] < min[g]) min[g] = rewards[i];
    if (rewards[i] > max[g]) max[g] = rewards[i];
  }
  const keep = new Uint8Array(k);
  const keptGroups: (number | string)[] = [];
  const droppedGroups: (number | string)[] = [];
  for (let g = 0; g < k; g++) {
    keep[g] = stats.size[g] > 1 && max[g] - min[g] > tol ? 1 : 0;
    (keep[g] ? keptGroups : droppedGroups).push(stats.groupIds[g]);
  }
  const keepSample = new Uint8Array(rewards.length);
  for (let i = 0; i < rewards.length; i++) keepSample[i] = keep[stats.groupOf[i]];
  return { keepSample, keptGroups, droppedGroups };
}

/**
 * Which sequences were truncated: they reached `maxLength` tokens without finishing (no EOS /
 * final answer). 1 = truncated. `lengths` and `finished` have one entry per sequence.
 */
export function truncatedSequences(
  lengths: ArrayLike<number>,
  finished: ArrayLike<boolean | number>,
  maxLength: number,
): Uint8Array {
  checkLength('finished', finished, lengths.length);
  checkOption('maxLength', maxLength, maxLength > 0, 'a positive length');
  const out = new Uint8Array(lengths.length);
  for (let s = 0; s < lengths.length; s++) out[s] = lengths[s] >= maxLength && !finished[s] ? 1 : 0;
  return out;
}

/**
 * Overlong filtering (DAPO): a new mask equal to `layout.mask` except that every token of a
 * truncated sequence is 0, so a cut-off answer is neither rewarded nor punished.
 * `truncated` has one entry per sequence (truthy = truncated).
 */
export function maskTruncated(
  layout: PackedTokens,
  truncated: ArrayLike<boolean | number>,
): Uint8Array {
  const info = validatePackedTokens(layout);
  if (truncated.length < info.numSeqs) {
    throw new GrpoInputError(`length ${truncated.length}, expected ${info.numSeqs} sequences`, {
      field: 'truncated',
    });
  }
  const out = new Uint8Array(info.numTokens);
  for (let i = 0; i < info.numTokens; i++) {
    out[i] = layout.mask[i] === 1 && !truncated[layout.seqIndex[i]] ? 1 : 0;
  }
  return out;
}

export interface OverlongPenaltyOptions {
  /** L_max, the generation budget. */
  maxLength: number;
  /** L_cache, the soft buffer before L_max (DAPO: 4096 of 20480). */
  cacheLength: number;
  /** Multiplier of the penalty (verl's `overlong_buffer.penalty_factor`); default 1. */
  factor?: number;
}

/**
 * DAPO soft overlong punishment of one length, added to the reward:
 * 0 if len ≤ L_max − L_cache; (L_max − L_cache − len)/L_cache inside the buffer (linear from 0
 * to −1); −1 past L_max. Times `factor`.
 */
export function overlongPenalty(length: number, options: OverlongPenaltyOptions): number {
  const { maxLength, cacheLength } = options;
  const factor = options.factor ?? 1;
  checkOption('maxLength', maxLength, maxLength > 0 && Number.isFinite(maxLength), 'positive');
  checkOption(
    'cacheLength',
    cacheLength,
    cacheLength > 0 && cacheLength <= maxLength,
    'in (0, maxLength]',
  );
  checkOption('factor', factor, Number.isFinite(factor), 'finite');
  checkOption('length', length, length >= 0, 'a length');
  const start = maxLength - cacheLength;
  if (length <= start) return 0;
  if (length <= maxLength) return (factor * (start - length)) / cacheLength;
  return -factor;
}

/** `overlongPenalty` of every length. */
export function overlongPenalties(
  lengths: ArrayLike<number>,
  options: OverlongPenaltyOptions,
): Float64Array {
  checkFinite('lengths', lengths);
  const out = new Float64Array(lengths.length);
  for (let i = 0; i < lengths.length; i++) out[i] = overlongPenalty(lengths[i], options);
  return out;
}
