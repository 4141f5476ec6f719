// The shop's reward: exact match on the answer (weight 1) plus a small shaped term for tool calls
// the shop understood (weight 0.2 × the share of the two calls a price question needs that came
// back without error). The seed scores trajectories with an LLM judge; here the answer is a
// number, so exact match is the judge. The shaped term is what gives a freshly warm-started tiny
// model reward variance from the first step: it misspells goods ("kime" for "kiwi") long before
// it gets whole chains right, and a group whose rewards are all equal has no gradient.
import { combineRewards, exactMatchReward, type RewardFunction } from '@flowgrpo/reward';

export const TOOL_OK_WEIGHT = 0.2;

/** The share of the (at most 2) tool calls that succeeded: 0, 0.5 or 1. */
export const toolOkReward: RewardFunction<{ ok: number; calls: number }> = {
  name: 'tool_ok',
  score({ trajectory }) {
    const calls = (trajectory?.metadata?.toolCalls ?? []) as { ok: boolean }[];
    const ok = calls.filter((c) => c.ok).length;
    return { score: Math.min(ok, 2) / 2, details: { ok, calls: calls.length } };
  },
};

export function shopReward(): RewardFunction<object> {
  return combineRewards([
    { fn: exactMatchReward({ name: 'exact_match' }) as RewardFunction<object>, weight: 1 },
    { fn: toolOkReward, weight: TOOL_OK_WEIGHT },
  ]) as RewardFunction<object>;
}
