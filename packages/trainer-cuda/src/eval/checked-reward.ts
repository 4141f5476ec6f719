import { FlowGrpoError, type Trajectory } from '@flowgrpo/core';
import type { RewardFunction, RewardInput, RewardResult } from '@flowgrpo/reward';

// A reward function is the user's code: it may throw, or return what is not a reward (undefined,
// a bare number, {score: '1'}, NaN). Either way the rollout scores 0 and records why, and the run
// goes on — a crash after a batch of rollouts would throw the batch away; a TypeError would not
// say whose fault it was.

/** A reward function returned something other than `{score: finite number, details?: object}`. */
export class InvalidRewardError extends FlowGrpoError {
  static override readonly code = 'INVALID_REWARD';
}

/** The error a rollout's reward recorded (metadata.rewardError). */
export interface RewardErrorRecord {
  code: string;
  message: string;
}

export interface CheckedReward {
  result: RewardResult<object>;
  /** Set when the reward function threw or returned no valid result (then the score is 0). */
  error?: RewardErrorRecord;
}

function describe(value: unknown): string {
  if (value === undefined) return 'undefined';
  try {
    const s = JSON.stringify(value);
    return s.length > 80 ? `${s.slice(0, 79)}…` : s;
  } catch {
    return typeof value;
  }
}

/** Why `value` is not a reward result, or undefined when it is one. */
function invalid(value: unknown): string | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return 'not an object';
  const { score, details } = value as { score?: unknown; details?: unknown };
  if (typeof score !== 'number') return 'score is not a number';
  if (!Number.isFinite(score)) return `non-finite score ${score}`;
  if (details !== undefined && (typeof details !== 'object' || details === null))
    return 'details is not an object';
  return undefined;
}

/** Scores `input`; the reward function's faults come back as `error`, never thrown. */
export async function scoreChecked(
  reward: RewardFunction<object>,
  input: RewardInput,
): Promise<CheckedReward> {
  let value: unknown;
  try {
    value = await reward.score(input);
  } catch (e) {
    const code = FlowGrpoError.isInstance(e) ? e.code : 'REWARD_FAILED';
    const message = `reward '${reward.name}' threw: ${e instanceof Error ? e.message : String(e)}`;
    return { result: { score: 0, details: { error: message } }, error: { code, message } };
  }
  const why = invalid(value);
  if (why) {
    const error = new InvalidRewardError(
      `reward '${reward.name}' returned ${describe(value)} (${why}); a reward is {score: finite number, details?: object}`,
    );
    return {
      result: { score: 0, details: { error: error.message } },
      error: { code: error.code, message: error.message },
    };
  }
  const r = value as { score: number; details?: object };
  return { result: { score: r.score, details: r.details ?? {} } };
}

/** Scores a trajectory; a reward error is recorded in its metadata.rewardError. */
export async function scoreTrajectory(
  reward: RewardFunction<object>,
  input: RewardInput,
  trajectory: Trajectory,
): Promise<RewardResult<object>> {
  const { result, error } = await scoreChecked(reward, input);
  if (error) trajectory.metadata = { ...trajectory.metadata, rewardError: error };
  return result;
}
