import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { ConfigError } from '@flowgrpo/core';
import {
  createPolicyGateway,
  type PolicyGateway,
  type PolicyGatewayOptions,
  type RecordedRollout,
  RolloutRecorder,
} from '@flowgrpo/gateway';
import type { DeviceRequest, Tokenizer } from '@flowgrpo/models';
import { readArtifactsManifest } from '@flowgrpo/models';
import {
  type GRPOConfig,
  type GRPOConfigInput,
  GRPOConfigSchema,
  learningRateAt,
  parseConfig,
  refuseUnusedKeys,
} from '../train/config.js';
import { NonFiniteGuard } from '../train/non-finite-guard.js';
import { writeReport } from '../train/report.js';
import type { RunDirectory } from '../train/run-dir.js';
import { RunLifecycle } from '../train/run-lifecycle.js';
import {
  type HostedRoles,
  hostRoles,
  type RoleSpec,
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
  onLog?: (record: Record<string, number>) => void;
  /** Also called for every rewarded rollout (e.g. to write it to a file). */
  onReward?: (rollout: RecordedRollout) => void;
}

/** GRPO keys this trainer cannot act on, and why. */
const UNUSED_KEYS = [
  'max_turns',
  'top_k',
  'eval_steps',
  'logging_steps',
  'save_steps',
  'save_total_limit',
  'resume_from_checkpoint',
  'success_threshold',
  'generate_workers',
  'overwrite_output_dir',
  'max_failed_rollout_steps',
] as const;
const UNUSED_WHY =
  "OnlineGRPOTrainer does not use these keys: the agents run their own rollouts (their turns, sampling and failures are theirs), it logs every update and saves the adapters and report.html when it closes (no checkpoints, resume or evaluation: the groups still filling live in the agents' rollouts, not in a checkpoint)";

/** The group of a rollout: the posted group_id, else the first call's prompt (the task). */
export function rolloutGroupKey(r: RecordedRollout): string {
  if (r.groupId !== undefined) return r.groupId;
  const first = r.calls[0];
  if (!first) return `rollout:${r.id}`;
  return `prompt:${createHash('sha256').update(first.promptTokens).digest('hex').slice(0, 16)}`;
}

export class OnlineGRPOTrainer {
  readonly config: GRPOConfig;
  readonly gateway: PolicyGateway;
  readonly roles: readonly ServedRole[];
  readonly metrics: Record<string, number>[] = [];
  /** Resolves once max_steps updates are done (the gateway keeps serving). */
  readonly finished: Promise<void>;
  readonly #o: OnlineGRPOTrainerOptions;
  readonly #served: HostedRoles;
  readonly #life: RunLifecycle;
  readonly #run: RunDirectory;
  readonly #filling = new Map<string, RecordedRollout[]>();
  readonly #complete: RecordedRollout[][] = [];
  #queue: Promise<void> = Promise.resolve();
  #step = 0;
  #batches = 0;
  readonly #guards: Map<string, NonFiniteGuard>;
  #finish!: () => void;
  #failure: unknown;

  private constructor(
    o: OnlineGRPOTrainerOptions,
    config: GRPOConfig,
    gateway: PolicyGateway,
    served: HostedRoles,
    life: RunLifecycle,
  ) {
    this.#o = o;
    this.config = config;
    this.gateway = gateway;
    this.roles = served.roles;
    this.#served = served;
    this.#life = life;
    this.#run = life.run;
    this.#guards = new Map(
      served.roles.map((r) => [
        r.name,
        new NonFiniteGuard(config.max_nan_steps_in_a_row, () => {}),
      ]),
    );
    this.finished = new Promise((r) => {
      this.#finish = r;
    });
  }

  /** Opens the roles and starts the gateway; training happens as rewards arrive. */
  static async start(o: OnlineGRPOTrainerOptions): Promise<OnlineGRPOTrainer> {
    const config = parseConfig(GRPOConfigSchema, o.config, 'GRPO config');
    refuseUnusedKeys(config, 'GRPO config', UNUSED_KEYS, UNUSED_WHY);
    if (!Object.values(o.roles).some((r) => r.trainable))
      throw new ConfigError('no role is trainable', { key: 'roles' });
    // output_dir first (its lock, HF's rules), before the roles' sessions open; held until close.
    const life = await RunLifecycle.open({
      ...config,
      trainer: 'online-grpo',
      modelConfig: readArtifactsManifest(o.artifacts).config,
    });
    let served: HostedRoles;
    try {
      served = await hostRoles({
        artifactsDir: o.artifacts,
        tokenizer: o.tokenizer,
        roles: o.roles,
        config,
        device: o.device ?? 'cpu',
        baseModel: o.baseModel ?? 'base',
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
      self = new OnlineGRPOTrainer(o, config, gateway, served, life);
      self.#run.writeJson('config.json', { trainer: 'online-grpo', ...config });
      return self;
    } catch (e) {
      await served.close();
      life.close();
      throw e;
    }
  }

  /** Optimizer updates done. */
  get step(): number {
    return this.#step;
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
    if (this.#step >= this.config.max_steps || r.calls.length === 0) return;
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

  async #update(batch: RecordedRollout[][]): Promise<void> {
    if (this.#failure || this.#step >= this.config.max_steps) return;
    const c = this.config;
    try {
      const rollouts = batch.flat();
      const rewards = rollouts.map((r) => r.reward ?? 0);
      const groups = batch.flatMap((g, i) => g.map(() => i));
      const record: Record<string, number> = {
        step: this.#step + 1,
        reward: rewards.reduce((a, b) => a + b, 0) / rewards.length,
        rollouts: rollouts.length,
        learning_rate: learningRateAt(this.#step + 1, c),
      };
      // Every trained role takes num_iterations updates from the same step (GRPOTrainer's
      // update, grpo-update.ts); rollouts sampled before an earlier update are importance-weighted.
      let steps = 0;
      for (const role of this.roles) {
        const u = await updateRole(role, rollouts, rewards, groups, {
          config: c,
          step: this.#step,
          guard: this.#guards.get(role.name)!,
          batch: this.#batches,
          importanceCorrection: true,
        });
        if (u) {
          Object.assign(record, u.metrics);
          steps = Math.max(steps, u.steps);
        }
      }
      this.#batches++;
      this.#step += Math.max(1, steps);
      record.step = this.#step;
      this.metrics.push(record);
      this.#run.logMetrics(record);
      this.#o.onLog?.(record);
      if (this.#step >= c.max_steps) {
        await this.saveAdapters();
        this.#finish();
      }
    } catch (e) {
      this.#failure = e;
      this.#finish();
    }
  }

  /** Saves every trained role's adapter (PEFT) under output_dir/adapters/<role>. */
  saveAdapters(): Promise<Record<string, string>> {
    return saveRoleAdapters(this.roles, join(this.#run.dir, 'adapters'));
  }

  /** report.html of the updates so far (metrics.jsonl's curves, per role). */
  writeReport(): Promise<string> {
    const run = this.#run;
    return run.guard(join(run.dir, 'report.html'), () =>
      writeReport(run.dir, { title: `Online GRPO run — ${run.dir}`, metrics: run.readMetrics() }),
    );
  }

  /**
   * Waits for a running update, saves the adapters and report.html, closes the gateway and the
   * sessions.
   */
  async close(): Promise<Record<string, string>> {
    await this.#queue;
    const adapters = await this.saveAdapters();
    await this.writeReport();
    await this.gateway.close();
    await this.#served.close();
    this.#life.close();
    return adapters;
  }
}
