import { checkFinite, type FloatArray } from './arrays.js';
import { GrpoInputError } from './errors.js';

/**
 * How samples form groups: a group size G (samples 0..G−1 are group 0, G..2G−1 group 1, …), or
 * one group id per sample (numbers or strings; equal ids = same group, in any order).
 */
export type Groups = number | ArrayLike<number> | readonly string[];

/** Per-group statistics of a reward vector, groups numbered densely by first appearance. */
export interface GroupStats {
  /** Dense group number of every sample, in [0, numGroups). */
  groupOf: Int32Array;
  /** The caller's id of each dense group (the group number itself when a size was given). */
  groupIds: (number | string)[];
  size: Int32Array;
  mean: Float64Array;
  /** Unbiased sample std (n − 1); 0 for a group of one. */
  std: Float64Array;
  /** True when every reward of the group is identical (also for a group of one). */
  zeroVariance: Uint8Array;
}

export function resolveGroups(
  numSamples: number,
  groups: Groups,
): {
  groupOf: Int32Array;
  groupIds: (number | string)[];
} {
  const groupOf = new Int32Array(numSamples);
  const groupIds: (number | string)[] = [];
  if (typeof groups === 'number') {
    if (!Number.isInteger(groups) || groups < 1) {
      throw new GrpoInputError(`${groups} is not a positive integer`, { field: 'groupSize' });
    }
    if (numSamples % groups !== 0) {
      throw new GrpoInputError(`${numSamples} samples do not split into groups of ${groups}`, {
        field: 'groupSize',
      });
    }
    for (let i = 0; i < numSamples; i++) groupOf[i] = Math.floor(i / groups);
    for (let g = 0; g < numSamples / groups; g++) groupIds.push(g);
    return { groupOf, groupIds };
  }
  if (groups.length !== numSamples) {
    throw new GrpoInputError(`length ${groups.length}, expected ${numSamples}`, {
      field: 'groupIds',
    });
  }
  const dense = new Map<number | string, number>();
  for (let i = 0; i < numSamples; i++) {
    const id = groups[i];
    if (typeof id === 'number' && !Number.isFinite(id)) {
      throw new GrpoInputError(`value ${id} at ${i} is not a usable id`, {
        field: 'groupIds',
        index: i,
      });
    }
    let g = dense.get(id);
    if (g === undefined) {
      g = groupIds.length;
      dense.set(id, g);
      groupIds.push(id);
    }
    groupOf[i] = g;
  }
  return { groupOf, groupIds };
}

/** Mean, unbiased std and zero-variance flag of each group, in float64. */
export function groupStats(rewards: FloatArray, groups: Groups): GroupStats {
  checkFinite('rewards', rewards);
  const n = rewards.length;
  const { groupOf, groupIds } = resolveGroups(n, groups);
  const k = groupIds.length;
  const size = new Int32Array(k);
  const mean = new Float64Array(k);
  const std = new Float64Array(k);
  const min = new Float64Array(k).fill(Number.POSITIVE_INFINITY);
  const max = new Float64Array(k).fill(Number.NEGATIVE_INFINITY);
  for (let i = 0; i < n; i++) {
    const g = groupOf[i];
    const r = rewards[i];
    size[g]++;
    mean[g] += r;
    if (r < min[g]) min[g] = r;
    if (r > max[g]) max[g] = r;
  }
  for (let g = 0; g < k; g++) mean[g] /= size[g];
  // Two-pass variance: exact zero for identical values, no cancellation for large offsets.
  for (let i = 0; i < n; i++) {
    const d = rewards[i] - mean[groupOf[i]];
    std[groupOf[i]] += d * d;
  }
  const zeroVariance = new Uint8Array(k);
  for (let g = 0; g < k; g++) {
    zeroVariance[g] = min[g] === max[g] ? 1 : 0;
    std[g] = size[g] > 1 && !zeroVariance[g] ? Math.sqrt(std[g] / (size[g] - 1)) : 0;
  }
  return { groupOf, groupIds, size, mean, std, zeroVariance };
}

/** Unbiased sample std of all values (0 for fewer than two). */
export function unbiasedStd(values: FloatArray): number {
  const n = values.length;
  if (n < 2) return 0;
  let mean = 0;
  for (let i = 0; i < n; i++) mean += values[i];
  mean /= n;
  let ss = 0;
  for (let i = 0; i < n; i++) ss += (values[i] - mean) ** 2;
  return Math.sqrt(ss / (n - 1));
}
