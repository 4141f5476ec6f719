import { clampLogRatio, LOG_RATIO_CLAMP } from './policy-loss.js';

/**
 * Schulman's estimators of KL(π_θ ‖ π_ref) from one sample, d = logp − refLogp:
 * k1 = d; k2 = ½d²; k3 = exp(−d) + d − 1 (= exp(ref − logp) − (ref − logp) − 1; unbiased and
 * always ≥ 0; TRL's and verl's `low_var_kl`).
 */
export type KlEstimator = 'k1' | 'k2' | 'k3';

/**
 * One token's KL estimate. For k3 the exponent ref − logp is clamped to [−bound, bound]
 * (default 20) before exp, for the same reason as the policy ratio: a −∞ or wildly stale
 * log-prob must not turn the loss into ∞/NaN. k1 and k2 have no exp and are not clamped.
 */
export function klEstimate(
  logp: number,
  refLogp: number,
  estimator: KlEstimator = 'k3',
  bound: number = LOG_RATIO_CLAMP,
): number {
  const d = logp - refLogp;
  if (estimator === 'k1') return d;
  if (estimator === 'k2') return 0.5 * d * d;
  const x = clampLogRatio(refLogp - logp, bound);
  return Math.exp(x) - x - 1;
}
