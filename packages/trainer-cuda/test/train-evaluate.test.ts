// evaluate()'s building blocks: the Wilson interval (values computed by hand from the formula
// p̂ ± z·√(p̂(1−p̂)/n + z²/4n²), centred at (p̂ + z²/2n), all over 1 + z²/n, z = 1.959964) and what
// a trajectory did, for Flow rollouts (turns) and tag-agent rollouts (segments + metadata); and
// evaluate() itself with agents that fail and rewards that return no reward, and that the
// trajectories it keeps carry the reward it scored them with.
import type { RolloutAgent } from '@flowgrpo/agent';
import { FlowGrpoError, type SampleRow, type Trajectory } from '@flowgrpo/core';
import { exactMatchReward, type RewardFunction } from '@flowgrpo/reward';
import { describe, expect, it } from 'vitest';
import {
  formatCompliant,
  trajectoryCompletionLength,
  trajectoryToolCalls,
  trajectoryToolErrors,
  trajectoryTurns,
} from '../src/eval/evaluate.js';
import { comparisonTable, evaluate, RolloutsFailedError, wilsonInterval } from '../src/index.js';

describe('wilsonInterval', () => {
  it('matches the formula worked by hand', () => {
    // 7/10: centre (0.7 + 0.19208)/1.38415 = 0.64450, half-width 0.26556 → [0.3968, 0.8922].
    const [lo, hi] = wilsonInterval(7, 10);
    expect(lo).toBeCloseTo(0.3968, 3);
    expect(hi).toBeCloseTo(0.8922, 3);
    // 0/360: [0, z²/n / (1 + z²/n)] = [0, 0.01056].
    expect(wilsonInterval(0, 360)[0]).toBe(0);
    expect(wilsonInterval(0, 360)[1]).toBeCloseTo(0.01056, 4);
    expect(wilsonInterval(360, 360)[1]).toBe(1);
    expect(wilsonInterval(0, 0)).toEqual([0, 0]);
  });
});

const base = {
  queryId: 'q',
  groupId: 'g',
  finalAnswer: 'x',
  stopReason: 'answer',
  timings: {},
} as const;
const turn = (toolName?: string) => ({
  index: 0,
  promptTokens: new Int32Array(1),
  actionTokens: new Int32Array(1),
  actionLogprobs: new Float32Array(1),
  text: '',
  parsed: true,
  ...(toolName && { toolName }),
});

describe('what a trajectory did', () => {
  it('Flow rollouts: turns, tools per turn, tool failures from metadata.errors', () => {
    const t: Trajectory = {
      ...base,
      turns: [turn('almanac'), turn('calculator'), turn('None')],
      metadata: { errors: [{ role: 'tools' }, { role: 'executor' }] },
    };
    expect([trajectoryTurns(t), trajectoryToolCalls(t), trajectoryToolErrors(t)]).toEqual([
      3, 2, 1,
    ]);
  });

  it('tag-agent rollouts: the metadata the agent records', () => {
    const t: Trajectory = {
      ...base,
      segments: [{ tokens: new Int32Array(2), trainable: true, kind: 'action' }],
      metadata: { turns: 3, toolCalls: [{ ok: true }, { ok: false }, { ok: true }], errors: [] },
    };
    expect([trajectoryTurns(t), trajectoryToolCalls(t), trajectoryToolErrors(t)]).toEqual([
      3, 3, 1,
    ]);
  });

  it('recorded single-chain rollouts (the gateway): one turn per action segment', () => {
    // prompt, action (3 tokens), observation, action (2 tokens): 2 turns, 5 sampled tokens.
    const seg = (kind: 'prompt' | 'action' | 'observation', n: number) => ({
      tokens: new Int32Array(n),
      trainable: kind === 'action',
      kind,
    });
    const t: Trajectory = {
      ...base,
      segments: [seg('prompt', 7), seg('action', 3), seg('observation', 4), seg('action', 2)],
    };
    expect([trajectoryTurns(t), trajectoryCompletionLength(t)]).toEqual([2, 5]);
    const flow: Trajectory = { ...base, turns: [turn('almanac'), turn('None')] };
    expect(trajectoryCompletionLength(flow)).toBe(2);
  });

  it('format: every turn parsed and the run ended with an answer (or the verifier stopped it)', () => {
    const flow: Trajectory = { ...base, turns: [turn('almanac'), turn('None')] };
    expect(formatCompliant(flow)).toBe(true);
    expect(formatCompliant({ ...flow, stopReason: 'verifier_stop' })).toBe(true);
    // A turn that did not parse, however the run ended.
    expect(formatCompliant({ ...flow, turns: [{ ...turn('almanac'), parsed: false }] })).toBe(
      false,
    );
    // Cut off or failed: not well-formed, even when a final-answer step answered afterwards (an
    // untrained tag agent that never writes <answer> ends every rollout at max_turns).
    for (const stopReason of [
      'max_turns',
      'max_tokens',
      'parse_error',
      'timeout',
      'error',
    ] as const)
      expect(formatCompliant({ ...flow, stopReason }), stopReason).toBe(false);
  });

  it('comparisonTable lines the policies up', () => {
    const r = {
      n: 10,
      accuracy: 0.7,
      accuracy_ci95: wilsonInterval(7, 10),
      reward_mean: 0.7,
      format_compliance: 1,
      turns_mean: 2,
      tool_calls_per_trajectory: 1,
      tool_error_rate: 0,
      completion_length_mean: 50,
      time_s: 1,
      per_source: {},
    };
    const table = comparisonTable([
      { ...r, name: 'sft' },
      { ...r, name: 'grpo', accuracy: 0.9 },
    ]);
    expect(table.split('\n')).toHaveLength(4);
    expect(table).toMatch(/grpo\s+90\.0% \[39\.7, 89\.2\]/);
  });
});

describe('evaluate(): failed rollouts and faulty rewards', () => {
  class ToolServerDown extends FlowGrpoError {
    static override readonly code = 'TOOL_SERVER_DOWN';
  }
  // An agent that answers its question back, and fails on the questions it is told to.
  const agent = (fails: (q: string) => boolean): RolloutAgent => ({
    async run(question, context) {
      if (fails(question))
        throw new ToolServerDown(`no tool server for ${question}`, { hint: 'start it' });
      return {
        ...base,
        queryId: context?.queryId ?? 'q',
        question,
        groundTruth: context?.groundTruth ?? '',
        finalAnswer: question,
        turns: [turn()],
      };
    },
  });
  const dataset = ['a', 'b', 'c', 'd'].map((q, i) => ({
    id: i,
    question: q,
    result: q,
    source: 'test',
  })) as unknown as SampleRow[];
  const exact: RewardFunction<object> = {
    name: 'exact',
    score: (i) => ({ score: i.finalAnswer === i.groundTruth ? 1 : 0, details: {} }),
  };

  it('every rollout failing is RolloutsFailedError naming the code, the message and the fix', async () => {
    const error = await evaluate({ agent: agent(() => true), dataset, reward: exact }).catch(
      (e: unknown) => e,
    );
    expect(RolloutsFailedError.isInstance(error)).toBe(true);
    expect((error as Error).message).toContain('4/4 rollouts failed: TOOL_SERVER_DOWN');
    expect((error as Error).message).toContain('no tool server for a');
    expect((error as RolloutsFailedError).hint).toBe('start it');
  });

  it("a failure that knows no fix gets the evaluation's: where its errors are, not a Parquet it never wrote", async () => {
    const silent: RolloutAgent = {
      run: () => Promise.reject(new RangeError('the tool server is down')),
    };
    const error = await evaluate({ agent: silent, dataset, reward: exact }).catch(
      (e: unknown) => e,
    );
    expect(RolloutsFailedError.isInstance(error)).toBe(true);
    expect((error as RolloutsFailedError).hint).toContain('evaluate again');
    expect((error as RolloutsFailedError).hint).not.toContain('parquet');
  });

  it('some failing are counted by code; they count as wrong', async () => {
    const r = await evaluate({ agent: agent((q) => q === 'b'), dataset, reward: exact });
    expect(r.accuracy).toBe(0.75);
    expect(r.rollouts_failed).toBe(1);
    expect(r.rollouts_failed_by_code).toEqual({ TOOL_SERVER_DOWN: 1 });
  });

  it('a reward that returns no reward scores 0 and records why; {score} alone is a reward', async () => {
    const faulty: RewardFunction<object> = {
      name: 'faulty',
      score: (i) =>
        (i.finalAnswer === 'a'
          ? undefined
          : i.finalAnswer === 'b'
            ? { score: '1' }
            : { score: 1 }) as never,
    };
    const r = await evaluate({
      agent: agent(() => false),
      dataset,
      reward: faulty,
      keepTrajectories: true,
    });
    expect(r.accuracy).toBe(0.5);
    const errors = r.trajectories!.map(
      (t) => (t.metadata as { rewardError?: { code: string } } | undefined)?.rewardError?.code,
    );
    expect(errors).toEqual(['INVALID_REWARD', 'INVALID_REWARD', undefined, undefined]);
  });
});

const row = (id: number, question: string, result: string) => ({
  id,
  question,
  chain: '',
  result,
  source: 't',
  extra_info: { ground_truth: result, idx: id },
});

describe('evaluate', () => {
  it('keeps each trajectory with the reward it scored (report.html shows that reward)', async () => {
    // An agent that answers every question with its last word: right for one row, wrong for the
    // other, so a trajectory without its score (shown as "reward 0") cannot pass.
    const agent: RolloutAgent = {
      run: async (question, context) => ({
        queryId: context?.queryId ?? 'q',
        groupId: context?.groupId ?? 'g',
        question,
        ...(context?.groundTruth !== undefined && { groundTruth: context.groundTruth }),
        finalAnswer: question.split(' ').at(-1)!,
        stopReason: 'answer',
        timings: {},
      }),
    };
    const r = await evaluate({
      agent,
      dataset: [row(0, 'the storm of Daipair', 'Daipair'), row(1, 'the fair of Oskel', 'Mirow')],
      reward: exactMatchReward(),
      keepTrajectories: true,
    });
    expect(r.trajectories!.map((t) => [t.finalAnswer, t.reward])).toEqual([
      ['Daipair', 1],
      ['Oskel', 0],
    ]);
    expect(r.accuracy).toBe(0.5);
  });
});
