import { checkLength, checkOption, type FloatArray } from './arrays.js';
import { GrpoInputError } from './errors.js';
import { type PackedTokens, type PackedTokensInfo, validatePackedTokens } from './packed-tokens.js';

/**
 * How per-token losses ℓ_i over the masked tokens become one number:
 * - `token-mean`: Σ ℓ / (number of masked tokens) — DAPO, TRL `loss_type="dapo"`.
 * - `seq-mean-token-mean`: mean over sequences of each sequence's token mean — original GRPO.
 * - `seq-mean-token-sum`: mean over sequences of each sequence's token sum.
 * - `seq-sum-norm`: Σ ℓ / (normSeqs × maxLen) — Dr.GRPO.
 * - `flow`: mean over trajectories of (mean over its turns of (mean over the turn's tokens)) —
 *   the AgentFlow / Flow-GRPO objective; needs `turnIndex`.
 *
 * Sequences (and, for `flow`, turns) without any masked token are left out of every mean and
 * count — they carry no loss, and counting them would only shrink the others' weight. When no
 * token at all is masked the loss is 0.
 */
export type LossAggregation =
  | 'token-mean'
  | 'seq-mean-token-mean'
  | 'seq-mean-token-sum'
  | 'seq-sum-norm'
  | 'flow';

export const LOSS_AGGREGATIONS: readonly LossAggregation[] = [
  'token-mean',
  'seq-mean-token-mean',
  'seq-mean-token-sum',
  'seq-sum-norm',
  'flow',
];

export interface AggregationOptions {
  /**
   * `seq-sum-norm` only: the length normaliser (Dr.GRPO's generation budget, TRL's
   * `max_completion_length`). Default: the longest sequence's token count — all tokens carrying
   * that seqIndex, masked or not.
   */
  maxLen?: number;
  /**
   * `seq-sum-norm` only: the sequence-count normaliser. Default: the number of sequences with at
   * least one masked token.
   */
  normSeqs?: number;
}

function checkAggregation(agg: LossAggregation): void {
  if (!LOSS_AGGREGATIONS.includes(agg)) {
    throw new GrpoInputError(`${String(agg)} is not one of ${LOSS_AGGREGATIONS.join(', ')}`, {
      field: 'aggregation',
    });
  }
}

function seqSumNormDenominator(info: PackedTokensInfo, options: AggregationOptions): number {
  let maxLen = options.maxLen;
  if (maxLen === undefined) {
    maxLen = 0;
    for (let s = 0; s < info.numSeqs; s++)
      if (info.seqTokens[s] > maxLen) maxLen = info.seqTokens[s];
  } else checkOption('maxLen', maxLen, maxLen > 0 && Number.isFinite(maxLen), 'a positive length');
  const normSeqs = options.normSeqs ?? info.numActiveSeqs;
  checkOption('normSeqs', normSeqs, normSeqs >= 0 && Number.isFinite(normSeqs), 'a count');
  return normSeqs * maxLen;
}

/** Turn slots: masked-token count and dense turn number of each token (for `flow`). */
function turnTable(layout: PackedTokens, info: PackedTokensInfo) {
  const turnIndex = layout.turnIndex!;
  const { mask, seqIndex } = layout;
  const slot = new Int32Array(info.numTokens).fill(-1);
  const key = new Map<number, number>();
  const turnMasked: number[] = [];
  const turnSeq: number[] = [];
  let maxTurn = 0;
  for (let i = 0; i < info.numTokens; i++) if (turnIndex[i] > maxTurn) maxTurn = turnIndex[i];
  for (let i = 0; i < info.numTokens; i++) {
    if (mask[i] !== 1) continue;
    const k = seqIndex[i] * (maxTurn + 1) + turnIndex[i];
    let t = key.get(k);
    if (t === undefined) {
      t = turnMasked.length;
      key.set(k, t);
      turnMasked.push(0);
      turnSeq.push(seqIndex[i]);
    }
    turnMasked[t]++;
    slot[i] = t;
  }
  // Turns with masked tokens, per sequence.
  const seqTurns = new Int32Array(info.numSeqs);
  for (const s of turnSeq) seqTurns[s]++;
  return { slot, turnMasked, turnSeq, seqTurns };
}

/**
 * Aggregates per-token values over the masked tokens of a layout (see `LossAggregation`), in
 * float64, by the nested means' own definitions. Unmasked tokens are never read, so they may
 * hold anything (NaN included).
 */
export function aggregateTokens(
  values: FloatArray,
  layout: PackedTokens,
  aggregation: LossAggregation,
  options: AggregationOptions = {},
): number {
  checkAggregation(aggregation);
  const info = validatePackedTokens(layout, { requireTurns: aggregation === 'flow' });
  checkLength('values', values, info.numTokens);
  const { mask, seqIndex } = layout;
  if (info.numMasked === 0) return 0;
  if (aggregation === 'token-mean' || aggregation === 'seq-sum-norm') {
    let sum = 0;
    for (let i = 0; i < info.numTokens; i++) if (mask[i] === 1) sum += values[i];
    if (aggregation === 'token-mean') return sum / info.numMasked;
    const denom = seqSumNormDenominator(info, options);
    return denom === 0 ? 0 : sum / denom;
  }
  if (aggregation === 'flow') {
    const { slot, turnMasked, turnSeq, seqTurns } = turnTable(layout, info);
    const turnSum = new Float64Array(turnMasked.length);
    for (let i = 0; i < info.numTokens; i++) if (slot[i] >= 0) turnSum[slot[i]] += values[i];
    const seqSum = new Float64Array(info.numSeqs);
    for (let t = 0; t < turnMasked.length; t++) seqSum[turnSeq[t]] += turnSum[t] / turnMasked[t];
    let total = 0;
    for (let s = 0; s < info.numSeqs; s++) if (seqTurns[s] > 0) total += seqSum[s] / seqTurns[s];
    return total / info.numActiveSeqs;
  }
  const seqSum = new Float64Array(info.numSeqs);
  for (let i = 0; i < info.numTokens; i++) if (mask[i] === 1) seqSum[seqIndex[i]] += values[i];
  let total = 0;
  for (let s = 0; s < info.numSeqs; s++) {
    if (info.seqMasked[s] === 0) continue;
    total += aggregation === 'seq-mean-token-mean' ? seqSum[s] / info.seqMasked[s] : seqSum[s];
  }
  return total / info.numActiveSeqs;
}

/**
 * Each token's weight w_i = ∂loss/∂ℓ_i, so that `aggregateTokens(ℓ) = Σ w_i·ℓ_i` for every
 * aggregation (w_i = 0 for unmasked tokens). The trainer feeds these to its loss graph as
 * constants, which makes every aggregation one weighted sum:
 * token-mean 1/M; seq-mean-token-mean 1/(S·m_s); seq-mean-token-sum 1/S;
 * seq-sum-norm 1/(normSeqs·maxLen); flow 1/(S·T_s·m_{s,t}) — M masked tokens, S sequences with
 * masked tokens, m_s / m_{s,t} masked tokens of sequence s / of its turn t, T_s turns of s with
 * masked tokens.
 */
export function tokenWeights(
  layout: PackedTokens,
  aggregation: LossAggregation,
  options: AggregationOptions = {},
): Float64Array {
  checkAggregation(aggregation);
  const info = validatePackedTokens(layout, { requireTurns: aggregation === 'flow' });
  return weightsFor(layout, info, aggregation, options);
}

/** `tokenWeights` on a layout already validated (with turns, for `flow`). */
export function weightsFor(
  layout: PackedTokens,
  info: PackedTokensInfo,
  aggregation: LossAggregation,
  options: AggregationOptions,
): Float64Array {
  checkAggregation(aggregation);
  const { mask, seqIndex } = layout;
  const w = new Float64Array(info.numTokens);
  if (info.numMasked === 0) return w;
  const S = info.numActiveSeqs;
  if (aggregation === 'flow') {
    const { slot, turnMasked, turnSeq, seqTurns } = turnTable(layout, info);
    for (let i = 0; i < info.numTokens; i++) {
      const t = slot[i];
      if (t >= 0) w[i] = 1 / (S * seqTurns[turnSeq[t]] * turnMasked[t]);
    }
    return w;
  }
  let constant = 0;
  if (aggregation === 'token-mean') constant = 1 / info.numMasked;
  else if (aggregation === 'seq-mean-token-sum') constant = 1 / S;
  else if (aggregation === 'seq-sum-norm') {
    const denom = seqSumNormDenominator(info, options);
    constant = denom === 0 ? 0 : 1 / denom;
  }
  for (let i = 0; i < info.numTokens; i++) {
    if (mask[i] !== 1) continue;
    w[i] = aggregation === 'seq-mean-token-mean' ? 1 / (S * info.seqMasked[seqIndex[i]]) : constant;
  }
  return w;
}
