// Snippets of docs/guides/reward.md (compiled by the test command).
import {
  combineRewards,
  exactMatchReward,
  gsm8kMultiDimensionReward,
  mathEquivalenceReward,
  type RewardFunction,
  tokenF1Reward,
} from '@flowgrpo/reward';

export async function scoreOne(): Promise<number> {
  // #region score
  const f1 = tokenF1Reward(); // SQuAD F1, max over the golds ("a; b" or a list)
  const r = await f1.score({
    question: 'Who wrote Hamlet?',
    groundTruth: ['William Shakespeare', 'Shakespeare'],
    finalAnswer: 'shakespeare',
  });
  console.log(r.score, r.details.bestGold); // 1, 1
  // #endregion score
  return r.score;
}

export function combined(): RewardFunction<object> {
  // #region combine
  // A weighted sum, logged per component as rewards/<name>/mean by the trainer.
  return combineRewards([
    { fn: mathEquivalenceReward() as RewardFunction<object>, weight: 0.8 },
    { fn: exactMatchReward() as RewardFunction<object>, weight: 0.2 },
  ]);
  // #endregion combine
}

export const gsm8k = gsm8kMultiDimensionReward();
