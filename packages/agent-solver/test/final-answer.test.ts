import { exactMatchReward } from '@flowgrpo/reward';
import { describe, expect, it } from 'vitest';
import { type FinalAnswerSource, parseFinalAnswer } from '../src/index.js';
import { cleanAnswer } from '../src/solver/final-answer.js';

// The rules of parseFinalAnswer (src/solver/final-answer.ts), one row each: the generator's text,
// the answer a person reads out of it, and the rule that must find it. Expected answers are
// written by hand from the texts.

const table: [text: string, answer: string, source: FinalAnswerSource][] = [
  // 1. The "Answer:" line the generator prompt asks for, in the forms models write it.
  ['Process: 12 × 12.\nAnswer: 144', '144', 'answer-line'],
  ['12 squared.\n**Answer:** 144', '144', 'answer-line'],
  ['**Answer**: 144', '144', 'answer-line'],
  ['## Final Answer: 144', '144', 'answer-line'],
  ['- answer: 144.', '144', 'answer-line'],
  ['> **Final answer:** **144**.', '144', 'answer-line'],
  ['Answer：144', '144', 'answer-line'],
  ['ANSWER: 144', '144', 'answer-line'],
  ['The answer: 144', '144', 'answer-line'],
  ['Answer: $\\boxed{144}$', '144', 'answer-line'],
  ['Answer: The answer is 144.', '144', 'answer-line'],
  ['Answer: `144`', '144', 'answer-line'],
  ['Answer: "Paris"', 'Paris', 'answer-line'],
  ['Answer: Washington, D.C.', 'Washington, D.C.', 'answer-line'],
  ['Answer: 3.50', '3.50', 'answer-line'],
  ['Answer: 1,234', '1,234', 'answer-line'],
  // The label alone on its line: the answer is what follows.
  ['Reasoning…\n**Final Answer:**\n\n144\n', '144', 'answer-line'],
  // The last label wins over an earlier one and over trailing remarks.
  ['Answer: first guess 12\nRechecking.\nAnswer: 144\nHope this helps!', '144', 'answer-line'],
  // A label wins over a boxed value elsewhere.
  ['So \\boxed{12}?\nAnswer: 144', '144', 'answer-line'],
  // 2. An <answer> block.
  ['<answer> 144 </answer>', '144', 'answer-tag'],
  ['<answer>\\boxed{144}</answer>', '144', 'answer-tag'],
  // 3. "the answer is …" anywhere on a line (the last such line).
  ['The answer is 144.', '144', 'answer-is'],
  ['12 × 12 = 144, so the final answer is **144**.', '144', 'answer-is'],
  ['Therefore, the answer is: $\\boxed{144}$.', '144', 'answer-is'],
  ['My answer is 12.\nOn reflection, the correct answer is 144!', '144', 'answer-is'],
  // 4. A \boxed value, 5. GSM8K's "####".
  ['12^2 = \\boxed{144}', '144', 'boxed'],
  ['She pays 12 × 12 = 144.\n#### 144', '144', 'gsm8k'],
  // 6. Nothing marks the answer: the whole reply (cleaned).
  ['144', '144', 'whole'],
  ['**144**.', '144', 'whole'],
  ['A: 144', 'A: 144', 'whole'],
  ['', '', 'whole'],
  // Reasoning blocks are dropped first, closed or with the opening tag stripped by the server.
  ['<think>Answer: 12? No.</think>\nAnswer: 144', '144', 'answer-line'],
  ['Answer: 12? No.</think>The answer is 144.', '144', 'answer-is'],
];

describe('parseFinalAnswer', () => {
  it.each(table)('%j → %j (%s)', (text, answer, source) => {
    expect(parseFinalAnswer(text)).toEqual({ answer, source });
  });

  it('exact match of every parsed "144" against the gold "144" is 1', async () => {
    const reward = exactMatchReward();
    const rows = table.filter(([, answer]) => answer === '144');
    expect(rows.length).toBeGreaterThan(20);
    for (const [text] of rows) {
      const { score } = await reward.score({
        question: 'What is 12 squared?',
        groundTruth: '144',
        finalAnswer: parseFinalAnswer(text).answer,
      });
      expect({ text, score }).toEqual({ text, score: 1 });
    }
  });

  it('cleanAnswer leaves what is not a wrapper alone', () => {
    expect(cleanAnswer('$5')).toBe('$5');
    expect(cleanAnswer('2*3*4')).toBe('2*3*4');
    expect(cleanAnswer('U.S.A.')).toBe('U.S.A.');
    expect(cleanAnswer('x = 5 (approx.)')).toBe('x = 5 (approx.)');
    expect(cleanAnswer('\\text{Paris}')).toBe('Paris');
    expect(cleanAnswer('\\(\\frac{1}{2}\\)')).toBe('\\frac{1}{2}');
  });
});
