import { basename, join } from 'node:path';
import type { Trajectory } from '@flowgrpo/core';
import { type EvalResult, evalMetrics } from '../eval/evaluate.js';
import {
  describeRolloutFailures,
  type RolloutFailures,
  RolloutsFailedError,
} from '../eval/rollout-failures.js';
import { writeReport } from '../report/report.js';
import { AlarmStopError, stoppingAlarm } from '../run/alarms.js';
import { type BestModelRule, isBetterMetric } from '../run/best-model.js';
import { checkpointName, type TrainerState } from '../run/checkpoint.js';
import type { GRPOConfig } from '../run/config.js';
import type { MetricsRecord, RunDirectory } from '../run/run-dir.js';
import { StepClock } from '../run/step-clock.js';

// The book every GRPO trainer keeps (GRPOTrainer, MultiRoleGRPOTrainer, OnlineGRPOTrainer): what
// happens between one step's update and the next, and at the end, is the same whatever trained
// the policies — so the rules below are written once:
//
//   counters      global_step (a batch with nothing to train on is a step all the same, as TRL
//                 counts a step with inf/nan gradients), batches, nan_steps_skipped,
//                 empty_batches; failed_steps in a row (trainer_state.json's `extra`)
//   log           HF's rule: steps L, 2L, … and the last; the record's alarms (run-dir.ts) may stop
//                 the run (alarms.stop_on), as may max_failed_rollout_steps steps in a row whose
//                 every rollout failed
//   eval / save   when the step crossed a multiple of eval_steps / save_steps (no evaluation at the
//                 last step: the final one follows); with load_best_model_at_end, an evaluation
//                 better than every one before saves its step's checkpoint, which rotation keeps
//   finish        a checkpoint of the last step unless it is saved, the final evaluation (a best
//                 one rewrites that checkpoint, naming itself), report.html
//
// The trainer says how to write its policies (one adapter, or a folder per role) and how to
// evaluate them; the book says when.

export interface RunBookOptions {
  config: GRPOConfig;
  run: RunDirectory;
  state: TrainerState;
  /**
   * Writes checkpoint-<global_step> of the trained policies, then keeps the `limit` latest (0:
   * all) and `keep` (the best checkpoint) whatever the limit.
   */
  save: (rotate: { limit: number; keep?: string }) => Promise<string>;
  /** Evaluates the trained policies on the eval dataset; absent when the run has none. */
  evaluate?: (name: string) => Promise<EvalResult>;
  /** load_best_model_at_end's rule (best-model.ts); absent when the run keeps no best model. */
  bestModel?: BestModelRule;
  /** report.html's title. */
  title: string;
  /** Lines about the run: failed rollouts, a step without an update, stopping. */
  log: (line: string) => void;
  /** Called with each logged record. */
  onLog?: (record: MetricsRecord) => void;
  /** The checkpoint the run resumed from: a run that ends without a step more keeps it as it is. */
  resumedFrom?: string;
}

export class RunBook {
  readonly state: TrainerState;
  readonly #o: RunBookOptions;
  #emptyBatches: number;
  #failedSteps: number;
  #updated = false;
  #checkpoint: string | undefined;
  /** The last step's rollouts: report.html shows a sample (every rollout is in Parquet). */
  #lastBatch: readonly Trajectory[] = [];

  constructor(o: RunBookOptions) {
    this.#o = o;
    this.state = o.state;
    this.#emptyBatches = Number(o.state.extra?.empty_batches ?? 0);
    this.#failedSteps = Number(o.state.extra?.failed_steps ?? 0);
    this.#checkpoint = o.resumedFrom;
  }

  /** The latest checkpoint written (or resumed from). */
  get checkpoint(): string | undefined {
    return this.#checkpoint;
  }

  /** What the step record says of the run's counters. */
  get counters(): { nanStepsSkipped: number; emptyBatches: number } {
    return { nanStepsSkipped: this.state.nan_steps_skipped, emptyBatches: this.#emptyBatches };
  }

  /** A step starts: the clock of its phases, which knows the intervals it crosses. */
  startStep(): StepClock {
    return new StepClock(this.state.global_step);
  }

  /**
   * The step's optimizer steps are done: `steps` of them, `skipped` of those by the non-finite
   * guard. None (the filters left nothing to train on) still counts one step, so a run cannot
   * loop forever on such batches.
   */
  advance(u: { steps: number; skipped: number }, failures: RolloutFailures): void {
    const state = this.state;
    this.#updated = u.steps > 0;
    if (this.#updated) {
      // A skipped update still counts as a step (as TRL does with inf/nan gradients).
      state.nan_steps_skipped += u.skipped;
      state.global_step += u.steps;
    } else {
      state.global_step++;
      this.#emptyBatches++;
      // (Rollouts that all failed say so with the step's record, with the cause.)
      if (failures.failed < failures.total)
        this.#o.log(`step ${state.global_step}: nothing to train on after the filters; no update`);
    }
    state.batches++;
  }

  /**
   * The step's record into trainer_state's history and — at logging_steps and the last step —
   * metrics.jsonl with its alarms; its rollouts into rollouts/. Throws AlarmStopError when an
   * alarm of alarms.stop_on was raised (after a checkpoint of this step, kept whatever
   * save_total_limit says), RolloutsFailedError when every rollout of max_failed_rollout_steps
   * steps in a row failed (a broken setup more steps would not mend). Returns the record as
   * logged, undefined on a step not logged.
   */
  async log(
    record: MetricsRecord,
    failures: RolloutFailures,
    trajectories: readonly Trajectory[],
    clock: StepClock,
  ): Promise<MetricsRecord | undefined> {
    const c = this.#o.config;
    const state = this.state;
    const run = this.#o.run;
    // Failed rollouts are said on the step's own line, with the first message of each kind.
    if (failures.failed > 0)
      this.#o.log(
        `step ${state.global_step}: ${describeRolloutFailures(failures)}${this.#updated ? '' : '; no update'}`,
      );
    this.#failedSteps = failures.failed === failures.total ? this.#failedSteps + 1 : 0;
    state.extra = {
      ...state.extra,
      empty_batches: this.#emptyBatches,
      failed_steps: this.#failedSteps,
    };
    state.log_history.push(record as Record<string, number>);
    let logged: MetricsRecord | undefined;
    if (clock.crossed(c.logging_steps, state.global_step) || state.global_step >= c.max_steps) {
      logged = run.logMetrics(record);
      this.#o.onLog?.(record);
    }
    this.#lastBatch = trajectories;
    await run.writeRollouts(state.global_step, trajectories);
    // This step's policy is kept for reading, beside every checkpoint before it, and the run
    // ends with the alarm named.
    const alarm = logged && stoppingAlarm(logged, c.alarms.stop_on);
    if (alarm) {
      const checkpoint = await this.#save(0);
      await this.writeReport();
      throw new AlarmStopError({
        alarm: alarm.name,
        role: alarm.role,
        step: state.global_step,
        value: alarm.value,
        checkpoint,
      });
    }
    // The checkpoints written so far stay as they are; report.html is written so the failures
    // can be read per step and per trajectory without decoding the Parquet.
    if (this.#failedSteps >= c.max_failed_rollout_steps) {
      await this.writeReport();
      throw new RolloutsFailedError(
        `every rollout of the last ${this.#failedSteps} steps failed (max_failed_rollout_steps: ${c.max_failed_rollout_steps}); last at step ${state.global_step}`,
        failures,
      );
    }
    return logged;
  }

  /**
   * Evaluates and checkpoints when the step crossed a multiple of eval_steps / save_steps; a
   * new best evaluation (load_best_model_at_end) is checkpointed whatever save_steps says.
   */
  async evalSave(clock: StepClock): Promise<void> {
    const c = this.#o.config;
    const step = this.state.global_step;
    const evaluate = this.#o.evaluate;
    let best = false;
    if (evaluate && clock.crossed(c.eval_steps, step) && step < c.max_steps) {
      const metrics = evalMetrics(await evaluate(`step-${step}`));
      this.#o.run.logMetrics({ step, ...metrics });
      best = this.#recordIfBest(metrics);
    }
    if (best || clock.crossed(c.save_steps, step)) await this.#save(c.save_total_limit);
  }

  /**
   * The evaluation of this step's policies against the best so far: a better one becomes
   * trainer_state's best_metric / best_model_checkpoint before its checkpoint is written, so that
   * the checkpoint's own trainer_state names itself (a resumed run keeps it through rotation).
   */
  #recordIfBest(metrics: Record<string, number>): boolean {
    const rule = this.#o.bestModel;
    if (!rule) return false;
    const value = metrics[rule.metric]!;
    if (!isBetterMetric(rule, value, this.state.best_metric)) return false;
    const step = this.state.global_step;
    this.state.best_metric = value;
    this.state.best_model_checkpoint = join(this.#o.run.dir, checkpointName(step));
    this.#o.log(`step ${step}: ${rule.metric} ${value.toFixed(4)}, the best so far`);
    return true;
  }

  /**
   * The end of a run: a checkpoint of the last step unless it is saved, the final evaluation (a
   * run that reached max_steps), report.html. With load_best_model_at_end, `best` is the
   * checkpoint of the best evaluation, the final one included.
   */
  async finish(stopped: 'max_steps' | 'aborted'): Promise<{
    checkpoint: string;
    eval?: EvalResult;
    best?: { checkpoint: string; metric: number };
    report: string;
  }> {
    const step = this.state.global_step;
    if (stopped === 'aborted') this.#o.log('stopping: writing a final checkpoint');
    // The last step is kept before the final evaluation, so that an evaluation that fails (or
    // is interrupted) costs nothing trained.
    const limit = this.#o.config.save_total_limit;
    let checkpoint =
      this.#checkpoint && basename(this.#checkpoint) === checkpointName(step)
        ? this.#checkpoint
        : await this.#save(limit);
    let finalEval: EvalResult | undefined;
    if (this.#o.evaluate && stopped === 'max_steps') {
      finalEval = await this.#o.evaluate('final');
      const metrics = evalMetrics(finalEval);
      this.#o.run.logMetrics({ step, ...metrics });
      // The best: its checkpoint is written again (whole, in place), now naming itself in its
      // trainer_state, as an evaluation's best checkpoint does.
      if (this.#recordIfBest(metrics)) checkpoint = await this.#save(limit);
    }
    const { best_model_checkpoint: bestDir, best_metric: bestMetric } = this.state;
    const best =
      this.#o.bestModel && bestDir !== undefined && bestMetric !== undefined
        ? { checkpoint: bestDir, metric: bestMetric }
        : undefined;
    if (best)
      this.#o.log(
        `best checkpoint: ${basename(best.checkpoint)} (${this.#o.bestModel!.metric} ${best.metric.toFixed(4)})`,
      );
    const report = await this.writeReport(finalEval);
    return { checkpoint, ...(finalEval && { eval: finalEval }), ...(best && { best }), report };
  }

  /** report.html from metrics.jsonl so far, the last step's rollouts and the final evaluation. */
  writeReport(finalEval?: EvalResult): Promise<string> {
    const run = this.#o.run;
    return run.guard(join(run.dir, 'report.html'), () =>
      writeReport(run.dir, {
        title: `${this.#o.title} — ${run.dir}`,
        metrics: run.readMetrics(),
        ...(finalEval && { evals: [finalEval] }),
        trajectories: this.#lastBatch.slice(0, 32),
      }),
    );
  }

  async #save(limit: number): Promise<string> {
    const keep = this.state.best_model_checkpoint;
    this.#checkpoint = await this.#o.save({ limit, ...(keep !== undefined && { keep }) });
    return this.#checkpoint;
  }
}
