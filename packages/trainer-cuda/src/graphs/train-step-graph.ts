import { GraphBuilder, type Value } from '@flowgrpo/graph';
import { LOG_RATIO_CLAMP } from '@flowgrpo/grpo';
import type { BaseWeights, LoraConfig } from '@flowgrpo/models';
import {
  addDecoderInputs,
  addLoraInputs,
  addTargetInputs,
  type DecoderGraph,
  decoderForward,
  decoderGraphOf,
  targetLogprobs,
  useWeightInputs,
} from '@flowgrpo/models';

// The train step: the decoder's logprobs forward with LoRA, the training objective, and its
// gradients w.r.t. every LoRA matrix (appended by @flowgrpo/graph's autodiff). One graph serves
// GRPO (every TRL loss type plus Flow-GRPO) and SFT:
//
//   loss = Σ pg_weights · (pg + beta·kl)  +  Σ nll_weights · (−logp)
//
// per token, written exactly as @flowgrpo/grpo's tokenPolicyLoss and klEstimate write them:
//   ρ  = exp(clamp(logp − old, ±20))
//   pg = −min(ρA, clip(ρ, 1 − ε_low, 1 + ε_high)·A), then for A < 0 capped at −c·A (dual clip)
//   kl = c1·d + c2·½d² + c3·(exp(x) − x − 1),  d = logp − ref,  x = clamp(ref − logp, ±20)
//
// How the tokens are aggregated (token-mean, seq-mean-token-mean, Dr.GRPO's seq-sum-norm, flow)
// is not in the graph: every aggregation is a linear combination of the per-token losses whose
// coefficients depend only on the mask and the sequence/turn indices (@flowgrpo/grpo's
// tokenWeights). The host computes them over the WHOLE batch and feeds each micro-batch its
// slice, so micro-batch losses and gradients add up exactly to the one-batch ones — the classic
// accumulation bug (normalising per micro-batch) cannot happen. The statistics are sums weighted
// by `stat_weights` (mask / number of masked tokens in the whole batch): token means after the
// micro-batches are added, as TRL reports them.
//
// On-policy steps (`on_policy` true: TRL's old_per_token_logps = None, one update per batch)
// take `old` from this forward's own log-probs, detached (a stop-gradient: ρ = 1, ∂ρ/∂logp = 1),
// instead of a separate log-probs pass over the batch before the update. Both give the same
// bits: the logprobs graph computes these log-probs exactly as this forward does (tested, and
// checked over the demo's GRPO steps).
//
// Tokens sampled by another engine or an earlier adapter (vLLM rollouts, max_staleness) are
// weighted by the truncated importance ratio π_old / π_sampler here, from the same `old` the PPO
// ratio uses (vllm_importance_sampling_mode token_truncate: min(ρ, cap); token_mask: ρ, or 0
// above the cap), where `is_weighted` marks a token whose sampled log-prob is known:
//   pg_weights · w,  w = exp(old − sampler_logprobs)  (1 where not weighted), detached
// so an on-policy step needs no log-probs pass over the batch before it: π_old is this forward's
// own (ρ's formula and the host's for the per-turn modes: lora-policy.ts applyImportanceWeights).
//
// Gradient accumulation stays on the device: `grad.<p> = acc.<p> + ∂loss/∂p`, the previous
// micro-batch's gradients fed back as `acc.<p>` (zeros for the first).

export const OLD_LOGPROBS = 'old_logprobs';
/** [] bool: old = this forward's log-probs, detached (old_logprobs is then not read). */
export const ON_POLICY = 'on_policy';
export const REF_LOGPROBS = 'ref_logprobs';
/** Per target: the sampler's log-prob (read where is_weighted). */
export const SAMPLER_LOGPROBS = 'sampler_logprobs';
/** Per target, bool: weight this token by the importance ratio. */
export const IS_WEIGHTED = 'is_weighted';
/** []: the ratio's cap (vllm_importance_sampling_cap). */
export const IS_CAP = 'is_cap';
/** [] bool: above the cap the weight is 0 (token_mask) instead of the cap (token_truncate). */
export const IS_MASK = 'is_mask';
export const ADVANTAGES = 'advantages';
export const PG_WEIGHTS = 'pg_weights';
export const NLL_WEIGHTS = 'nll_weights';
export const STAT_WEIGHTS = 'stat_weights';
export const EPSILON_LOW = 'epsilon_low';
export const EPSILON_HIGH = 'epsilon_high';
export const CLIP_RATIO_C = 'clip_ratio_c';
export const BETA = 'beta';
/** [3]: the coefficients of k1, k2, k3 (one-hot: the KL estimator). */
export const KL_COEFFS = 'kl_coeffs';
export const accName = (param: string) => `acc.${param}`;

/** Scalar outputs, each a sum over the micro-batch's tokens (add them across micro-batches). */
export const TRAIN_STEP_STATS = [
  'loss',
  'pg_loss',
  'kl_loss',
  'nll_loss',
  'kl_sum',
  'clip_low_sum',
  'clip_high_sum',
  'clip_region_sum',
  'clip_dual_sum',
  'entropy_sum',
] as const;
export type TrainStepStat = (typeof TRAIN_STEP_STATS)[number];

/**
 * Builds the train_step graph of a decoder: with LoRA (the adapter matrices are the parameters)
 * or 'full' (every weight is an input and a parameter: full fine-tuning, e.g. of a model trained
 * from a seed). `vocabChunkSize`: the most vocabulary columns one LM-head chunk holds
 * (@flowgrpo/models' vocabChunks: a larger vocabulary is never held as [tokens × V]).
 * `gradientCheckpointing`: each layer's activations are recomputed in the backward rather than
 * kept from the forward (decoderForward's `recompute`).
 */
export function buildTrainStepGraph(
  base: BaseWeights,
  lora: LoraConfig | 'full',
  options: {
    vocabChunkSize?: number | undefined;
    gradientCheckpointing?: boolean | undefined;
  } = {},
): DecoderGraph {
  const b = new GraphBuilder('train_step');
  if (lora === 'full') useWeightInputs(b);
  const inputs = addDecoderInputs(b, base, 'train_step');
  const targets = addTargetInputs(b);
  const adapters = lora === 'full' ? undefined : addLoraInputs(b, base, lora);
  const tokens = ['batch', 'targets'];
  const oldIn = b.input(OLD_LOGPROBS, 'float32', tokens);
  const onPolicy = b.input(ON_POLICY, 'bool', []);
  const ref = b.input(REF_LOGPROBS, 'float32', tokens);
  const adv = b.input(ADVANTAGES, 'float32', tokens);
  const pgWIn = b.input(PG_WEIGHTS, 'float32', tokens);
  const samplerLogp = b.input(SAMPLER_LOGPROBS, 'float32', tokens);
  const isWeighted = b.input(IS_WEIGHTED, 'bool', tokens);
  const isCap = b.input(IS_CAP, 'float32', []);
  const isMask = b.input(IS_MASK, 'bool', []);
  const nllW = b.input(NLL_WEIGHTS, 'float32', tokens);
  const statW = b.input(STAT_WEIGHTS, 'float32', tokens);
  const epsLow = b.input(EPSILON_LOW, 'float32', []);
  const epsHigh = b.input(EPSILON_HIGH, 'float32', []);
  const c = b.input(CLIP_RATIO_C, 'float32', []);
  const beta = b.input(BETA, 'float32', []);
  const klCoeffs = b.input(KL_COEFFS, 'float32', [3]);

  const forward = decoderForward(b, base, inputs, adapters, {
    recompute: options.gradientCheckpointing ?? false,
    castPerUse: true,
  });
  const head = targetLogprobs(b, base, forward, targets, {
    entropy: true,
    vocabChunkSize: options.vocabChunkSize,
  });
  const logp = head.logprobs;
  const detached = b.identity(logp);
  const old = b.where(onPolicy, detached, oldIn);

  // Importance weights of tokens another policy sampled (no gradient: `old` is detached).
  const rho = b.exp(b.sub(old, samplerLogp));
  const isW = b.where(isMask, b.where(b.greater(rho, isCap), 0, rho), b.min(rho, isCap));
  const pgW = b.mul(pgWIn, b.where(isWeighted, isW, 1));

  // Policy-gradient term (PPO clip, asymmetric, optional dual clip).
  const ratio = b.exp(b.clip(b.sub(logp, old), -LOG_RATIO_CLAMP, LOG_RATIO_CLAMP));
  const lo = b.sub(1, epsLow);
  const hi = b.add(1, epsHigh);
  const clipped = b.clip(ratio, lo, hi);
  const pgClip = b.max(b.neg(b.mul(ratio, adv)), b.neg(b.mul(clipped, adv)));
  const cap = b.neg(b.mul(c, adv));
  const negative = b.less(adv, 0);
  const dual = b.and(negative, b.greater(pgClip, cap));
  const pg = b.where(dual, cap, pgClip);

  // KL to the reference policy, by the estimator the coefficients pick.
  const d = b.sub(logp, ref);
  const x = b.clip(b.sub(ref, logp), -LOG_RATIO_CLAMP, LOG_RATIO_CLAMP);
  const k3 = b.sub(b.sub(b.exp(x), x), 1);
  const coeff = (i: number) => b.gather(klCoeffs, b.ints([i]), 0);
  const kl = b.add(
    b.add(b.mul(coeff(0), d), b.mul(coeff(1), b.mul(0.5, b.mul(d, d)))),
    b.mul(coeff(2), k3),
  );

  const weighted = (w: Value, v: Value) => b.reduceSum(b.mul(w, v));
  const pgLoss = weighted(pgW, pg);
  const klLoss = weighted(pgW, kl);
  const nllLoss = weighted(nllW, b.neg(logp));
  const loss = b.add(b.add(pgLoss, b.mul(beta, klLoss)), nllLoss);

  // Statistics (no gradient flows from them: they are not part of the loss).
  const flag = (v: Value) => b.cast(v, 'float32');
  const low = b.and(negative, b.less(ratio, lo));
  const high = b.and(b.greater(adv, 0), b.greater(ratio, hi));
  const entropy = head.entropy!();

  b.output(loss, 'loss');
  b.output(pgLoss, 'pg_loss');
  b.output(klLoss, 'kl_loss');
  b.output(nllLoss, 'nll_loss');
  b.output(weighted(statW, kl), 'kl_sum');
  // low needs A < 0 and high A > 0, so they never overlap: the region is their sum (and Or has
  // no WebGPU kernel).
  const lowF = flag(low);
  const highF = flag(high);
  b.output(weighted(statW, lowF), 'clip_low_sum');
  b.output(weighted(statW, highF), 'clip_high_sum');
  b.output(weighted(statW, b.add(lowF, highF)), 'clip_region_sum');
  b.output(weighted(statW, flag(dual)), 'clip_dual_sum');
  b.output(weighted(statW, entropy), 'entropy_sum');
  b.output(logp, 'logprobs');

  const params = adapters
    ? [...adapters.params.values()]
    : b.graph.inputs.filter((v) => base.refs.has(v.name));
  const grads = b.grad(loss, params, { asOutputs: false, stop: [detached] });
  params.forEach((param, i) => {
    const acc = b.input(accName(param.name), 'float32', param.shape!);
    b.output(b.add(acc, grads[i]!), `grad.${param.name}`);
  });
  return decoderGraphOf('train_step', b);
}
