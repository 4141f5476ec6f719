import { ConfigError, type Trajectory } from '@flowgrpo/core';

/** What every reward function scores: one final answer against its ground truth. */
export interface RewardInput {
  question: string;
  /**
   * The reference answer. A list holds alternative golds (NQ's answer lists); a string may be the
   * seeds' `'; '`-joined `result` (rule-based rewards split it, see `splitGoldAnswers`).
   */
  groundTruth: string | readonly string[];
  /** The answer extracted from the rollout (what the judge and the matchers compare). */
  finalAnswer: string;
  /**
   * The raw model output when it differs from `finalAnswer` (tags, reasoning); format rewards and
   * the GSM8K multi-dimension reward read it, falling back to `finalAnswer`.
   */
  completion?: string;
  trajectory?: Trajectory;
}

export interface RewardResult<D extends object = Record<string, unknown>> {
  score: number;
  details: D;
}

/**
 * A reward: `name` is the key the trainer logs under (`rewards/<name>/mean`). `score` may be sync
 * or async; callers always `await` it.
 */
export interface RewardFunction<D extends object = Record<string, unknown>> {
  readonly name: string;
  score(input: RewardInput): RewardResult<D> | Promise<RewardResult<D>>;
}

/** The text format rewards look at: the raw completion when given, else the final answer. */
export function completionText(input: RewardInput): string {
  return input.completion ?? input.finalAnswer;
}

/**
 * The reward input of a recorded trajectory: its question, ground truth and final answer, and as
 * completion the text of its turns (flow rollouts) joined by newlines. `groundTruth` overrides the
 * trajectory's own (e.g. NQ's list of alternatives).
 */
export function rewardInputFromTrajectory(
  trajectory: Trajectory,
  overrides: Partial<Pick<RewardInput, 'groundTruth' | 'completion' | 'question'>> = {},
): RewardInput {
  const question = overrides.question ?? trajectory.question;
  const groundTruth = overrides.groundTruth ?? trajectory.groundTruth;
  if (question === undefined || groundTruth === undefined) {
    throw new ConfigError(
      `trajectory ${trajectory.queryId} has no ${question === undefined ? 'question' : 'groundTruth'}; pass it in overrides`,
      { key: question === undefined ? 'question' : 'groundTruth' },
    );
  }
  const completion =
    overrides.completion ??
    (trajectory.turns ? trajectory.turns.map((t) => t.text).join('\n') : undefined);
  return {
    question,
    groundTruth,
    finalAnswer: trajectory.finalAnswer,
    ...(completion === undefined ? {} : { completion }),
    trajectory,
  };
}
