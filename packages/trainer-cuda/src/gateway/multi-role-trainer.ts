import { join, resolve } from 'node:path';
import { ConfigError, createRng, type SampleRow, type Trajectory } from '@flowgrpo/core';
import {
  type AgentProgram,
  createPolicyGateway,
  gatewayAgent,
  gatewayReward,
  type PolicyGateway,
  type PolicyGatewayOptions,
  type RecordedRollout,
  rolloutTrajectory,
  runAgentProgram,
} from '@flowgrpo/gateway';
import type { DeviceRequest, Tokenizer } from '@flowgrpo/models';
import { greedy, readArtifactsManifest } from '@flowgrpo/models';
import type { RewardFunction } from '@flowgrpo/reward';
import { scoreChecked } from '../train/checked-reward.js';
import type { TrainerState } from '../train/checkpoint.js';
import {
  type GRPOConfig,
  type GRPOConfigInput,
  GRPOConfigSchema,
  learningRateAt,
  parseConfig,
  refuseUnusedKeys,
} from '../train/config.js';
import { EpochCursor } from '../train/data-order.js';
import { type EvalResult, evalMetrics, evaluate } from '../train/evaluate.js';
import { freshGRPOState } from '../train/grpo-state.js';
import { mapConcurrent } from '../train/map-concurrent.js';
import { NonFiniteGuard } from '../train/non-finite-guard.js';
import { writeReport } from '../train/report.js';
import type { RoleCheckpointPart } from '../train/roles-checkpoint.js';
import {
  RolloutsFailedError,
  rolloutFailureMetrics,
  tallyFailures,
  thrownFailure,
} from '../train/rollout-failures.js';
import type { RunDirectory } from '../train/run-dir.js';
import { RunLifecycle } from '../train/run-lifecycle.js';
import { StepClock } from '../train/step-clock.js';
import {
  hostRoles,
  type RoleSpec,
  type ServedRole,
  saveRoleAdapters,
  trainedRoleSampling,
  updateRole,
} from './role-policies.js';

// Several roles of one agent system, each its own LoRA adapter on the shared base, served by the
// gateway under the role's name (the request's `model`), trained together by GRPO:
//
//   for each step: Q questions × G runs of the agent program through the gateway
//     → a reward per rollout (or per role: `role_rewards` posted to /v1/rollouts/{id}/reward)
//     → per trained role: the group-relative advantages over the rollouts in which the role
//       acted, rows from that role's calls only (rolloutTrajectory → scoreBatch), then
//       grpoUpdate — GRPOTrainer's update: old/ref logprobs, num_iterations AdamW steps with
//       the role's own optimizer state (a LoraPolicy per role), the non-finite guard
//     → the role's engine gets its new adapter in place; frozen roles never change
//
// One base model in the rollout engines (one opened artifacts directory, an engine per role);
// each trained role holds its own train_step/logprobs sessions (base weights referenced again by
// each — memory grows with the number of trained roles).

export interface MultiRoleGRPOTrainerOptions {
  /** GRPOTrainer's config keys (num_generations, queries_per_step, loss_type, …). */
  config: GRPOConfigInput;
  /** Artifacts built with a LoRA config (decode, logprobs, train_step). */
  artifacts: string;
  tokenizer: Tokenizer;
  /** Role name (= served model name) → spec. */
  roles: Record<string, RoleSpec>;
  /** The agent program: gets a base URL and rollout id, calls the roles by model name. */
  program: AgentProgram;
  /** Scores a rollout's final answer when the program posted no reward. */
  reward?: RewardFunction<object>;
  trainDataset: readonly SampleRow[];
  /**
   * Evaluated every `eval_steps` and at the end: the program once per row, the trained roles
   * greedy (temperature 0), scored by the posted reward or `reward`.
   */
  evalDataset?: readonly SampleRow[];
  device?: DeviceRequest;
  /** Gateway options (apiKey, limits); it listens on 127.0.0.1, any free port. */
  gateway?: Omit<PolicyGatewayOptions, 'host'>;
  onLog?: (record: Record<string, number>) => void;
  signal?: AbortSignal;
}

export interface MultiRoleTrainResult {
  globalStep: number;
  metrics: Record<string, number>[];
  /** PEFT adapter folders of the trained roles, saved at the end. */
  adapters: Record<string, string>;
  /** The last checkpoint written (a folder per trained role). */
  checkpoint: string | undefined;
  report: string;
  stopped: 'max_steps' | 'aborted';
  /** The final evaluation (with an evalDataset). */
  eval?: EvalResult;
}

/** One run of the agent program: its recorded calls, its score, why it failed. */
interface ScoredRun {
  rollout: RecordedRollout;
  score: number;
  failure: ReturnType<typeof thrownFailure> | undefined;
}

/** GRPO keys this trainer cannot act on, and why. */
const UNUSED_KEYS = ['max_turns', 'top_k', 'generate_workers'] as const;
const UNUSED_WHY =
  'MultiRoleGRPOTrainer does not use these keys: the agent program decides its own turns, and the roles sample on the gateway (no top_k, no generate workers)';

/** A role's name is its folder in checkpoints and adapters/. */
const FOLDER_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

export class MultiRoleGRPOTrainer {
  readonly config: GRPOConfig;
  readonly #o: MultiRoleGRPOTrainerOptions;

  constructor(o: MultiRoleGRPOTrainerOptions) {
    this.config = parseConfig(GRPOConfigSchema, o.config, 'GRPO config');
    refuseUnusedKeys(this.config, 'GRPO config', UNUSED_KEYS, UNUSED_WHY);
    this.#o = o;
    if (!Object.values(o.roles).some((r) => r.trainable))
      throw new ConfigError('no role is trainable', { key: 'roles' });
    for (const name of Object.keys(o.roles))
      if (!FOLDER_NAME.test(name))
        throw new ConfigError(
          `role '${name}': a trained role's name is its folder in checkpoints and adapters/`,
          { key: 'roles' },
          { hint: 'name roles with letters, digits, dot, dash and underscore' },
        );
    if (o.trainDataset.length === 0)
      throw new ConfigError('the train dataset is empty', { key: 'trainDataset' });
  }

  async train(): Promise<MultiRoleTrainResult> {
    const c = this.config;
    const o = this.#o;
    // output_dir first (its lock, HF's rules, the checkpoint to resume), before the roles open.
    const life = await RunLifecycle.open({
      ...c,
      trainer: 'multi-role-grpo',
      modelConfig: readArtifactsManifest(o.artifacts).config,
      inputs: [
        { key: 'artifacts', path: o.artifacts, runProduct: true },
        ...Object.entries(o.roles).flatMap(([name, r]) =>
          typeof r.adapter === 'string'
            ? [{ key: `roles.${name}.adapter`, path: r.adapter, runProduct: true }]
            : [],
        ),
      ],
      perRole: true,
    });
    try {
      return await this.#serveAndTrain(life);
    } finally {
      life.close();
    }
  }

  async #serveAndTrain(life: RunLifecycle): Promise<MultiRoleTrainResult> {
    const c = this.config;
    const o = this.#o;
    const ck = life.resumedRoles;
    const state: TrainerState = ck ? { ...ck.trainer, config: { ...c } } : freshGRPOState(c);
    life.run.writeJson('config.json', {
      trainer: 'multi-role-grpo',
      ...c,
      artifacts: resolve(o.artifacts),
      roles: Object.fromEntries(
        Object.entries(o.roles).map(([k, r]) => [k, { trainable: r.trainable }]),
      ),
    });
    const served = await hostRoles({
      artifactsDir: o.artifacts,
      tokenizer: o.tokenizer,
      roles: o.roles,
      config: c,
      device: o.device ?? 'cpu',
      ...(ck && { resume: ck.roles }),
    });
    let gateway: PolicyGateway | undefined;
    try {
      gateway = await createPolicyGateway({
        ...o.gateway,
        host: served.host,
        rolloutSampling: trainedRoleSampling(served.roles, this.config),
      });
      return await this.#loop(life, gateway, served.roles, state);
    } finally {
      await gateway?.close();
      await served.close();
    }
  }

  // ---- the loop: rollout → score → update (per role) → metrics → log / eval / save ----------
  async #loop(
    life: RunLifecycle,
    gateway: PolicyGateway,
    roles: ServedRole[],
    state: TrainerState,
  ): Promise<MultiRoleTrainResult> {
    const c = this.config;
    const o = this.#o;
    const run = life.run;
    const G = c.num_generations;
    const cursor = new EpochCursor(o.trainDataset.length, c.seed, state);
    // Steps in a row whose every rollout failed (max_failed_rollout_steps).
    let failedSteps = Number(state.extra?.failed_steps ?? 0);
    const guards = new Map(
      roles.map((r) => [r.name, new NonFiniteGuard(c.max_nan_steps_in_a_row, () => {})]),
    );
    let lastCheckpoint: string | undefined;
    let lastBatch: Trajectory[] = [];
    let stopped: MultiRoleTrainResult['stopped'] = 'max_steps';
    while (state.global_step < c.max_steps) {
      if (o.signal?.aborted) {
        stopped = 'aborted';
        break;
      }
      const batch = state.batches;
      const clock = new StepClock(state.global_step);
      const crossed = (every: number) => clock.crossed(every, state.global_step);

      // 1. Rollouts: Q questions × G runs of the agent program, at most rollout_concurrency at once.
      const rows = cursor.take(c.queries_per_step).map((i) => o.trainDataset[i]!);
      const base = createRng(`${c.seed}:rollouts:${batch}`).nextUint32();
      const jobs = rows.flatMap((row, q) => Array.from({ length: G }, (_, g) => ({ row, q, g })));
      let done: ScoredRun[];
      try {
        done = await mapConcurrent(jobs, c.rollout_concurrency, ({ row, q, g }) =>
          this.#rollout(gateway, roles, row, `b${batch}.q${q}.g${g}`, base + q * G + g),
        );
      } catch (e) {
        // Aborted mid-batch: the batch is dropped, the last finished step is checkpointed below.
        if (!o.signal?.aborted) throw e;
        stopped = 'aborted';
        break;
      }
      // 2. Scores: the posted reward (or the reward function's), per role where posted.
      const rollouts = done.map((d) => d.rollout);
      const scored = done.map((d) => d.score);
      const groups = jobs.map((j) => j.q);
      const failed = tallyFailures(done.map((d) => d.failure));

      // 3. Every trained role takes the batch's num_iterations updates from the same step
      // (updateRole: scoreBatch → grpoUpdate); a batch no role could train on counts as one step
      // without an update (as in GRPOTrainer).
      const record: Record<string, number> = {
        step: 0,
        epoch: 0,
        learning_rate: learningRateAt(state.global_step + 1, c),
        reward: scored.reduce((a, b) => a + b, 0) / scored.length,
        accuracy: scored.filter((r) => r >= c.success_threshold).length / scored.length,
        ...rolloutFailureMetrics(failed),
      };
      let steps = 0;
      let skipped = 0;
      for (const role of roles) {
        record[`${role.name}/calls`] =
          rollouts.reduce((s, r) => s + r.calls.filter((x) => x.model === role.name).length, 0) /
          rollouts.length;
        const u = await updateRole(role, rollouts, scored, groups, {
          config: c,
          step: state.global_step,
          guard: guards.get(role.name)!,
          batch,
        });
        if (u) {
          Object.assign(record, u.metrics);
          steps = Math.max(steps, u.steps);
          skipped += u.metrics[`${role.name}/skipped`] ?? 0;
        }
      }
      state.global_step += Math.max(1, steps);
      state.nan_steps_skipped += skipped;
      state.batches++;

      // 4. Metrics, then 5. log (HF's rule: steps L, 2L, … and the last), rollouts, eval, save.
      record.step = state.global_step;
      record.epoch = cursor.epochs;
      record.nan_steps_skipped = state.nan_steps_skipped;
      failedSteps = failed.failed === failed.total ? failedSteps + 1 : 0;
      state.extra = { ...state.extra, failed_steps: failedSteps };
      state.log_history.push(record);
      if (crossed(c.logging_steps) || state.global_step >= c.max_steps) {
        run.logMetrics(record);
        o.onLog?.(record);
      }
      lastBatch = done.map((d, k) => {
        const t = rolloutTrajectory(d.rollout, {
          queryId: String(jobs[k]!.row.id),
          groupId: `batch-${batch}/q-${jobs[k]!.q}`,
          question: jobs[k]!.row.question,
          groundTruth: jobs[k]!.row.result,
        });
        t.reward = d.score;
        return t;
      });
      await run.writeRollouts(state.global_step, lastBatch);
      if (failedSteps >= c.max_failed_rollout_steps) {
        await this.#writeReport(run, lastBatch);
        throw new RolloutsFailedError(
          `every rollout of the last ${failedSteps} steps failed (max_failed_rollout_steps: ${c.max_failed_rollout_steps}); last at step ${state.global_step}`,
          failed,
        );
      }
      if (o.evalDataset && crossed(c.eval_steps) && state.global_step < c.max_steps) {
        const ev = await this.#evaluate(run, gateway, roles, `step-${state.global_step}`);
        run.logMetrics({ step: state.global_step, ...evalMetrics(ev) });
      }
      if (crossed(c.save_steps)) lastCheckpoint = await this.#checkpoint(life, roles, state);
    }

    if (!lastCheckpoint?.endsWith(`checkpoint-${state.global_step}`))
      lastCheckpoint = await this.#checkpoint(life, roles, state);
    let finalEval: EvalResult | undefined;
    if (o.evalDataset && stopped === 'max_steps') {
      finalEval = await this.#evaluate(run, gateway, roles, 'final');
      run.logMetrics({ step: state.global_step, ...evalMetrics(finalEval) });
    }
    const adapters = await saveRoleAdapters(roles, run.path('adapters'));
    const report = await this.#writeReport(run, lastBatch, finalEval);
    return {
      globalStep: state.global_step,
      metrics: run.readMetrics() as Record<string, number>[],
      adapters,
      checkpoint: lastCheckpoint,
      report,
      stopped,
      ...(finalEval && { eval: finalEval }),
    };
  }

  /**
   * The trained roles, greedy, on the eval dataset (GRPOTrainer's evaluate(): accuracy at
   * success_threshold, written to eval/<name>.json). The trajectory is the first trained role's.
   */
  async #evaluate(
    run: RunDirectory,
    gateway: PolicyGateway,
    roles: readonly ServedRole[],
    name: string,
  ): Promise<EvalResult> {
    const c = this.config;
    const o = this.#o;
    const [first, ...others] = roles.filter((r) => r.policy);
    const agent = gatewayAgent({
      gateway,
      program: o.program,
      model: first!.name,
      engines: Object.fromEntries(others.map((r) => [r.name, greedy(r.engine)])),
      apiKey: o.gateway?.apiKey ?? 'EMPTY',
    })(greedy(first!.engine));
    const result = await evaluate({
      agent,
      dataset: o.evalDataset ?? [],
      reward: gatewayReward(o.reward),
      concurrency: c.rollout_concurrency,
      successThreshold: c.success_threshold,
      seed: c.seed,
      name,
      ...(o.signal && { signal: o.signal }),
    });
    run.writeJson(join('eval', `${name}.json`), result);
    return result;
  }

  /** checkpoint-<step>: every trained role's adapter and optimizer state, and the run's state. */
  async #checkpoint(
    life: RunLifecycle,
    roles: readonly ServedRole[],
    state: TrainerState,
  ): Promise<string> {
    const parts: Record<string, RoleCheckpointPart> = {};
    for (const role of roles)
      if (role.policy)
        parts[role.name] = {
          config: role.policy.config,
          lora: role.policy.lora!,
          state: await role.policy.exportState(),
        };
    return life.saveRolesCheckpoint(
      { roles: parts, trainer: state },
      { limit: this.config.save_total_limit },
    );
  }

  /** report.html from metrics.jsonl, a sample of the last batch's rollouts, the final eval. */
  #writeReport(
    run: RunDirectory,
    lastBatch: readonly Trajectory[],
    finalEval?: EvalResult,
  ): Promise<string> {
    return run.guard(join(run.dir, 'report.html'), () =>
      writeReport(run.dir, {
        title: `Multi-role GRPO run — ${run.dir}`,
        metrics: run.readMetrics(),
        ...(finalEval && { evals: [finalEval] }),
        trajectories: lastBatch.slice(0, 32),
      }),
    );
  }

  /**
   * One run of the agent program under rollout `id`, scored: the reward it posted, else the
   * reward function's (a fault scores 0 and is kept in the rollout's details), else 0. A failed
   * rollout keeps the calls it made.
   */
  async #rollout(
    gateway: PolicyGateway,
    roles: readonly ServedRole[],
    row: SampleRow,
    id: string,
    seed: number,
  ): Promise<ScoredRun> {
    const o = this.#o;
    const { recorded, answer, failure } = await runAgentProgram(
      gateway,
      o.program,
      id,
      { seed },
      {
        question: row.question,
        model: roles.find((r) => r.spec.trainable)!.name,
        apiKey: o.gateway?.apiKey ?? 'EMPTY',
        seed,
        groundTruth: row.result,
        ...(o.signal && { signal: o.signal }),
      },
    );
    const checked =
      recorded.reward === undefined && o.reward
        ? await scoreChecked(o.reward, {
            question: row.question,
            groundTruth: row.result,
            finalAnswer: recorded.finalAnswer ?? answer,
          })
        : undefined;
    if (checked?.error) recorded.details = { ...recorded.details, rewardError: checked.error };
    return {
      rollout: recorded,
      score: recorded.reward ?? checked?.result.score ?? 0,
      failure: failure && thrownFailure(failure),
    };
  }
}
