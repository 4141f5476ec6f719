import { type GoldSplitOptions, maxOverGolds, splitGoldAnswers } from './gold-answers.js';
import type { RewardFunction, RewardInput, RewardResult } from './reward-function.js';
import { squadNormalize } from './squad-normalize.js';

/** SQuAD v1.1 exact match of one prediction against one gold: 1 or 0. */
export function exactMatch(prediction: string, gold: string): number {
  return squadNormalize(prediction) === squadNormalize(gold) ? 1 : 0;
}

/** Exact match maximised over the golds (the script's `metric_max_over_ground_truths`). */
export function exactMatchMax(prediction: string, golds: readonly string[]): number {
  return maxOverGolds(golds, (g) => exactMatch(prediction, g)).score;
}

export interface ExactMatchDetails {
  normalizedAnswer: string;
  golds: string[];
  /** Index in `golds` of the matching gold, -1 when none matched. */
  matchedGold: number;
}

export interface ExactMatchRewardOptions extends GoldSplitOptions {
  name?: string;
}

/** Reward 1 when the final answer equals any gold after SQuAD normalisation. */
export function exactMatchReward(
  options: ExactMatchRewardOptions = {},
): RewardFunction<ExactMatchDetails> {
  return {
    name: options.name ?? 'exact_match',
    score(input: RewardInput): RewardResult<ExactMatchDetails> {
      const golds = splitGoldAnswers(input.groundTruth, options);
      const { score, goldIndex } = maxOverGolds(golds, (g) => exactMatch(input.finalAnswer, g));
      return {
        score,
        details: {
          normalizedAnswer: squadNormalize(input.finalAnswer),
          golds,
          matchedGold: score > 0 ? goldIndex : -1,
        },
      };
    },
  };
}
