import type { TrainerState } from '../run/checkpoint.js';
import type { GRPOConfig } from '../run/config.js';

// Where a GRPO run starts when it resumes no checkpoint — the same for every GRPO trainer
// (GRPOTrainer, MultiRoleGRPOTrainer, OnlineGRPOTrainer), so their trainer_state.json reads alike.

/** The state a GRPO run starts from: every random stream derives from `seed` (and the batch). */
export function freshGRPOState(c: GRPOConfig): TrainerState {
  return {
    global_step: 0,
    batches: 0,
    epoch: 0,
    data_cursor: 0,
    rng: {
      seed: c.seed,
      scheme: 'order = permutation(seed, epoch); rollout seeds from (seed, batch)',
    },
    nan_steps_skipped: 0,
    log_history: [],
    config: { ...c },
  };
}
