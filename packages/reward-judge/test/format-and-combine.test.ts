import { ConfigError, TrajectorySchema } from '@flowgrpo/core';
import { describe, expect, it } from 'vitest';
import {
  checkFormat,
  combineRewards,
  exactMatchReward,
  formatReward,
  rewardInputFromTrajectory,
  rewardMetrics,
  SEARCH_AGENT,
  scoreAll,
  THINK_ANSWER,
  THINK_TOOL_CALL,
  tokenF1Reward,
} from '../src/index.js';

const input = (completion: string) => ({
  question: 'q',
  groundTruth: 'g',
  finalAnswer: 'g',
  completion,
});

describe('format rewards (expected verdicts read off the tag order by hand)', () => {
  it('<think> then <answer>', async () => {
    const fmt = formatReward();
    expect((await fmt.score(input('<think>plan</think>\n<answer>42</answer>'))).score).toBe(1);
    expect(
      (await fmt.score(input('intro <think>plan</think> <answer>42</answer> bye'))).score,
    ).toBe(1);
    const reversed = await fmt.score(input('<answer>42</answer><think>plan</think>'));
    expect(reversed.score).toBe(0);
    expect(reversed.details.errors[0]).toMatch(/out of order/);
    const missing = await fmt.score(input('<think>plan</think> 42'));
    expect(missing.details.missing).toEqual(['answer']);
    expect(
      (await fmt.score(input('<think>a</think><answer>1</answer><answer>2</answer>'))).score,
    ).toBe(0);
  });

  it('ill-formed tags: nested, unclosed, stray, empty', () => {
    expect(checkFormat('<think><answer>1</answer></think>', THINK_ANSWER).ok).toBe(false);
    expect(checkFormat('<think>a<answer>1</answer>', THINK_ANSWER).errors).toContain(
      '<answer> inside <think> at 8',
    );
    expect(checkFormat('</think><think>a</think><answer>1</answer>', THINK_ANSWER).errors).toEqual([
      'stray </think> at 0',
    ]);
    expect(checkFormat('<think> </think><answer>1</answer>', THINK_ANSWER).errors).toEqual([
      'empty <think>',
    ]);
    expect(
      checkFormat('<think> </think><answer>1</answer>', THINK_ANSWER, { nonEmpty: false }).ok,
    ).toBe(true);
  });

  it('strict mode rejects text outside the blocks', () => {
    expect(
      checkFormat('x <think>a</think><answer>1</answer>', THINK_ANSWER, { strict: true }).ok,
    ).toBe(false);
    expect(
      checkFormat(' <think>a</think>\n<answer>1</answer>\n', THINK_ANSWER, { strict: true }).ok,
    ).toBe(true);
  });

  it('tool-call and search-agent patterns', () => {
    const calls =
      '<think>a</think><tool_call>{"name":"x"}</tool_call><tool_call>{"name":"y"}</tool_call>';
    expect(checkFormat(calls, THINK_TOOL_CALL).ok).toBe(true);
    expect(checkFormat('<think>a</think>', THINK_TOOL_CALL).ok).toBe(false);
    const search = '<think>a</think><search>q1</search><search>q2</search><answer>Paris</answer>';
    expect(checkFormat(search, SEARCH_AGENT).ok).toBe(true);
    expect(checkFormat('<answer>Paris</answer>', SEARCH_AGENT).ok).toBe(true);
    expect(
      checkFormat('<search>q</search><think>a</think><answer>P</answer>', SEARCH_AGENT).ok,
    ).toBe(false);
  });

  it('custom scores and bad patterns', async () => {
    const fmt = formatReward({ failScore: -1, name: 'fmt' });
    expect(fmt.name).toBe('fmt');
    expect((await fmt.score(input('nothing'))).score).toBe(-1);
    expect(() => formatReward({ pattern: [] })).toThrow(ConfigError);
    expect(() => formatReward({ pattern: [{ tag: 'a b' }] })).toThrow(ConfigError);
    expect(() => formatReward({ pattern: [{ tag: 'a', min: 2, max: 1 }] })).toThrow(ConfigError);
    expect(() => formatReward({ pattern: [{ tag: 'a' }, { tag: 'a' }] })).toThrow(ConfigError);
  });
});

describe('weighted combination', () => {
  it('sums weight × score and reports each component by name', async () => {
    const combined = combineRewards([
      { fn: exactMatchReward(), weight: 0.5 },
      { fn: tokenF1Reward(), weight: 0.3 },
      { fn: formatReward(), weight: 0.2 },
    ]);
    const r = await combined.score({
      question: 'where was it filmed',
      groundTruth: ['Vancouver', 'Mission, British Columbia'],
      finalAnswer: 'Vancouver, BC',
      completion: '<think>film</think><answer>Vancouver, BC</answer>',
    });
    // EM 0; F1 vs "Vancouver": [vancouver, bc] vs [vancouver] → P 1/2, R 1 → 2/3; format 1.
    expect(r.details.scores).toEqual({ exact_match: 0, f1: expect.closeTo(2 / 3, 15), format: 1 });
    expect(r.details.weights).toEqual({ exact_match: 0.5, f1: 0.3, format: 0.2 });
    expect(r.score).toBeCloseTo(0.3 * (2 / 3) + 0.2, 15);
    const norm = combineRewards(
      [
        { fn: exactMatchReward(), weight: 2 },
        { fn: formatReward(), weight: 2 },
      ],
      {
        normalize: true,
      },
    );
    const n = await norm.score({
      question: 'q',
      groundTruth: 'x',
      finalAnswer: 'x',
      completion: 'no tags',
    });
    expect(n.score).toBe(0.5); // (2·1 + 2·0) / 4
  });

  it('batch metrics per component: rewards/<name>/mean and unbiased std', async () => {
    const combined = combineRewards([
      { fn: exactMatchReward(), weight: 1 },
      { fn: formatReward(), weight: 1 },
    ]);
    const rs = await scoreAll(combined, [
      {
        question: 'q',
        groundTruth: 'a',
        finalAnswer: 'a',
        completion: '<think>t</think><answer>a</answer>',
      },
      {
        question: 'q',
        groundTruth: 'a',
        finalAnswer: 'b',
        completion: '<think>t</think><answer>b</answer>',
      },
      { question: 'q', groundTruth: 'a', finalAnswer: 'a', completion: 'a' },
    ]);
    // exact_match [1, 0, 1]: mean 2/3, sample var ((1/3)²·2 + (2/3)²)/2 = 1/3 → std √(1/3).
    // format [1, 1, 0]: the same numbers.
    const m = rewardMetrics(rs);
    expect(m['rewards/exact_match/mean']).toBeCloseTo(2 / 3, 15);
    expect(m['rewards/exact_match/std']).toBeCloseTo(Math.sqrt(1 / 3), 15);
    expect(m['rewards/format/mean']).toBeCloseTo(2 / 3, 15);
    expect(Object.keys(m).sort()).toEqual([
      'rewards/exact_match/mean',
      'rewards/exact_match/std',
      'rewards/format/mean',
      'rewards/format/std',
    ]);
    expect(rewardMetrics([{ score: 0.5, details: {} }], 'judge')).toEqual({
      'rewards/judge/mean': 0.5,
      'rewards/judge/std': 0,
    });
  });

  it('rejects duplicate names, no components and non-finite weights', () => {
    expect(() => combineRewards([])).toThrow(ConfigError);
    expect(() =>
      combineRewards([
        { fn: exactMatchReward(), weight: 1 },
        { fn: exactMatchReward(), weight: 1 },
      ]),
    ).toThrow(/appears twice/);
    expect(() => combineRewards([{ fn: exactMatchReward(), weight: Number.NaN }])).toThrow(
      ConfigError,
    );
  });
});

describe('reward input from a trajectory', () => {
  it('takes question, gold and answer from the trajectory and joins turn texts', () => {
    const trajectory = TrajectorySchema.parse({
      queryId: 'q1',
      groupId: 'g1',
      question: 'Capital of France?',
      groundTruth: 'Paris',
      finalAnswer: 'Paris',
      stopReason: 'answer',
      turns: [
        {
          index: 0,
          promptTokens: [1],
          actionTokens: [2],
          actionLogprobs: [-0.1],
          text: '<think>a</think>',
        },
        {
          index: 1,
          promptTokens: [1],
          actionTokens: [3],
          actionLogprobs: [-0.2],
          text: '<answer>Paris</answer>',
        },
      ],
    });
    const input = rewardInputFromTrajectory(trajectory);
    expect(input).toMatchObject({
      question: 'Capital of France?',
      groundTruth: 'Paris',
      finalAnswer: 'Paris',
    });
    expect(input.completion).toBe('<think>a</think>\n<answer>Paris</answer>');
    expect(checkFormat(input.completion!, THINK_ANSWER).ok).toBe(true);
    const noGold = TrajectorySchema.parse({
      queryId: 'q2',
      groupId: 'g',
      finalAnswer: 'x',
      stopReason: 'answer',
      question: 'q',
    });
    expect(() => rewardInputFromTrajectory(noGold)).toThrow(/groundTruth/);
    expect(rewardInputFromTrajectory(noGold, { groundTruth: ['x', 'y'] }).groundTruth).toEqual([
      'x',
      'y',
    ]);
  });
});
