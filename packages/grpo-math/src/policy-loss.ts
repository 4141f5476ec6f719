import { checkOption } from './arrays.js';

/** Default bound on |log ratio| before exponentiating (verl uses the same ±20). */
export const LOG_RATIO_CLAMP = 20;

/**
 * Clamps a log-ratio to [−bound, bound] before it is exponentiated. Why: a token whose old
 * log-prob is far off (a stale or mismatched sampler: logp − oldLogp of a few hundred) gives
 * exp overflow — ∞ in float64 past 709, and already past 88.7 in the trainer's float32 graph —
 * and one ∞ (or 0·∞ = NaN) poisons the whole batch's loss and gradients. e^20 ≈ 4.85e8 is far
 * past any clip bound, so the clamp changes nothing the PPO clip has not already flattened; on
 * the unclipped side (A < 0, huge ρ) it only keeps the loss finite. The trainer's graph applies
 * the same clamp so both agree.
 */
export function clampLogRatio(logRatio: number, bound: number = LOG_RATIO_CLAMP): number {
  return Math.min(bound, Math.max(-bound, logRatio));
}

/** ρ = exp(clamp(logp − oldLogp)); see `clampLogRatio` for why the clamp. */
export function policyRatio(logp: number, oldLogp: number, bound = LOG_RATIO_CLAMP): number {
  return Math.exp(clampLogRatio(logp - oldLogp, bound));
}

export interface ClipOptions {
  /** Lower clip ε: ratio clipped from below at 1 − clipLow. Default 0.2. */
  clipLow?: number;
  /** Upper clip ε (DAPO "clip-higher", e.g. 0.28): ratio clipped from above at 1 + clipHigh. Default = clipLow. */
  clipHigh?: number;
  /**
   * Dual-clip constant c > 1 (verl's `clip_ratio_c`, typically 3): for A < 0 the loss is
   * additionally capped at −c·A. Off when undefined.
   */
  clipRatioC?: number;
  /** Bound on |logp − oldLogp| before exp; default 20. */
  logRatioClamp?: number;
}

export interface TokenPolicyLoss {
  /** −min(ρA, clip(ρ)A), then capped at −c·A for A < 0 when dual-clip is on. */
  loss: number;
  ratio: number;
  /** A < 0 and ρ < 1 − clipLow: the clipped term is active (zero gradient). */
  clippedLow: boolean;
  /** A > 0 and ρ > 1 + clipHigh. */
  clippedHigh: boolean;
  /** A < 0 and the dual-clip cap −c·A is active. */
  dualClipped: boolean;
}

export function resolveClip(options: ClipOptions): Required<Omit<ClipOptions, 'clipRatioC'>> & {
  clipRatioC: number | undefined;
} {
  const clipLow = options.clipLow ?? 0.2;
  const clipHigh = options.clipHigh ?? clipLow;
  const logRatioClamp = options.logRatioClamp ?? LOG_RATIO_CLAMP;
  checkOption('clipLow', clipLow, clipLow >= 0 && clipLow <= 1, 'in [0, 1]');
  checkOption('clipHigh', clipHigh, clipHigh >= 0 && Number.isFinite(clipHigh), 'a finite ε ≥ 0');
  checkOption('logRatioClamp', logRatioClamp, logRatioClamp > 0, 'a positive bound');
  const c = options.clipRatioC;
  if (c !== undefined) checkOption('clipRatioC', c, c > 1, 'greater than 1');
  return { clipLow, clipHigh, logRatioClamp, clipRatioC: c };
}

/**
 * PPO-clip loss of one token: ρ = exp(clamp(logp − oldLogp, ±20)),
 * loss = −min(ρ·A, clip(ρ, 1 − clipLow, 1 + clipHigh)·A); with dual-clip, for A < 0,
 * loss = min(that, −c·A).
 */
export function tokenPolicyLoss(
  logp: number,
  oldLogp: number,
  advantage: number,
  options: ClipOptions = {},
): TokenPolicyLoss {
  const o = resolveClip(options);
  return tokenPolicyLossInto(
    emptyTokenPolicyLoss(),
    logp,
    oldLogp,
    advantage,
    o.clipLow,
    o.clipHigh,
    o.clipRatioC,
    o.logRatioClamp,
  );
}

/** The same with resolved options, written into `out` (no allocation in the per-token loop). */
export function tokenPolicyLossInto(
  out: TokenPolicyLoss,
  logp: number,
  oldLogp: number,
  a: number,
  clipLow: number,
  clipHigh: number,
  clipRatioC: number | undefined,
  bound: number,
): TokenPolicyLoss {
  const ratio = policyRatio(logp, oldLogp, bound);
  const lo = 1 - clipLow;
  const hi = 1 + clipHigh;
  const clipped = Math.min(hi, Math.max(lo, ratio));
  let loss = Math.max(-ratio * a, -clipped * a);
  let dualClipped = false;
  if (clipRatioC !== undefined && a < 0) {
    const cap = -clipRatioC * a;
    if (loss > cap) {
      loss = cap;
      dualClipped = true;
    }
  }
  out.loss = loss;
  out.ratio = ratio;
  out.clippedLow = a < 0 && ratio < lo;
  out.clippedHigh = a > 0 && ratio > hi;
  out.dualClipped = dualClipped;
  return out;
}

export function emptyTokenPolicyLoss(): TokenPolicyLoss {
  return { loss: 0, ratio: 1, clippedLow: false, clippedHigh: false, dualClipped: false };
}
