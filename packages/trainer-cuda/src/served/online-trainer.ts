import { createHash } from 'node:crypto';
import { resolve } from 'node:path';
import { ConfigError, type Trajectory } from '@flowgrpo/core';
import {
  createPolicyGateway,
  type PolicyGateway,
  type PolicyGatewayOptions,
  type RecordedRollout,
  RolloutRecorder,
  rolloutTrajectory,
} from '@flowgrpo/gateway';
import type { DeviceRequest, Tokenizer } from '@flowgrpo/models';
import { readArtifactsManifest } from '@flowgrpo/models';
import { type RolloutFailures, tallyFailures } from '../eval/rollout-failures.js';
import { bestModelRule } from '../run/best-model.js';
import type { TrainerState } from '../run/checkpoint.js';
import {
  checkArtifactsSamplingWeights,
  type GRPOConfig,
  type GRPOConfigInput,
  GRPOConfigSchema,
  parseConfig,
  refuseUnusedKeys,
} from '../run/config.js';
import type { RoleCheckpointPart } from '../run/roles-checkpoint.js';
import type { RunDirectory } from '../run/run-dir.js';
import { RunLifecycle } from '../run/run-lifecycle.js';
import type { RunLock } from '../run/run-lock.js';
import { freshGRPOState } from '../trainers/grpo-state.js';
import { RunBook } from '../trainers/run-book.js';
import { type PolicyStep, type StepRollouts, stepRecord } from '../trainers/step-record.js';
import { NonFiniteGuard } from '../update/non-finite-guard.js';
import {
  callsPerRole,
  type HostedRoles,
  hostRoles,
  type RoleSpec,
  roleSteps,
  type ServedRole,
  saveRoleAdapters,
  trainedRoleSampling,
  updateRole,
} from './role-policies.js';

// Training driven by the agents themselves (`flowgrpo serve --train`): the gateway serves the
// roles; agents — any process, any language — run episodes against it and post each episode's
// reward to /v1/rollouts/{id}/reward with the task it solved (`group_id`). Rewarded rollouts
// gather by group; a group is complete with G = num_generations rollouts, and every
// queries_per_step complete groups make the GRPO update of each trained role (GRPOTrainer's
// update: num_iterations optimizer steps, the non-finite guard), after which the roles serve
// their new adapters.
//
// Rollouts that were sampled before an update and rewarded after it are trained with truncated
// importance weights min(π_now / π_sampled, cap) (TRL's vllm_importance_sampling_correction), so
// agents never have to wait for the trainer. Updates run on the server's thread: requests wait
// while one runs.
//
// The run is MultiRoleGRPOTrainer's (run-lifecycle.ts, roles-checkpoint.ts): output_dir's lock
// and HF's fresh / resume / overwrite rules, checkpoint-<step>/ with a folder per trained role
// (adapter + AdamW moments) and trainer_state.json, written at update boundaries every save_steps,
// at max_steps and on close — the book every GRPO trainer keeps (run-book.ts), with GRPOTrainer's
// metrics of the rollouts and of each trained role under `<role>/` (step-record.ts). The groups still filling (and complete groups short of a batch) are
// rollouts of the agents that posted them: they are in no checkpoint, and a resumed run starts
// gathering afresh. Everything an update depends on besides its rollouts — the adapters, the
// optimizer moments, the step, the batch count — is in the checkpoint, so a resumed run fed the
// same groups makes the same updates.

export interface OnlineGRPOTrainerOptions {
  /** GRPOTrainer's keys: num_generations (G per group), queries_per_step (groups per update), max_steps, … */
  config: GRPOConfigInput;
  /** Artifacts with LoRA decode, logprobs and train_step graphs. */
  artifacts: string;
  tokenizer: Tokenizer;
  /** Served roles (= model names); at least one trainable. */
  roles: Record<string, RoleSpec>;
  /** The base model (no adapter) is served under this name too (default 'base'). */
  baseModel?: string;
  device?: DeviceRequest;
  gateway?: Omit<PolicyGatewayOptions, 'host' | 'recorder'>;
  /** A lock on output_dir the caller already holds (the CLI takes it before building artifacts). */
  lock?: RunLock;
  /** Called with each logged record (every logging_steps updates and the last). */
  onLog?: (record: Record<string, number>) => void;
  /** Also called for every rewarded rollout (e.g. to write it to a file). */
  onReward?: (rollout: RecordedRollout) => void;
  /** Lifecycle lines: resuming, overwriting. */
  log?: (line: string) => void;
}

/** GRPO keys this trainer cannot act on, and why. */
const UNUSED_KEYS = [
  'max_turns',
  'top_k',
  'generate_workers',
  'max_failed_rollout_steps',
  'max_staleness',
] as const;
/** skip_memory_check would skip nothing here: set, it is refused rather than ignored. */
const NO_MEMORY_CHECK =
  'the gateway trainers run no memory preflight (GRPOTrainer, SFTTrainer, flowgrpo train, generate and serve do)';
const UNUSED_WHY =
  'OnlineGRPOTrainer does not use these keys: the agents run their own rollouts (their turns, sampling on the gateway, when they run and failures are theirs; a failed episode is one the agent does not reward)';

/** A role's name is its folder in checkpoints and adapters/ (as MultiRoleGRPOTrainer's). */
const FOLDER_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

/** The group of a rollout: the posted group_id, else the first call's prompt (the task). */
export function rolloutGroupKey(r: RecordedRollout): string {
  if (r.groupId !== undefined) return r.groupId;
  const first = r.calls[0];
  if (!first) return `rollout:${r.id}`;
  return `prompt:${createHash('sha256').update(first.promptTokens).digest('hex').slice(0, 16)}`;
}

/** Refuses what this trainer cannot do, before output_dir or any session is opened. */
function checkOptions(c: GRPOConfig, roles: Record<string, RoleSpec>): void {
  refuseUnusedKeys(c, 'GRPO config', UNUSED_KEYS, UNUSED_WHY);
  refuseUnusedKeys(c, 'GRPO config', ['skip_memory_check'], NO_MEMORY_CHECK);
  // Evaluation needs tasks the trainer runs itself; here the agents choose the tasks.
  if (c.eval_steps > 0)
    throw new ConfigError(
      `GRPO config: eval_steps = ${c.eval_steps}: OnlineGRPOTrainer has no dataset of its own to evaluate on (the agents choose the tasks and run the episodes)`,
      { key: 'eval_steps' },
      {
        hint: 'remove eval_steps; evaluate a saved checkpoint with flowgrpo eval --adapter <role>=<output_dir>/checkpoint-<step>/<role>, or have your agents run held-out tasks outside a rollout',
      },
    );
  // load_best_model_at_end needs evaluations this trainer cannot run (refused with the reason).
  bestModelRule(c, { name: 'OnlineGRPOTrainer', hasEvalDataset: false });
  if (!Object.values(roles).some((r) => r.trainable))
    throw new ConfigError('no role is trainable', { key: 'roles' });
  for (const [name, r] of Object.entries(roles))
    if (r.trainable && !FOLDER_NAME.test(name))
      throw new ConfigError(
        `role '${name}': a trained role's name is its folder in checkpoints and adapters/`,
        { key: 'roles' },
        { hint: 'name roles with letters, digits, dot, dash and underscore' },
      );
}

export class OnlineGRPOTrainer {
  readonly config: GRPOConfig;
  readonly gateway: PolicyGateway;
  readonly roles: readonly ServedRole[];
  /** Resolves once max_steps updates are done (the gateway keeps serving). */
  readonly finished: Promise<void>;
  readonly #served: HostedRoles;
  readonly #life: RunLifecycle;
  readonly #run: RunDirectory;
  readonly #state: TrainerState;
  readonly #book: RunBook;
  readonly #filling = new Map<string, RecordedRollout[]>();
  readonly #complete: RecordedRollout[][] = [];
  #queue: Promise<void> = Promise.resolve();
  readonly #guards: Map<string, NonFiniteGuard>;
  #finish!: () => void;
  /** max_steps reached: the book is closed (final checkpoint, report). */
  #done = false;
  #failure: unknown;
  #closed = false;

  private constructor(
    o: OnlineGRPOTrainerOptions,
    config: GRPOConfig,
    gateway: PolicyGateway,
    served: HostedRoles,
    life: RunLifecycle,
    state: TrainerState,
  ) {
    this.config = config;
    this.gateway = gateway;
    this.roles = served.roles;
    this.#served = served;
    this.#life = life;
    this.#run = life.run;
    this.#state = state;
    this.#book = new RunBook({
      config,
      run: life.run,
      state,
      save: ({ limit }) => this.#save(limit),
      title: 'Online GRPO run',
      log: o.log ?? (() => {}),
      ...(o.onLog && { onLog: (r) => o.onLog!(r as Record<string, number>) }),
      ...(life.resumedRoles && { resumedFrom: life.resumedRoles.dir }),
    });
    this.#guards = new Map(
      served.roles.map((r) => [
        r.name,
        new NonFiniteGuard(config.max_nan_steps_in_a_row, o.log ?? (() => {})),
      ]),
    );
    this.finished = new Promise((r) => {
      this.#finish = r;
    });
    if (state.global_step >= config.max_steps) this.#finish();
  }

  /**
   * Opens output_dir (resuming its checkpoint when asked) and the roles, and starts the gateway;
   * training happens as rewards arrive.
   */
  static async start(o: OnlineGRPOTrainerOptions): Promise<OnlineGRPOTrainer> {
    const config = parseConfig(GRPOConfigSchema, o.config, 'GRPO config');
    checkOptions(config, o.roles);
    checkArtifactsSamplingWeights(
      config.share_sampling_weights,
      readArtifactsManifest(o.artifacts),
    );
    // output_dir first (its lock, HF's rules, the checkpoint to resume), before the roles'
    // sessions open; held until close.
    const life = await RunLifecycle.open({
      ...config,
      trainer: 'online-grpo',
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
      ...(o.lock && { lock: o.lock }),
      ...(o.log && { log: o.log }),
    });
    const ck = life.resumedRoles;
    const state: TrainerState = ck
      ? { ...ck.trainer, config: { ...config } }
      : freshGRPOState(config);
    state.rng = {
      seed: config.seed,
      scheme:
        'adapters: PEFT init from (seed, role); rollouts: sampled by the agents (their seeds)',
    };
    let served: HostedRoles;
    try {
      served = await hostRoles({
        artifactsDir: o.artifacts,
        tokenizer: o.tokenizer,
        roles: o.roles,
        config,
        device: o.device ?? 'cpu',
        baseModel: o.baseModel ?? 'base',
        ...(ck && { resume: ck.roles }),
      });
    } catch (e) {
      life.close();
      throw e;
    }
    try {
      let self: OnlineGRPOTrainer | undefined;
      const recorder = new RolloutRecorder({
        onReward: (r) => {
          o.onReward?.(r);
          if (self) self.#rewarded(r);
        },
      });
      const gateway = await createPolicyGateway({
        ...o.gateway,
        host: served.host,
        recorder,
        rolloutSampling: trainedRoleSampling(served.roles, config),
      });
      self = new OnlineGRPOTrainer(o, config, gateway, served, life, state);
      self.#run.writeJson('config.json', {
        trainer: 'online-grpo',
        ...config,
        artifacts: resolve(o.artifacts),
        roles: Object.fromEntries(
          Object.entries(o.roles).map(([k, r]) => [k, { trainable: r.trainable }]),
        ),
      });
      return self;
    } catch (e) {
      await served.close();
      life.close();
      throw e;
    }
  }

  /** Optimizer updates done (counting those of the run resumed). */
  get step(): number {
    return this.#state.global_step;
  }

  /** Every update's record, those of the run resumed included (trainer_state's log_history). */
  get metrics(): readonly Record<string, number>[] {
    return this.#state.log_history;
  }

  /** The latest checkpoint of this run (written, or resumed from). */
  get checkpoint(): string | undefined {
    return this.#book.checkpoint;
  }

  /** Rewarded rollouts per group still short of G. */
  pending(): Record<string, number> {
    return Object.fromEntries([...this.#filling].map(([k, v]) => [k, v.length]));
  }

  /** Resolves when no update is queued or running (rethrows an update's failure). */
  async idle(): Promise<void> {
    await this.#queue;
    if (this.#failure) throw this.#failure;
  }

  #rewarded(r: RecordedRollout): void {
    if (this.#closed || this.#state.global_step >= this.config.max_steps || r.calls.length === 0)
      return;
    const key = rolloutGroupKey(r);
    const group = [...(this.#filling.get(key) ?? []).filter((x) => x.id !== r.id), r];
    if (group.length < this.config.num_generations) {
      this.#filling.set(key, group);
      return;
    }
    this.#filling.delete(key);
    this.#complete.push(group);
    if (this.#complete.length >= this.config.queries_per_step) {
      const batch = this.#complete.splice(0, this.config.queries_per_step);
      this.#queue = this.#queue.then(() => this.#update(batch));
    }
  }

  // ---- an update: score → update (per role) → metrics → log → eval / save ---------------------
  async #update(batch: RecordedRollout[][]): Promise<void> {
    const c = this.config;
    const state = this.#state;
    const book = this.#book;
    if (this.#failure || state.global_step >= c.max_steps) return;
    try {
      const step = book.startStep();
      // 1. Scores: the rewards the agents posted, by group; the rollouts as trajectories.
      const scored = this.#score(batch);
      // 2. Every trained role takes num_iterations updates from the same step (GRPOTrainer's
      // update, grpo-update.ts); rollouts sampled before an earlier update are importance-weighted.
      const trained: Record<string, PolicyStep> = {};
      for (const role of this.roles) {
        const p = await updateRole(role, scored.rollouts, scored.rewards, scored.groups, {
          config: c,
          step: state.global_step,
          guard: this.#guards.get(role.name)!,
          batch: state.batches,
          clock: step,
          importanceCorrection: true,
        });
        if (p) trained[role.name] = p;
      }
      book.advance(roleSteps(trained), scored.failures);
      // 3. Metrics: the rollouts', then each trained role's under `<role>/` (step-record.ts).
      const record = {
        ...stepRecord({
          config: c,
          step: state.global_step,
          trained: {
            rollouts: scored,
            roles: trained,
            calls: callsPerRole(this.roles, scored.rollouts),
          },
          failures: scored.failures,
          counters: book.counters,
          seconds: step.seconds,
        }),
        rollouts: scored.rollouts.length,
      };
      // 4. Log (alarms, alarms.stop_on), write the rollouts; 5. checkpoint.
      await book.log(record, scored.failures, scored.trajectories, step);
      await book.evalSave(step);
      if (state.global_step >= c.max_steps) {
        await book.finish('max_steps');
        this.#done = true;
        await this.saveAdapters();
        this.#finish();
      }
    } catch (e) {
      this.#failure = e;
      this.#finish();
    }
  }

  /** A batch of complete groups as scored rollouts: the posted rewards, a group per task. */
  #score(batch: RecordedRollout[][]): StepRollouts & {
    rollouts: RecordedRollout[];
    trajectories: Trajectory[];
    failures: RolloutFailures;
  } {
    const rollouts = batch.flat();
    const groups = Int32Array.from(batch.flatMap((g, i) => g.map(() => i)));
    const trajectories = rollouts.map((r, k) => {
      const t = rolloutTrajectory(r, {
        queryId: rolloutGroupKey(r),
        groupId: `batch-${this.#state.batches}/q-${groups[k]}`,
      });
      t.reward = r.reward ?? 0;
      return t;
    });
    return {
      rollouts,
      trajectories,
      rewards: Float64Array.from(rollouts, (r) => r.reward ?? 0),
      groups,
      // An agent's failed episode is its own, one it does not reward: none reaches the trainer.
      failures: tallyFailures(rollouts.map(() => undefined)),
    };
  }

  /** checkpoint-<step>: every trained role's adapter and optimizer state, and the run's state. */
  async #save(limit: number): Promise<string> {
    const parts: Record<string, RoleCheckpointPart> = {};
    for (const role of this.roles)
      if (role.policy)
        parts[role.name] = {
          config: role.policy.config,
          lora: role.policy.lora!,
          state: await role.policy.exportState(),
        };
    return this.#life.saveRolesCheckpoint({ roles: parts, trainer: this.#state }, { limit });
  }

  /** Saves every trained role's adapter (PEFT) under output_dir/adapters/<role>. */
  saveAdapters(): Promise<Record<string, string>> {
    return saveRoleAdapters(this.roles, this.#run.path('adapters'));
  }

  /** report.html of the updates so far (metrics.jsonl's curves, per role; the last rollouts). */
  writeReport(): Promise<string> {
    return this.#book.writeReport();
  }

  /**
   * Stops training (rewards posted from now on are not gathered) and waits for a running update;
   * then checkpoints the last update unless it is saved already, saves the adapters and
   * report.html, and closes the gateway, the sessions and output_dir's lock. When an update
   * failed, nothing more is saved (the checkpoints so far stay) and its error is thrown once
   * everything is closed.
   */
  async close(): Promise<Record<string, string>> {
    this.#closed = true;
    try {
      await this.#queue;
      if (this.#failure) throw this.#failure;
      // Stopped before max_steps: the book's end (no checkpoint before the first update).
      if (!this.#done) {
        if (this.#state.global_step > 0) await this.#book.finish('aborted');
        else await this.#book.writeReport();
      }
      return await this.saveAdapters();
    } finally {
      await this.gateway.close();
      await this.#served.close();
      this.#life.close();
    }
  }
}
