import { join, resolve } from 'node:path';
import { ConfigError, createRng, type SampleRow } from '@flowgrpo/core';
import type { RecordedRollout } from '@flowgrpo/gateway';
import {
  type AgentProgram,
  createPolicyGateway,
  type PolicyGateway,
  type PolicyGatewayOptions,
  runAgentProgram,
} from '@flowgrpo/gateway';
import type { DeviceRequest, Tokenizer } from '@flowgrpo/models';
import { readArtifactsManifest } from '@flowgrpo/models';
import type { RewardFunction } from '@flowgrpo/reward';
import { scoreChecked } from '../train/checked-reward.js';
import {
  checkGatewayConfig,
  type GRPOConfig,
  type GRPOConfigInput,
  GRPOConfigSchema,
  learningRateAt,
  parseConfig,
} from '../train/config.js';
import { EpochCursor } from '../train/data-order.js';
import {
  RolloutsFailedError,
  rolloutFailureMetrics,
  tallyFailures,
  thrownFailure,
} from '../train/rollout-failures.js';
import { RunLifecycle } from '../train/run-lifecycle.js';
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
//       acted, rows from that role's calls only (one row per continuity chain), old logprobs,
//       one AdamW update with the role's own optimizer state (a LoraPolicy per role)
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
}

export class MultiRoleGRPOTrainer {
  readonly config: GRPOConfig;
  readonly #o: MultiRoleGRPOTrainerOptions;

  constructor(o: MultiRoleGRPOTrainerOptions) {
    this.config = parseConfig(GRPOConfigSchema, o.config, 'GRPO config');
    checkGatewayConfig(this.config, 'GRPO config');
    this.#o = o;
    if (!Object.values(o.roles).some((r) => r.trainable))
      throw new ConfigError('no role is trainable', { key: 'roles' });
    if (o.trainDataset.length === 0)
      throw new ConfigError('the train dataset is empty', { key: 'trainDataset' });
  }

  async train(): Promise<MultiRoleTrainResult> {
    const c = this.config;
    const o = this.#o;
    // output_dir first (its lock, HF's rules), before the roles' sessions open.
    const life = await RunLifecycle.open({
      ...c,
      trainer: 'multi-role-grpo',
      modelConfig: readArtifactsManifest(o.artifacts).config,
    });
    try {
      return await this.#serveAndTrain();
    } finally {
      life.close();
    }
  }

  async #serveAndTrain(): Promise<MultiRoleTrainResult> {
    const c = this.config;
    const o = this.#o;
    const served = await hostRoles({
      artifactsDir: o.artifacts,
      tokenizer: o.tokenizer,
      roles: o.roles,
      config: c,
      device: o.device ?? 'cpu',
    });
    let gateway: PolicyGateway | undefined;
    try {
      gateway = await createPolicyGateway({
        ...o.gateway,
        host: served.host,
        rolloutSampling: trainedRoleSampling(served.roles, this.config),
      });
      return await this.#loop(gateway, served.roles);
    } finally {
      await gateway?.close();
      await served.close();
    }
  }

  async #loop(gateway: PolicyGateway, roles: ServedRole[]): Promise<MultiRoleTrainResult> {
    const c = this.config;
    const o = this.#o;
    const G = c.num_generations;
    const cursor = new EpochCursor(o.trainDataset.length, c.seed, { epoch: 0, data_cursor: 0 });
    const metrics: Record<string, number>[] = [];
    let step = 0;
    // Steps in a row whose every rollout failed (max_failed_rollout_steps, at its default).
    let failedSteps = 0;
    for (let batch = 0; step < c.max_steps && !o.signal?.aborted; batch++) {
      const rows = cursor.take(c.queries_per_step).map((i) => o.trainDataset[i]!);
      const base = createRng(`${c.seed}:rollouts:${batch}`).nextUint32();
      const jobs = rows.flatMap((row, q) => Array.from({ length: G }, (_, g) => ({ row, q, g })));
      const rollouts: RecordedRollout[] = new Array(jobs.length);
      const failures: (ReturnType<typeof thrownFailure> | undefined)[] = new Array(jobs.length);
      const scored: number[] = new Array(jobs.length);
      let next = 0;
      const worker = async () => {
        for (let k = next++; k < jobs.length; k = next++) {
          const { row, q, g } = jobs[k]!;
          const id = `b${batch}.q${q}.g${g}`;
          // A failed rollout keeps the calls it made, scored as its reward says (0 if none).
          const {
            recorded: rec,
            answer,
            failure,
          } = await runAgentProgram(
            gateway,
            o.program,
            id,
            { seed: base + q * G + g },
            {
              question: row.question,
              model: roles.find((r) => r.spec.trainable)!.name,
              apiKey: o.gateway?.apiKey ?? 'EMPTY',
              seed: base + q * G + g,
              groundTruth: row.result,
              ...(o.signal && { signal: o.signal }),
            },
          );
          rollouts[k] = rec;
          failures[k] = failure && thrownFailure(failure);
          // A reward function's fault scores 0 and is kept in the rollout's details.
          const checked =
            rec.reward === undefined && o.reward
              ? await scoreChecked(o.reward, {
                  question: row.question,
                  groundTruth: row.result,
                  finalAnswer: rec.finalAnswer ?? answer,
                })
              : undefined;
          if (checked?.error) rec.details = { ...rec.details, rewardError: checked.error };
          scored[k] = rec.reward ?? checked?.result.score ?? 0;
        }
      };
      await Promise.all(
        Array.from({ length: Math.min(c.rollout_concurrency, jobs.length) }, worker),
      );

      const failed = tallyFailures(failures);
      const record: Record<string, number> = {
        step: step + 1,
        reward: scored.reduce((a, b) => a + b, 0) / scored.length,
        ...rolloutFailureMetrics(failed),
      };
      const groups = jobs.map((j) => j.q);
      const lr = learningRateAt(step + 1, c);
      for (const role of roles) {
        record[`${role.name}/calls`] =
          rollouts.reduce((s, r) => s + r.calls.filter((x) => x.model === role.name).length, 0) /
          rollouts.length;
        const m = await updateRole(role, rollouts, scored, groups, c, lr);
        if (m) Object.assign(record, m);
      }
      step++;
      metrics.push(record);
      o.onLog?.(record);
      failedSteps = failed.failed === failed.total ? failedSteps + 1 : 0;
      if (failedSteps >= c.max_failed_rollout_steps)
        throw new RolloutsFailedError(
          `every rollout of the last ${failedSteps} steps failed (max_failed_rollout_steps: ${c.max_failed_rollout_steps}); last at step ${step}`,
          failed,
        );
    }
    const adapters = await saveRoleAdapters(roles, join(resolve(c.output_dir), 'adapters'));
    return { globalStep: step, metrics, adapters };
  }
}
