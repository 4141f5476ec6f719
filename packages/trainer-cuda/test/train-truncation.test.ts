// mask_truncated_completions (src/update/truncation.ts): which parts of a rollout a length cut
// removes from the loss, for both ways a rollout records itself. Expected values by hand: a limit
// of 4 tokens; a turn or generation of 4 tokens used all of them.
import type { TokenSegment, Trajectory, Turn } from '@flowgrpo/core';
import { describe, expect, it } from 'vitest';
import { rowsFromTrajectories } from '../src/update/collate.js';
import { withoutTruncated } from '../src/update/truncation.js';

const ids = (n: number) => Int32Array.from({ length: n }, (_, i) => 10 + i);
const turn = (index: number, actions: number): Turn => ({
  index,
  promptTokens: ids(3),
  actionTokens: ids(actions),
  actionLogprobs: new Float32Array(actions).fill(-1),
  text: '',
  parsed: true,
});
const action = (n: number): TokenSegment => ({
  tokens: ids(n),
  logprobs: new Float32Array(n).fill(-1),
  trainable: true,
  kind: 'action',
});
const observation = (n: number): TokenSegment => ({
  tokens: ids(n),
  trainable: false,
  kind: 'observation',
});
const base = {
  queryId: 'q',
  groupId: 'g',
  finalAnswer: '',
  stopReason: 'answer',
  timings: {},
} as const;

describe('withoutTruncated (mask_truncated_completions)', () => {
  it('policy turns: only the turns that used the whole limit go', () => {
    const t: Trajectory = { ...base, turns: [turn(0, 2), turn(1, 4), turn(2, 3)] };
    const kept = withoutTruncated(t, 4);
    expect(kept.turns!.map((u) => u.index)).toEqual([0, 2]);
    // Rows carry the kept turns' actions only (2 and 3 trainable tokens).
    const trained = rowsFromTrajectories([kept], [1]).map((r) => r.mask.reduce((a, b) => a + b, 0));
    expect(trained).toEqual([2, 3]);
    expect(t.turns).toHaveLength(3); // the recorded trajectory is left as it was
  });

  it('segments: the last generation cut off, or the token budget spent, drops the whole completion', () => {
    const whole: Trajectory = { ...base, segments: [action(3), observation(5), action(2)] };
    expect(withoutTruncated(whole, 4)).toBe(whole);
    expect(rowsFromTrajectories([whole], [1])).toHaveLength(1);
    // A generation cut earlier, after which the agent went on: the completion still ended.
    const wentOn: Trajectory = { ...base, segments: [action(4), observation(5), action(2)] };
    expect(withoutTruncated(wentOn, 4)).toBe(wentOn);

    const cut: Trajectory = { ...base, segments: [action(3), observation(5), action(4)] };
    const budget: Trajectory = {
      ...base,
      stopReason: 'max_tokens',
      segments: [action(3), observation(5), action(2)],
    };
    for (const t of [cut, budget]) {
      const kept = withoutTruncated(t, 4);
      expect(kept.segments!.some((s) => s.trainable)).toBe(false);
      expect(rowsFromTrajectories([kept], [1])).toHaveLength(0);
      expect(t.segments!.filter((s) => s.trainable)).toHaveLength(2);
    }
  });
});
