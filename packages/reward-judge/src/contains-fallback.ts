import { type GoldSplitOptions, splitGoldAnswers } from './gold-answers.js';
import type { RewardFunction, RewardInput, RewardResult } from './reward-function.js';

export interface ContainsDetails {
  golds: string[];
  /** Index of the first gold found in the answer, -1 when none. */
  matchedGold: number;
}

/**
 * The seeds' judge fallback: 1 when the ground truth, lower-cased, occurs inside the lower-cased
 * final answer. Two deliberate differences: each `'; '`-separated alternative is tried on its own
 * (the joined string would almost never occur verbatim), and an empty gold scores 0 (Python's
 * `'' in s` is always true, which would reward anything).
 */
export function containsReward(
  options: GoldSplitOptions & { name?: string } = {},
): RewardFunction<ContainsDetails> {
  return {
    name: options.name ?? 'contains',
    score(input: RewardInput): RewardResult<ContainsDetails> {
      const golds = splitGoldAnswers(input.groundTruth, options);
      const answer = input.finalAnswer.toLowerCase();
      const matchedGold = golds.findIndex((g) => g !== '' && answer.includes(g.toLowerCase()));
      return { score: matchedGold >= 0 ? 1 : 0, details: { golds, matchedGold } };
    },
  };
}
