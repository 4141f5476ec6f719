import { checkOption, type FloatArray } from './arrays.js';
import { type Groups, groupStats, unbiasedStd } from './groups.js';

/**
 * How group-centred rewards are scaled:
 * - `group`: divide by the group's unbiased std (GRPO, TRL `scale_rewards="group"`),
 * - `batch`: divide by the unbiased std of all rewards in the batch (TRL `scale_rewards="batch"`),
 * - `none`: no scaling (Dr.GRPO, ARTIST).
 */
export type AdvantageScale = 'group' | 'batch' | 'none';

export interface AdvantageOptions {
  scale?: AdvantageScale;
  /** Added to the std before dividing; default 1e-6. */
  eps?: number;
}

/**
 * Group-relative advantages, one per sample, computed in float64:
 * group: (r − mean_g)/(std_g + eps); batch: (r − mean_g)/(std_batch + eps); none: r − mean_g.
 * Stds are unbiased (n − 1). A group whose rewards are all identical (including a group of one)
 * gets advantages of exactly 0, whatever the rounding of its mean.
 */
export function computeAdvantages(
  rewards: FloatArray,
  groups: Groups,
  options: AdvantageOptions = {},
): Float64Array {
  const scale = options.scale ?? 'group';
  const eps = options.eps ?? 1e-6;
  checkOption('eps', eps, eps >= 0 && Number.isFinite(eps), 'a non-negative number');
  checkOption(
    'scale',
    scale,
    scale === 'group' || scale === 'batch' || scale === 'none',
    "one of 'group', 'batch', 'none'",
  );
  const stats = groupStats(rewards, groups);
  const batchStd = scale === 'batch' ? unbiasedStd(rewards) : 0;
  const out = new Float64Array(rewards.length);
  for (let i = 0; i < rewards.length; i++) {
    const g = stats.groupOf[i];
    if (stats.zeroVariance[g]) continue;
    const centred = rewards[i] - stats.mean[g];
    if (scale === 'group') out[i] = centred / (stats.std[g] + eps);
    else if (scale === 'batch') out[i] = centred / (batchStd + eps);
    else out[i] = centred;
  }
  return out;
}
