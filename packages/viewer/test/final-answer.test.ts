// The final answer as the viewer and report.html show it. The recorded answers below are real:
// they are what the tag agent recorded in rollouts/step-000010.parquet of the math-tags template's
// GRPO run (`flowgrpo init`, SFT 80 steps, GRPO 10 steps), where the tiny policy opened <answer>
// twice or misspelt its closer.
import { describe, expect, it } from 'vitest';
import { displayAnswer } from '../src/final-answer.js';

describe('the final answer as shown', () => {
  it('takes tag fragments out and keeps the recorded text beside it', () => {
    expect(displayAnswer('<answer>359')).toEqual({ answer: '359', recorded: '<answer>359' });
    expect(displayAnswer('3<answer>')).toEqual({ answer: '3', recorded: '3<answer>' });
    expect(displayAnswer('48<answer>')).toEqual({ answer: '48', recorded: '48<answer>' });
    expect(displayAnswer('</nswer>')).toEqual({ answer: '', recorded: '</nswer>' });
  });

  it('leaves an answer without tags as it is', () => {
    expect(displayAnswer('15')).toEqual({ answer: '15' });
    expect(displayAnswer('')).toEqual({ answer: '' });
    // Comparisons and angle brackets that are no tag stay.
    expect(displayAnswer('x < y and y > 2')).toEqual({ answer: 'x < y and y > 2' });
    expect(displayAnswer('the Long Storm of Daipair')).toEqual({
      answer: 'the Long Storm of Daipair',
    });
  });
});
