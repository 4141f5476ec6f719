// Public API of @flowgrpo/grpo: pure functions over typed arrays for GRPO training — group
// advantages, the PPO-clip policy loss, KL estimators, token-loss aggregation, the Flow-GRPO
// broadcast of a trajectory's advantage to its turns, group filters and training metrics.

export {
  type AdvantageOptions,
  type AdvantageScale,
  computeAdvantages,
} from './advantages.js';
export {
  type AggregationOptions,
  aggregateTokens,
  LOSS_AGGREGATIONS,
  type LossAggregation,
  tokenWeights,
} from './aggregation.js';
export type { FloatArray, IndexArray, MaskArray } from './arrays.js';
export { broadcastAdvantages, broadcastToTurns } from './broadcast.js';
export { GrpoInputError } from './errors.js';
export {
  filterZeroVarianceGroups,
  type GroupFilterResult,
  maskTruncated,
  type OverlongPenaltyOptions,
  overlongPenalties,
  overlongPenalty,
  truncatedSequences,
} from './filters.js';
export { type GroupStats, type Groups, groupStats, unbiasedStd } from './groups.js';
export {
  type GrpoLossInput,
  type GrpoLossOptions,
  type GrpoLossResult,
  grpoLoss,
} from './grpo-loss.js';
export { type KlEstimator, klEstimate } from './kl.js';
export { type GrpoMetricsInput, grpoMetrics } from './metrics.js';
export {
  type PackedTokens,
  type PackedTokensInfo,
  sequenceLengths,
  validatePackedTokens,
} from './packed-tokens.js';
export {
  type ClipOptions,
  clampLogRatio,
  LOG_RATIO_CLAMP,
  policyRatio,
  type TokenPolicyLoss,
  tokenPolicyLoss,
} from './policy-loss.js';
