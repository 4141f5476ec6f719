import type { Trajectory } from '@flowgrpo/core';
import { computeAdvantages, filterZeroVarianceGroups } from '@flowgrpo/grpo';
import type { GRPOConfig } from '../run/config.js';
import { rowsFromTrajectories, type Targets, type TrainRow, targetsOf } from './collate.js';
import { withoutTruncated } from './truncation.js';

// The contract between scoring and the update — TRL's dict between
// `_generate_and_score_completions` and `_compute_loss`. Every GRPO trainer (GRPOTrainer over an
// agent, MultiRoleGRPOTrainer and OnlineGRPOTrainer over recorded gateway calls, one batch per
// trained role) turns a batch of scored trajectories into one of these with scoreBatch(), and
// hands it to grpoUpdate() (grpo-update.ts), which adds the old / reference log-probs and the
// token weights. Gateway calls become Trajectories first (recorder.ts, rolloutTrajectory), so a
// recorded call reaches its row through the same collation as an agent's turn.

export interface ScoredBatch {
  /** The batch's trajectories, carrying their reward and advantage (and every turn's). */
  trajectories: readonly Trajectory[];
  /** Per trajectory: its reward. */
  rewards: Float64Array;
  /** Per trajectory: its GRPO group (the query it answered). */
  groups: Int32Array;
  /** Per trajectory: its group-relative advantage. */
  advantages: Float64Array;
  /** Token-exact rows of the trajectories the filters kept; `mask` marks the completions. */
  rows: TrainRow[];
  /** The rows' trainable tokens, flattened: what the loss is taken over (count 0: no update). */
  targets: Targets;
}

/**
 * rewards → group-relative advantages (broadcast to every turn) → DAPO's filters (zero-variance
 * groups carry no gradient; completions cut at the length limit carry no loss) → rows.
 */
export function scoreBatch(
  trajectories: readonly Trajectory[],
  rewards: Float64Array,
  groups: Int32Array,
  c: Pick<
    GRPOConfig,
    | 'scale_rewards'
    | 'filter_zero_variance_groups'
    | 'mask_truncated_completions'
    | 'max_completion_length'
  >,
): ScoredBatch {
  const advantages = computeAdvantages(rewards, groups, { scale: c.scale_rewards });
  trajectories.forEach((tr, i) => {
    tr.reward = rewards[i]!;
    tr.advantage = advantages[i]!;
    for (const turn of tr.turns ?? []) turn.advantage = advantages[i]!;
  });
  const keep = c.filter_zero_variance_groups
    ? filterZeroVarianceGroups(rewards, groups).keepSample
    : undefined;
  const kept = trajectories.map((tr, i) => ({ tr, i })).filter(({ i }) => !keep || keep[i] === 1);
  const rows = rowsFromTrajectories(
    kept.map(({ tr }) =>
      c.mask_truncated_completions ? withoutTruncated(tr, c.max_completion_length) : tr,
    ),
    kept.map(({ i }) => advantages[i]!),
  );
  return { trajectories, rewards, groups, advantages, rows, targets: targetsOf(rows) };
}
