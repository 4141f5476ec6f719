import { grpoMetrics } from '@flowgrpo/grpo';
import { type RewardResult, rewardMetrics } from '@flowgrpo/reward';
import {
  formatCompliant,
  trajectoryCompletionLength,
  trajectoryToolCalls,
  trajectoryToolErrors,
  trajectoryTurns,
} from '../eval/evaluate.js';
import { type RolloutFailures, rolloutFailureMetrics } from '../eval/rollout-failures.js';
import type { GRPOConfig } from '../run/config.js';
import type { MetricsRecord } from '../run/run-dir.js';
import type { GrpoUpdateResult } from '../update/grpo-update.js';
import type { ScoredBatch } from '../update/scored-batch.js';
import { isTruncated } from '../update/truncation.js';

// One GRPO step's line in metrics.jsonl, the same for every GRPO trainer: TRL's names, then
// flowgrpo's. The alarms (alarms.ts), the viewer's curves and report.html read these keys, so a
// trainer that wrote fewer would silently go without them.
//
// GRPOTrainer trains one policy: its record is unprefixed. The gateway's trainers train a policy
// per role: each trained role's batch (its own calls, its own rewards) and update make the same
// record under `<role>/`, and the unprefixed keys describe the step's rollouts as a whole (the
// reward posted for each, its completions, its failures). Counters, the learning rate and the
// phases' seconds are the run's, unprefixed. roleRecord (role-record.ts) reads a role's record
// back as GRPOTrainer's.

/** A policy's part of a step: the batch it was scored on and the update made from it. */
export interface PolicyStep {
  batch: ScoredBatch;
  /** Its optimizer steps (none when the filters left nothing to train on). */
  update: GrpoUpdateResult;
  /** Seconds its optimizer steps took (train/tokens_per_s). */
  trainSeconds: number | undefined;
}

/** The step's rollouts as scored: what the unprefixed keys of a roles run describe. */
export type StepRollouts = Pick<ScoredBatch, 'trajectories' | 'rewards' | 'groups'>;

export interface StepRecordInput {
  config: Pick<GRPOConfig, 'beta' | 'success_threshold' | 'max_completion_length'>;
  /** Global steps done after this step. */
  step: number;
  /** Fractional epochs of the train dataset done (none when agents choose the tasks). */
  epoch?: number;
  /** One policy, unprefixed (GRPOTrainer) — or the rollouts and a policy per trained role. */
  trained:
    | { policy: PolicyStep }
    | {
        rollouts: StepRollouts;
        roles: Readonly<Record<string, PolicyStep>>;
        /** Calls per rollout of every served role, trained or frozen (`<role>/calls`). */
        calls: Readonly<Record<string, number>>;
      };
  /** The reward function's results (rewards/<name>/mean, …), when one scored the rollouts. */
  rewards?: { results: readonly RewardResult<object>[]; name: string };
  failures: RolloutFailures;
  /** The query sampler's own metrics (a curriculum's stage and shares). */
  questions?: Readonly<Record<string, number>>;
  counters: { nanStepsSkipped: number; emptyBatches: number };
  /** Seconds per phase (timing/<phase>_s). */
  seconds: Readonly<Record<string, number>>;
  /**
   * Per trajectory, with rollouts sampled ahead (max_staleness): optimizer steps between the
   * adapter it was sampled from and the one trained on it (async/staleness_*, verl's and TRL's).
   */
  staleness?: readonly number[];
}

export function stepRecord(o: StepRecordInput): MetricsRecord {
  const c = o.config;
  const t = o.trained;
  const policies = 'policy' in t ? [t.policy] : Object.values(t.roles);
  // The roles' updates run from the same step on the same schedule: the longest holds the last.
  const longest = policies.reduce<PolicyStep | undefined>(
    (a, p) => (a && a.update.updates.length >= p.update.updates.length ? a : p),
    undefined,
  );
  return {
    step: o.step,
    ...(o.epoch !== undefined && { epoch: o.epoch }),
    learning_rate: longest?.update.learningRates.at(-1) ?? 0,
    ...('policy' in t
      ? policyMetrics(t.policy.batch, c, t.policy)
      : {
          ...policyMetrics(t.rollouts, c),
          ...Object.fromEntries(Object.entries(t.calls).map(([role, n]) => [`${role}/calls`, n])),
          ...Object.fromEntries(
            Object.entries(t.roles).flatMap(([role, p]) =>
              Object.entries(policyMetrics(p.batch, c, p)).map(([k, v]) => [`${role}/${k}`, v]),
            ),
          ),
        }),
    ...(o.rewards && rewardMetrics(o.rewards.results, o.rewards.name)),
    ...rolloutFailureMetrics(o.failures),
    nan_steps_skipped: o.counters.nanStepsSkipped,
    empty_batches: o.counters.emptyBatches,
    ...Object.fromEntries(Object.entries(o.seconds).map(([k, v]) => [`timing/${k}_s`, v])),
    ...(o.staleness && {
      'async/staleness_mean': mean(o.staleness),
      'async/staleness_max': o.staleness.reduce((a, b) => Math.max(a, b), 0),
    }),
    ...o.questions,
  };
}

/**
 * One policy's metrics: its batch's rewards, completions and behaviour, and — given the update
 * made from the batch — the loss's statistics and what was trained on.
 */
function policyMetrics(
  batch: StepRollouts & Partial<Pick<ScoredBatch, 'rows' | 'targets'>>,
  c: StepRecordInput['config'],
  p?: Pick<PolicyStep, 'update' | 'trainSeconds'>,
): Record<string, number> {
  const { trajectories, rewards, groups } = batch;
  const u = p?.update;
  const last = u && (u.updates.findLast((x) => !x.skipped) ?? u.updates.at(-1));
  const turns = trajectories.map(trajectoryTurns);
  const calls = trajectories.map(trajectoryToolCalls);
  const toolErrors = trajectories.map(trajectoryToolErrors);
  const totalCalls = calls.reduce((a, b) => a + b, 0);
  return {
    ...(last && { loss: last.stats.loss, grad_norm: last.gradNorm }),
    ...grpoMetrics({
      rewards,
      groups,
      completionLengths: trajectories.map(trajectoryCompletionLength),
      ...(last && {
        loss: {
          clipFracLow: last.stats.clip_low_sum,
          clipFracHigh: last.stats.clip_high_sum,
          clipFrac: last.stats.clip_region_sum,
          ...(c.beta !== 0 && { kl: last.stats.kl_sum }),
          entropy: last.stats.entropy_sum,
        },
      }),
    }),
    accuracy: mean(Array.from(rewards, (r) => (r >= c.success_threshold ? 1 : 0))),
    // Read by the truncation alarm (alarms.ts).
    'completions/clipped_ratio': mean(
      trajectories.map((tr) => (isTruncated(tr, c.max_completion_length) ? 1 : 0)),
    ),
    // Read by the format_collapse alarm: a reward earned with malformed replies shows here.
    'completions/format_ratio': mean(trajectories.map((tr) => (formatCompliant(tr) ? 1 : 0))),
    'turns/mean': mean(turns),
    'tools/calls_per_trajectory': mean(calls),
    'tools/error_rate': totalCalls === 0 ? 0 : toolErrors.reduce((a, b) => a + b, 0) / totalCalls,
    ...(u && updateMetrics(batch.rows ?? [], batch.targets?.count ?? 0, u, p.trainSeconds)),
  };
}

/** What an update trained on, and how fast (flowgrpo's). */
function updateMetrics(
  rows: ScoredBatch['rows'],
  trainable: number,
  u: GrpoUpdateResult,
  trainSeconds: number | undefined,
): Record<string, number> {
  const last = u.updates.findLast((x) => !x.skipped) ?? u.updates.at(-1);
  const allTokens = rows.reduce((sum, r) => sum + r.tokens.length, 0);
  return {
    trainable_token_ratio: allTokens === 0 ? 0 : trainable / allTokens,
    'logprob_mismatch/mean': u.mismatch.count === 0 ? 0 : u.mismatch.sum / u.mismatch.count,
    'logprob_mismatch/max': u.mismatch.max,
    'train/tokens': allTokens,
    'train/micro_batches': last?.microBatches ?? 0,
    'train/tokens_per_s': (allTokens / Math.max(1e-9, trainSeconds ?? 1)) * u.updates.length,
  };
}

function mean(xs: readonly number[]): number {
  return xs.length === 0 ? 0 : xs.reduce((a, b) => a + b, 0) / xs.length;
}
