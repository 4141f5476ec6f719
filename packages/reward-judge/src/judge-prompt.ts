import type { ChatMessage } from '@flowgrpo/core';
import type { RewardInput } from './reward-function.js';

/** Part of every verdict's cache key: change it whenever the messages below change. */
export const JUDGE_PROMPT_VERSION = 'flowgrpo-judge-v1';

const SYSTEM = [
  'You grade answers for a training pipeline. You receive a question, one or more reference',
  'answers and a candidate answer, and decide whether the candidate gives the same final answer',
  'as a reference.',
  '',
  'Rules:',
  '- Grade only the final answer the candidate commits to, not its reasoning or style.',
  '- Several references separated by "; " or listed one per line are alternatives: matching any',
  '  one of them is enough.',
  '- Equivalent forms count as the same: 0.5 = 1/2 = 50%, "3 km" = "3", "Jan 1, 2000" =',
  '  "1 January 2000", "USA" = "United States", a name with or without a title or middle name.',
  '- A candidate that hedges between several different answers, is cut off, or answers a different',
  '  question is wrong. Extra correct detail around the right answer is fine.',
  '- Numbers must agree in value; rounding is acceptable only when the question or reference is',
  '  itself approximate.',
  '',
  'Reply with a JSON object with exactly two fields: "analysis", one or two sentences comparing',
  'the candidate with the reference, and "true_false", true when the candidate is correct and',
  'false otherwise.',
].join('\n');

function references(groundTruth: RewardInput['groundTruth']): string {
  return typeof groundTruth === 'string' ? groundTruth : groundTruth.join('\n');
}

/** The judge's chat messages for one answer. */
export function buildJudgeMessages(input: RewardInput): ChatMessage[] {
  const user = [
    `Question:\n${input.question}`,
    `Reference answer(s):\n${references(input.groundTruth)}`,
    `Candidate answer:\n${input.finalAnswer}`,
  ].join('\n\n');
  return [
    { role: 'system', content: SYSTEM },
    { role: 'user', content: user },
  ];
}
