import { join, resolve } from 'node:path';
import { ConfigError, type SampleRow, type Trajectory } from '@flowgrpo/core';
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
import type { RewardFunction, RewardResult } from '@flowgrpo/reward';
import { scoreChecked } from '../eval/checked-reward.js';
import { type EvalResult, evaluate } from '../eval/evaluate.js';
import { mapConcurrent } from '../eval/map-concurrent.js';
import { type RolloutFailures, tallyFailures, thrownFailure } from '../eval/rollout-failures.js';
import { type BestModelRule, bestModelRule } from '../run/best-model.js';
import type { TrainerState } from '../run/checkpoint.js';
import {
  checkArtifactsSamplingWeights,
  type GRPOConfig,
  type GRPOConfigInput,
  GRPOConfigSchema,
  parseConfig,
  refuseUnusedKeys,
} from '../run/config.js';
import { querySampler } from '../run/query-sampler.js';
import type { RoleCheckpointPart } from '../run/roles-checkpoint.js';
import type { RunDirectory } from '../run/run-dir.js';
import { RunLifecycle } from '../run/run-lifecycle.js';
import type { StepClock } from '../run/step-clock.js';
import { freshGRPOState } from '../trainers/grpo-state.js';
import { rolloutJobs } from '../trainers/rollout-jobs.js';
import { RunBook } from '../trainers/run-book.js';
import { type PolicyStep, type StepRollouts, stepRecord } from '../trainers/step-record.js';
import { NonFiniteGuard } from '../update/non-finite-guard.js';
import {
  callsPerRole,
  hostRoles,
  type RoleSpec,
  roleSteps,
  type ServedRole,
  saveRoleAdapters,
  trainedRoleSampling,
  updateRole,
} from './role-policies.js';

// Several roles of one agent system, each its own LoRA adapter on the shared base, served by the
// gateway under the role's name (the request's `model`), trained together by GRPO — in
// GRPOTrainer's phases (#loop below):
//
//   for each step:
//     1. rollout   Q questions × G runs of the agent program through the gateway
//     2. score     a reward per rollout: the one posted (or per role: `role_rewards` posted to
//                  /v1/rollouts/{id}/reward), else the reward function's
//     3. update    per trained role: the group-relative advantages over the rollouts in which
//                  the role acted, rows from that role's calls only (rolloutTrajectory →
//                  scoreBatch), then grpoUpdate — GRPOTrainer's update: old/ref logprobs,
//                  num_iterations AdamW steps with the role's own optimizer state (a LoraPolicy
//                  per role), the non-finite guard → the role's engine gets its new adapter in
//                  place; frozen roles never change
//     4. metrics   GRPOTrainer's record of the rollouts, and of each trained role under `<role>/`
//                  (step-record.ts)
//     5. log       metrics.jsonl with its alarms, the rollouts as Parquet, the stopping rules
//     6. eval / save (the book every GRPO trainer keeps: run-book.ts)
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
  /** With load_best_model_at_end: the checkpoint of the best evaluation, and its metric. */
  bestCheckpoint?: string;
  bestMetric?: number;
}

/** One run of the agent program: its question, its recorded calls and answer, why it failed. */
interface ProgramRun {
  row: SampleRow;
  /** The question's index in the batch (its GRPO group). */
  q: number;
  recorded: RecordedRollout;
  answer: string;
  failure: ReturnType<typeof thrownFailure> | undefined;
}

/** The batch's runs, scored: the rollouts, as trajectories of every call, and their failures. */
interface ScoredRuns extends StepRollouts {
  rollouts: RecordedRollout[];
  trajectories: Trajectory[];
  /** The reward function's results, for the runs it scored (those that posted no reward). */
  results: RewardResult<object>[];
  failures: RolloutFailures;
}

/** GRPO keys this trainer cannot act on, and why. */
const UNUSED_KEYS = ['max_turns', 'top_k', 'generate_workers', 'max_staleness'] as const;
/** skip_memory_check would skip nothing here: set, it is refused rather than ignored. */
const NO_MEMORY_CHECK =
  'the gateway trainers run no memory preflight (GRPOTrainer, SFTTrainer, flowgrpo train, generate and serve do)';
const UNUSED_WHY =
  'MultiRoleGRPOTrainer does not use these keys: the agent program decides its own turns, and the roles sample on the gateway (no top_k, no generate workers, no rollouts sampled ahead of the update)';

/** A role's name is its folder in checkpoints and adapters/. */
const FOLDER_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

export class MultiRoleGRPOTrainer {
  readonly config: GRPOConfig;
  readonly #o: MultiRoleGRPOTrainerOptions;
  readonly #bestModel: BestModelRule | undefined;

  constructor(o: MultiRoleGRPOTrainerOptions) {
    this.config = parseConfig(GRPOConfigSchema, o.config, 'GRPO config');
    refuseUnusedKeys(this.config, 'GRPO config', UNUSED_KEYS, UNUSED_WHY);
    refuseUnusedKeys(this.config, 'GRPO config', ['skip_memory_check'], NO_MEMORY_CHECK);
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
    // Refused before output_dir, as GRPOTrainer does (hostRoles opens what was checked here).
    checkArtifactsSamplingWeights(
      this.config.share_sampling_weights,
      readArtifactsManifest(o.artifacts),
    );
    this.#bestModel = bestModelRule(this.config, {
      name: 'MultiRoleGRPOTrainer',
      hasEvalDataset: (o.evalDataset?.length ?? 0) > 0,
    });
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

  // ---- the loop: rollout → score → update (per role) → metrics → log → eval / save ----------
  async #loop(
    life: RunLifecycle,
    gateway: PolicyGateway,
    roles: ServedRole[],
    state: TrainerState,
  ): Promise<MultiRoleTrainResult> {
    const c = this.config;
    const o = this.#o;
    const run = life.run;
    const questions = querySampler(o.trainDataset, c, state);
    const guards = new Map(
      roles.map((r) => [r.name, new NonFiniteGuard(c.max_nan_steps_in_a_row, () => {})]),
    );
    const book = new RunBook({
      config: c,
      run,
      state,
      save: (rotate) => this.#checkpoint(life, roles, state, rotate),
      ...(o.evalDataset && {
        evaluate: (name) => this.#evaluate(run, gateway, roles, name),
      }),
      ...(this.#bestModel && { bestModel: this.#bestModel }),
      title: 'Multi-role GRPO run',
      log: () => {},
      ...(o.onLog && { onLog: (r) => o.onLog!(r as Record<string, number>) }),
    });
    let stopped: MultiRoleTrainResult['stopped'] = 'max_steps';
    while (state.global_step < c.max_steps) {
      if (o.signal?.aborted) {
        stopped = 'aborted';
        break;
      }
      const step = book.startStep();
      const batch = state.batches;
      const rows = questions.take(state.global_step, batch, c.queries_per_step);

      // 1. Rollouts: Q questions × G runs of the agent program, at most rollout_concurrency at once.
      const runs = await this.#rolloutPhase(gateway, roles, rows, batch, step);
      if (!runs) {
        // Aborted mid-batch: the batch is dropped, the last finished step is checkpointed below.
        stopped = 'aborted';
        break;
      }
      // 2. Scores: the posted reward (or the reward function's), per role where posted.
      const scored = await this.#scorePhase(runs, batch, step);
      // 3. Every trained role's updates on its own calls, from the same step.
      const trained = await this.#updatePhase(roles, scored, book, guards, { batch, step });
      // 4. Metrics: the rollouts', then each trained role's under `<role>/` (step-record.ts).
      const record = stepRecord({
        config: c,
        step: state.global_step,
        epoch: questions.epochs,
        trained: {
          rollouts: scored,
          roles: trained,
          calls: callsPerRole(roles, scored.rollouts),
        },
        ...(o.reward &&
          scored.results.length > 0 && {
            rewards: { results: scored.results, name: o.reward.name },
          }),
        failures: scored.failures,
        questions: questions.metrics,
        counters: book.counters,
        seconds: step.seconds,
      });
      // 5. Log (alarms, the stopping rules), write the rollouts; 6. evaluate and checkpoint.
      await book.log(record, scored.failures, scored.trajectories, step);
      await book.evalSave(step);
    }
    const end = await book.finish(stopped);
    const adapters = await saveRoleAdapters(roles, run.path('adapters'));
    return {
      globalStep: state.global_step,
      metrics: run.readMetrics() as Record<string, number>[],
      adapters,
      checkpoint: end.checkpoint,
      report: end.report,
      stopped,
      ...(end.eval && { eval: end.eval }),
      ...(end.best && { bestCheckpoint: end.best.checkpoint, bestMetric: end.best.metric }),
    };
  }

  /** The batch's runs of the agent program; undefined when the run was aborted during them. */
  async #rolloutPhase(
    gateway: PolicyGateway,
    roles: readonly ServedRole[],
    rows: readonly SampleRow[],
    batch: number,
    step: StepClock,
  ): Promise<ProgramRun[] | undefined> {
    const c = this.config;
    const jobs = rolloutJobs(c.seed, batch, rows, c.num_generations);
    try {
      return await step.time('rollout', () =>
        mapConcurrent(jobs, c.rollout_concurrency, async ({ row, q, g, seed }) => ({
          row,
          q,
          ...(await this.#rollout(gateway, roles, row, `b${batch}.q${q}.g${g}`, seed)),
        })),
      );
    } catch (e) {
      if (!this.#o.signal?.aborted) throw e;
      return undefined;
    }
  }

  /**
   * Each run's score: the reward it posted, else the reward function's (a fault scores 0 and is
   * kept in the rollout's details), else 0; the runs as trajectories of every call.
   */
  async #scorePhase(runs: ProgramRun[], batch: number, step: StepClock): Promise<ScoredRuns> {
    const reward = this.#o.reward;
    const checked = await step.time('reward', () =>
      Promise.all(
        runs.map(({ row, recorded, answer }) =>
          recorded.reward === undefined && reward
            ? scoreChecked(reward, {
                question: row.question,
                groundTruth: row.result,
                finalAnswer: recorded.finalAnswer ?? answer,
              })
            : undefined,
        ),
      ),
    );
    const rewards = Float64Array.from(
      runs,
      ({ recorded }, k) => recorded.reward ?? checked[k]?.result.score ?? 0,
    );
    const trajectories = runs.map(({ row, q, recorded }, k) => {
      const error = checked[k]?.error;
      if (error) recorded.details = { ...recorded.details, rewardError: error };
      const t = rolloutTrajectory(recorded, {
        queryId: String(row.id),
        groupId: `batch-${batch}/q-${q}`,
        question: row.question,
        groundTruth: row.result,
      });
      t.reward = rewards[k]!;
      return t;
    });
    return {
      rollouts: runs.map((r) => r.recorded),
      trajectories,
      rewards,
      groups: Int32Array.from(runs, (r) => r.q),
      results: checked
        .filter((x): x is NonNullable<typeof x> => x !== undefined)
        .map((x) => x.result),
      failures: tallyFailures(runs.map((r) => r.failure)),
    };
  }

  /**
   * Every trained role takes the batch's num_iterations updates from the same step (updateRole:
   * scoreBatch → grpoUpdate); a batch no role could train on counts as one step without an
   * update (the book's rule).
   */
  async #updatePhase(
    roles: readonly ServedRole[],
    scored: ScoredRuns,
    book: RunBook,
    guards: ReadonlyMap<string, NonFiniteGuard>,
    o: { batch: number; step: StepClock },
  ): Promise<Record<string, PolicyStep>> {
    const trained: Record<string, PolicyStep> = {};
    for (const role of roles) {
      const p = await updateRole(role, scored.rollouts, scored.rewards, scored.groups, {
        config: this.config,
        step: book.state.global_step,
        guard: guards.get(role.name)!,
        batch: o.batch,
        clock: o.step,
      });
      if (p) trained[role.name] = p;
    }
    book.advance(roleSteps(trained), scored.failures);
    return trained;
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
    rotate: { limit: number; keep?: string },
  ): Promise<string> {
    const parts: Record<string, RoleCheckpointPart> = {};
    for (const role of roles)
      if (role.policy)
        parts[role.name] = {
          config: role.policy.config,
          lora: role.policy.lora!,
          state: await role.policy.exportState(),
        };
    return life.saveRolesCheckpoint({ roles: parts, trainer: state }, rotate);
  }

  /** One run of the agent program under rollout `id`; a failed run keeps the calls it made. */
  async #rollout(
    gateway: PolicyGateway,
    roles: readonly ServedRole[],
    row: SampleRow,
    id: string,
    seed: number,
  ): Promise<Omit<ProgramRun, 'row' | 'q'>> {
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
    return { recorded, answer, failure: failure && thrownFailure(failure) };
  }
}
