// Public API of @flowgrpo/reward: reward functions over a trajectory's final answer (exact match,
// token F1, math equivalence, format, the GSM8K multi-dimension reward, an LLM judge), their
// weighted combination, and the answer normalisers they are built from.

export {
  type CombinedDetails,
  type CombineOptions,
  combineRewards,
  rewardMetrics,
  scoreAll,
  type WeightedReward,
} from './combine.js';
export { type ContainsDetails, containsReward } from './contains-fallback.js';
export {
  type ExactMatchDetails,
  type ExactMatchRewardOptions,
  exactMatch,
  exactMatchMax,
  exactMatchReward,
} from './exact-match.js';
export {
  checkFormat,
  type FormatCheck,
  type FormatPattern,
  type FormatRewardOptions,
  type FormatScan,
  type FormatStep,
  formatReward,
  SEARCH_AGENT,
  scanTags,
  type TagBlock,
  THINK_ANSWER,
  THINK_TOOL_CALL,
} from './format-reward.js';
export { type GoldSplitOptions, maxOverGolds, splitGoldAnswers } from './gold-answers.js';
export {
  type Gsm8kRewardDetails,
  type Gsm8kRewardOptions,
  gsm8kMultiDimensionReward,
  gsm8kMultiDimensionScore,
} from './gsm8k-reward.js';
export { buildJudgeMessages, JUDGE_PROMPT_VERSION } from './judge-prompt.js';
export {
  type JudgeDetails,
  type JudgeFallbackReason,
  type JudgeStats,
  LLMJudge,
  type LLMJudgeOptions,
  llmJudgeReward,
} from './llm-judge.js';
export { consoleRewardLogger, type RewardLogger } from './logger.js';
export {
  type MathComparison,
  type MathEqualOptions,
  type MathMatchMethod,
  type MathRewardDetails,
  type MathRewardOptions,
  mathEqual,
  mathEqualParsed,
  mathEquivalenceReward,
  numericValue,
  type ParsedMathAnswer,
  parseMathAnswer,
} from './math-equivalence.js';
export {
  type Expr,
  evaluateExpression,
  expressionVariables,
  parseExpression,
} from './math-expression.js';
export {
  type AnswerSource,
  extractMathAnswer,
  gsm8kFinal,
  lastBoxed,
  lastNumber,
  lastTagContent,
} from './math-extract.js';
export { type NormalizedAnswer, normalizeMathAnswer } from './math-normalize.js';
export {
  completionText,
  type RewardFunction,
  type RewardInput,
  type RewardResult,
  rewardInputFromTrajectory,
} from './reward-function.js';
export { squadNormalize } from './squad-normalize.js';
export {
  setTokenF1,
  setTokenF1Max,
  squadF1,
  squadF1Max,
  type TokenF1Details,
  type TokenF1RewardOptions,
  tokenF1Reward,
} from './token-f1.js';
export {
  type JudgeVerdict,
  JudgeVerdictSchema,
  VerdictCache,
  type VerdictCacheStats,
  type VerdictKeyParts,
  verdictKey,
} from './verdict-cache.js';
