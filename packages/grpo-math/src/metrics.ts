import { checkFinite, checkLength, type FloatArray, type MaskArray } from './arrays.js';
import { type Groups, groupStats, unbiasedStd } from './groups.js';

export interface GrpoMetricsInput {
  /** Total reward per sample (completion / trajectory). */
  rewards: FloatArray;
  groups: Groups;
  /** Each reward function's own score per sample → `rewards/<name>/mean` and `/std`. */
  rewardsPerFunction?: Record<string, FloatArray>;
  /** Completion length (tokens) per sample → `completions/*`. */
  completionLengths?: ArrayLike<number>;
  /** Per sample, truthy = cut off at the length limit → `completions/clipped_ratio`. */
  truncated?: ArrayLike<boolean | number>;
  /** The loss statistics (`grpoLoss`'s result) → `clip_ratio/*`, `kl`, `entropy`. */
  loss?: {
    clipFracLow: number;
    clipFracHigh: number;
    clipFrac: number;
    kl?: number | undefined;
    entropy?: number | undefined;
  };
  /** Per-token entropies → `entropy` (mean over `mask`, or all tokens); overrides `loss.entropy`. */
  entropy?: FloatArray;
  mask?: MaskArray;
}

// Loops, not Math.min(...spread): a spread of a long array overflows the call stack.
function extreme(values: ArrayLike<number>, pick: (a: number, b: number) => number): number {
  if (values.length === 0) return 0;
  let v = values[0];
  for (let i = 1; i < values.length; i++) v = pick(v, values[i]);
  return v;
}

function mean(values: ArrayLike<number>): number {
  let s = 0;
  for (let i = 0; i < values.length; i++) s += values[i];
  return values.length === 0 ? 0 : s / values.length;
}

/**
 * Training metrics under TRL GRPOTrainer's names:
 * - `reward`: mean reward over samples; `reward_std`: the group's unbiased reward std, averaged
 *   over samples (equal to the mean over groups when groups have equal size);
 *   `frac_reward_zero_std`: fraction of samples whose group has identical rewards;
 * - `rewards/<name>/mean`, `rewards/<name>/std` (unbiased) per reward function;
 * - `completions/mean_length`, `min_length`, `max_length`, `clipped_ratio` (fraction truncated),
 *   and with `truncated`, `mean_terminated_length`, `min_…`, `max_…` over untruncated ones
 *   (0 when none);
 * - `clip_ratio/low_mean`, `clip_ratio/high_mean`, `clip_ratio/region_mean`, `kl`, `entropy`.
 * A metric is present only when its inputs were given.
 */
export function grpoMetrics(input: GrpoMetricsInput): Record<string, number> {
  const out: Record<string, number> = {};
  const n = input.rewards.length;
  const stats = groupStats(input.rewards, input.groups);
  out.reward = mean(input.rewards);
  let stdSum = 0;
  let zero = 0;
  for (let i = 0; i < n; i++) {
    const g = stats.groupOf[i];
    stdSum += stats.std[g];
    if (stats.zeroVariance[g]) zero++;
  }
  out.reward_std = n === 0 ? 0 : stdSum / n;
  out.frac_reward_zero_std = n === 0 ? 0 : zero / n;

  for (const [name, values] of Object.entries(input.rewardsPerFunction ?? {})) {
    checkLength(`rewardsPerFunction.${name}`, values, n);
    checkFinite(`rewardsPerFunction.${name}`, values);
    out[`rewards/${name}/mean`] = mean(values);
    out[`rewards/${name}/std`] = unbiasedStd(values);
  }

  if (input.completionLengths !== undefined) {
    const lengths = input.completionLengths;
    checkFinite('completionLengths', lengths);
    out['completions/mean_length'] = mean(lengths);
    out['completions/min_length'] = extreme(lengths, Math.min);
    out['completions/max_length'] = extreme(lengths, Math.max);
    if (input.truncated !== undefined) {
      checkLength('truncated', input.truncated, lengths.length);
      const terminated = Array.from(lengths).filter((_, i) => !input.truncated![i]);
      out['completions/mean_terminated_length'] = mean(terminated);
      out['completions/min_terminated_length'] = extreme(terminated, Math.min);
      out['completions/max_terminated_length'] = extreme(terminated, Math.max);
    }
  }
  if (input.truncated !== undefined) {
    const t = input.truncated;
    let c = 0;
    for (let i = 0; i < t.length; i++) if (t[i]) c++;
    out['completions/clipped_ratio'] = t.length === 0 ? 0 : c / t.length;
  }

  if (input.loss !== undefined) {
    out['clip_ratio/low_mean'] = input.loss.clipFracLow;
    out['clip_ratio/high_mean'] = input.loss.clipFracHigh;
    out['clip_ratio/region_mean'] = input.loss.clipFrac;
    if (input.loss.kl !== undefined) out.kl = input.loss.kl;
    if (input.loss.entropy !== undefined) out.entropy = input.loss.entropy;
  }
  if (input.entropy !== undefined) {
    const e = input.entropy;
    const mask = input.mask;
    if (mask !== undefined) checkLength('mask', mask, e.length);
    let s = 0;
    let c = 0;
    for (let i = 0; i < e.length; i++) {
      if (mask !== undefined && mask[i] !== 1) continue;
      s += e[i];
      c++;
    }
    out.entropy = c === 0 ? 0 : s / c;
  }
  return out;
}
