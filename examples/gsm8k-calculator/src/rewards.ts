// The chapter's multi-dimension reward (accuracy 0.5, format 0.2, reasoning 0.2, conciseness
// 0.1; @flowgrpo/reward reproduces it term for term) over what the agent wrote after the prompt,
// and its accuracy dimension alone as a 0/1 reward for the evaluation table.
import {
  completionText,
  type Gsm8kRewardDetails,
  gsm8kMultiDimensionScore,
  type RewardFunction,
  type RewardInput,
} from '@flowgrpo/reward';

/** The agent's transcript (its turns and the tool's response), recorded in the trajectory. */
export function agentTranscript(input: RewardInput): string {
  const recorded = input.trajectory?.metadata?.completion;
  return typeof recorded === 'string' ? recorded : completionText(input);
}

export const multiDimensionReward: RewardFunction<Gsm8kRewardDetails> = {
  name: 'gsm8k_multi',
  score: (input) => gsm8kMultiDimensionScore(agentTranscript(input), input.groundTruth),
};

/** 1 when the last number is within 1% of the answer (the chapter's accuracy), else 0. */
export const accuracyReward: RewardFunction<Gsm8kRewardDetails> = {
  name: 'accuracy',
  score(input) {
    const r = gsm8kMultiDimensionScore(agentTranscript(input), input.groundTruth);
    return { score: r.details.accuracy > 0 ? 1 : 0, details: r.details };
  },
};

/** The chapter's format compliance: both think tags present. */
export function hasThinkTags(transcript: string): boolean {
  return transcript.includes('<think>') && transcript.includes('</think>');
}
