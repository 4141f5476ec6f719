import { type AggregationOptions, type LossAggregation, weightsFor } from './aggregation.js';
import { checkLength, checkOption, type FloatArray } from './arrays.js';
import { broadcastAdvantages } from './broadcast.js';
import { GrpoInputError } from './errors.js';
import { type KlEstimator, klEstimate } from './kl.js';
import { type PackedTokens, validatePackedTokens } from './packed-tokens.js';
import {
  type ClipOptions,
  emptyTokenPolicyLoss,
  resolveClip,
  tokenPolicyLossInto,
} from './policy-loss.js';

/** Per-token inputs of `grpoLoss`; every array has one entry per token of `layout`. */
export interface GrpoLossInput {
  layout: PackedTokens;
  /** Log-probs of the sampled tokens under the policy being trained. */
  logp: FloatArray;
  /** Log-probs under the policy that sampled them; omitted = `logp` (ρ = 1, one update per batch). */
  oldLogp?: FloatArray;
  /** Log-probs under the reference policy; needed when `beta` ≠ 0. */
  refLogp?: FloatArray;
  /** Per-token advantages. Give this or `seqAdvantages`. */
  advantages?: FloatArray;
  /** Per-sequence advantages, broadcast to tokens through `layout.seqIndex`. */
  seqAdvantages?: FloatArray;
  /** Per-token entropies, only for the `entropy` statistic. */
  entropy?: FloatArray;
}

export interface GrpoLossOptions extends ClipOptions, AggregationOptions {
  /** Default `token-mean`. */
  aggregation?: LossAggregation;
  /** KL coefficient: ℓ_i = policy loss_i + beta·kl_i. Default 0. */
  beta?: number;
  /** Default `k3`. */
  klEstimator?: KlEstimator;
}

export interface GrpoLossResult {
  /** Aggregated Σ w_i·(pg_i + beta·kl_i) = pgLoss + beta·klLoss. */
  loss: number;
  /** Aggregated policy-gradient (PPO-clip) part. */
  pgLoss: number;
  /** Aggregated KL part, same aggregation as the loss (0 without refLogp). */
  klLoss: number;
  /** Token mean of the KL estimate over masked tokens (TRL's `kl`); undefined without refLogp. */
  kl: number | undefined;
  /** Token mean, over masked tokens, of [A < 0 and ρ < 1 − clipLow]. */
  clipFracLow: number;
  /** Token mean of [A > 0 and ρ > 1 + clipHigh]. */
  clipFracHigh: number;
  /** Token mean of either (TRL's `clip_ratio/region_mean`). */
  clipFrac: number;
  /** Token mean of [A < 0 and the dual-clip cap active]; 0 when dual-clip is off. */
  clipFracDual: number;
  /** Token mean of the given entropies; undefined when none were given. */
  entropy: number | undefined;
  /** Masked tokens. */
  numTokens: number;
  /** Sequences with at least one masked token. */
  numSeqs: number;
  /** Per token ρ (1 at unmasked tokens). */
  ratio: Float64Array;
  /** Per token ℓ_i = pg_i + beta·kl_i (0 at unmasked tokens). */
  perTokenLoss: Float64Array;
  /** Per token KL estimate (0 at unmasked tokens); undefined without refLogp. */
  perTokenKl: Float64Array | undefined;
  /** ∂loss/∂ℓ_i, see `tokenWeights`: loss = Σ weights_i·perTokenLoss_i. */
  weights: Float64Array;
}

// Only masked tokens are checked: the collator may leave anything at the others.
function checkMaskedFinite(field: string, values: FloatArray, mask: ArrayLike<number>): void {
  for (let i = 0; i < values.length; i++) {
    if (mask[i] === 1 && !Number.isFinite(values[i])) {
      throw new GrpoInputError(`value ${values[i]} at masked token ${i} is not finite`, {
        field,
        index: i,
      });
    }
  }
}

/**
 * The GRPO / DAPO / Dr.GRPO / Flow-GRPO loss in one call: per masked token
 * ρ = exp(clamp(logp − oldLogp, ±20)), pg = −min(ρA, clip(ρ, 1 − clipLow, 1 + clipHigh)·A)
 * (capped at −c·A for A < 0 with dual-clip), kl = estimator(logp, refLogp),
 * ℓ = pg + beta·kl; then ℓ aggregated as `aggregation` says. Statistics are token means over the
 * masked tokens, like TRL's. Options may be passed as the second argument or inside the first.
 */
export function grpoLoss(
  input: GrpoLossInput & GrpoLossOptions,
  extraOptions: GrpoLossOptions = {},
): GrpoLossResult {
  // Options may sit in the first argument too (one flat object); the second argument wins.
  const options: GrpoLossOptions = { ...input, ...extraOptions };
  const aggregation = options.aggregation ?? 'token-mean';
  const beta = options.beta ?? 0;
  const estimator = options.klEstimator ?? 'k3';
  const clip = resolveClip(options);
  checkOption('beta', beta, Number.isFinite(beta), 'a finite coefficient');
  checkOption(
    'klEstimator',
    estimator,
    ['k1', 'k2', 'k3'].includes(estimator),
    "'k1', 'k2' or 'k3'",
  );
  const { layout } = input;
  const info = validatePackedTokens(layout, { requireTurns: aggregation === 'flow' });
  const n = info.numTokens;
  const mask = layout.mask;

  checkLength('logp', input.logp, n);
  checkMaskedFinite('logp', input.logp, mask);
  const oldLogp = input.oldLogp ?? input.logp;
  checkLength('oldLogp', oldLogp, n);
  checkMaskedFinite('oldLogp', oldLogp, mask);
  if (input.refLogp !== undefined) {
    checkLength('refLogp', input.refLogp, n);
    checkMaskedFinite('refLogp', input.refLogp, mask);
  } else if (beta !== 0) {
    throw new GrpoInputError('beta ≠ 0 needs reference log-probs', { field: 'refLogp' });
  }
  let advantages: FloatArray;
  if (input.advantages !== undefined && input.seqAdvantages !== undefined) {
    throw new GrpoInputError('give advantages or seqAdvantages, not both', { field: 'advantages' });
  } else if (input.advantages !== undefined) {
    checkLength('advantages', input.advantages, n);
    advantages = input.advantages;
  } else if (input.seqAdvantages !== undefined) {
    checkLength('seqAdvantages', input.seqAdvantages, info.numSeqs);
    advantages = broadcastAdvantages(input.seqAdvantages, layout.seqIndex);
  } else {
    throw new GrpoInputError('advantages or seqAdvantages is required', { field: 'advantages' });
  }
  checkMaskedFinite('advantages', advantages, mask);
  if (input.entropy !== undefined) {
    checkLength('entropy', input.entropy, n);
    checkMaskedFinite('entropy', input.entropy, mask);
  }

  const ratio = new Float64Array(n).fill(1);
  const pg = new Float64Array(n);
  const perTokenLoss = new Float64Array(n);
  const perTokenKl = input.refLogp === undefined ? undefined : new Float64Array(n);
  let low = 0;
  let high = 0;
  let region = 0;
  let dual = 0;
  let klSum = 0;
  let entropySum = 0;
  const scratch = emptyTokenPolicyLoss();
  for (let i = 0; i < n; i++) {
    if (mask[i] !== 1) continue;
    const t = tokenPolicyLossInto(
      scratch,
      input.logp[i],
      oldLogp[i],
      advantages[i],
      clip.clipLow,
      clip.clipHigh,
      clip.clipRatioC,
      clip.logRatioClamp,
    );
    ratio[i] = t.ratio;
    pg[i] = t.loss;
    if (t.clippedLow) low++;
    if (t.clippedHigh) high++;
    if (t.clippedLow || t.clippedHigh) region++;
    if (t.dualClipped) dual++;
    let l = t.loss;
    if (perTokenKl !== undefined) {
      const k = klEstimate(input.logp[i], input.refLogp![i], estimator, clip.logRatioClamp);
      perTokenKl[i] = k;
      klSum += k;
      l += beta * k;
    }
    perTokenLoss[i] = l;
    if (input.entropy !== undefined) entropySum += input.entropy[i];
  }
  const m = info.numMasked;
  const frac = (count: number) => (m === 0 ? 0 : count / m);
  const aggOptions: AggregationOptions = { maxLen: options.maxLen, normSeqs: options.normSeqs };
  // The aggregation as one weighted sum (see tokenWeights), so loss = Σ weights·perTokenLoss
  // holds to the last bit for what we return.
  const weights = weightsFor(layout, info, aggregation, aggOptions);
  let loss = 0;
  let pgLoss = 0;
  let klLoss = 0;
  for (let i = 0; i < n; i++) {
    const w = weights[i];
    if (w === 0) continue;
    loss += w * perTokenLoss[i];
    pgLoss += w * pg[i];
    if (perTokenKl !== undefined) klLoss += w * perTokenKl[i];
  }
  return {
    loss,
    pgLoss,
    klLoss,
    kl: perTokenKl === undefined ? undefined : frac(klSum),
    clipFracLow: frac(low),
    clipFracHigh: frac(high),
    clipFrac: frac(region),
    clipFracDual: frac(dual),
    entropy: input.entropy === undefined ? undefined : frac(entropySum),
    numTokens: m,
    numSeqs: info.numActiveSeqs,
    ratio,
    perTokenLoss,
    perTokenKl,
    weights,
  };
}
