import { FlowGrpoError } from '@flowgrpo/core';
import type { UpdateResult } from './lora-policy.js';

// max_nan_steps_in_a_row: an update whose loss or gradient norm is not finite is skipped (the
// parameters and moments stay as they were, as TRL does with inf/nan gradients) and still counts
// as a step; N such updates in a row stop the run, since more steps would not mend it.

/** Too many updates in a row had a non-finite loss or gradient norm. */
export class NonFiniteLossError extends FlowGrpoError {
  static override readonly code = 'NON_FINITE_LOSS';
  readonly step: number;
  readonly batch: number;
  readonly queryIds: string[];
  constructor(fields: {
    step: number;
    batch: number;
    queryIds: string[];
    inARow: number;
    reason: string;
  }) {
    super(
      `${fields.inARow} updates in a row had a non-finite ${fields.reason} (last at step ${fields.step}, rollout batch ${fields.batch}, queries ${fields.queryIds.join(', ')}); parameters were left at step ${fields.step}`,
    );
    this.step = fields.step;
    this.batch = fields.batch;
    this.queryIds = fields.queryIds;
  }
}

/** Counts skipped updates in a row across a run's batches; one per trained adapter. */
export class NonFiniteGuard {
  #inARow = 0;
  readonly #max: number;
  readonly #log: (line: string) => void;

  constructor(maxInARow: number, log: (line: string) => void) {
    this.#max = maxInARow;
    this.#log = log;
  }

  /**
   * Notes the update made at `step` (global steps done before it): a skipped one is said, and
   * the Nth in a row throws NonFiniteLossError.
   */
  check(r: UpdateResult, at: { step: number; batch: number; queryIds: string[]; who?: string }) {
    if (!r.skipped) {
      this.#inARow = 0;
      return;
    }
    this.#inARow++;
    this.#log(
      `step ${at.step + 1}: ${at.who ? `${at.who}'s ` : ''}update skipped (${r.skipped}); parameters unchanged`,
    );
    if (this.#inARow >= this.#max)
      throw new NonFiniteLossError({
        step: at.step,
        batch: at.batch,
        queryIds: at.queryIds,
        inARow: this.#inARow,
        reason: r.skipped === 'nonfinite_loss' ? 'loss' : 'gradient norm',
      });
  }
}
