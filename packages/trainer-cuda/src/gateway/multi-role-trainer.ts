import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { ConfigError, createRng, type SampleRow } from '@flowgrpo/core';
import { computeAdvantages, type LossAggregation } from '@flowgrpo/grpo';
import type { RewardFunction } from '@flowgrpo/reward';
import { DecoderArtifacts, readArtifactsManifest } from '../artifacts/decoder-artifacts.js';
import { LocalPolicyEngine } from '../generation/local-policy-engine.js';
import {
  initLoraParams,
  type LoraParams,
  loadLoraAdapter,
  saveLoraAdapter,
} from '../lora/lora-weights.js';
import type { DeviceRequest } from '../runtime/devices.js';
import type { Tokenizer } from '../tokenizers/tokenizer.js';
import { type TrainRow, targetsOf } from '../train/collate.js';
import {
  type GRPOConfig,
  type GRPOConfigInput,
  GRPOConfigSchema,
  learningRateAt,
  parseConfig,
  policyOptions,
} from '../train/config.js';
import { EpochCursor } from '../train/data-order.js';
import { aggregationWeights, LoraPolicy } from '../train/lora-policy.js';
import { createPolicyGateway, type PolicyGateway, type PolicyGatewayOptions } from './gateway.js';
import type { AgentProgram } from './gateway-agent.js';
import { LocalPolicyHost } from './policy-host.js';
import { type CallChain, chainCalls, type RecordedRollout } from './recorder.js';

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

export interface RoleSpec {
  /** Train this role's adapter (true) or serve it frozen (false). */
  trainable: boolean;
  /** Adapter to start from (PEFT folder or matrices). Default: trained → PEFT init, frozen → base. */
  adapter?: string | LoraParams;
}

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

const AGGREGATION: Record<GRPOConfig['loss_type'], LossAggregation> = {
  grpo: 'seq-mean-token-mean',
  dapo: 'token-mean',
  bnpo: 'token-mean',
  dr_grpo: 'seq-sum-norm',
  flow: 'flow',
};

/** One training row per chain: prompt, then completions (trainable) and observations between. */
export function chainRow(
  chain: CallChain,
  advantage: number,
  trajectory: number,
  turn: number,
): TrainRow {
  const last = chain.calls.at(-1)!;
  const n = last.promptTokens.length + last.completionTokens.length;
  const tokens = new Int32Array(n);
  const mask = new Uint8Array(n);
  const logprobs = new Float32Array(n).fill(Number.NaN);
  for (const c of chain.calls) {
    // Each call's prompt is a prefix of the last call's prompt + completion (a chain).
    tokens.set(c.promptTokens, 0);
    const at = c.promptTokens.length;
    tokens.set(c.completionTokens, at);
    mask.fill(1, at, at + c.completionTokens.length);
    logprobs.set(c.logprobs, at);
  }
  return { tokens, mask, logprobs, advantage, trajectory, turn };
}

interface Role {
  name: string;
  spec: RoleSpec;
  engine: LocalPolicyEngine;
  policy?: LoraPolicy;
}

export class MultiRoleGRPOTrainer {
  readonly config: GRPOConfig;
  readonly #o: MultiRoleGRPOTrainerOptions;

  constructor(o: MultiRoleGRPOTrainerOptions) {
    this.config = parseConfig(GRPOConfigSchema, o.config, 'GRPO config');
    this.#o = o;
    if (Object.keys(o.roles).length === 0)
      throw new ConfigError('give at least one role', { key: 'roles' });
    if (!Object.values(o.roles).some((r) => r.trainable))
      throw new ConfigError('no role is trainable', { key: 'roles' });
    if (o.trainDataset.length === 0)
      throw new ConfigError('the train dataset is empty', { key: 'trainDataset' });
  }

  async train(): Promise<MultiRoleTrainResult> {
    const c = this.config;
    const o = this.#o;
    const manifest = readArtifactsManifest(o.artifacts);
    if (!manifest.lora)
      throw new ConfigError(`${o.artifacts} has no LoRA inputs; build it with a LoRA config`, {
        key: 'artifacts',
      });
    const device = o.device ?? 'cpu';
    const artifacts = await DecoderArtifacts.open(o.artifacts, { graphs: ['decode'], device });
    const host = await LocalPolicyHost.open({ artifacts, tokenizer: o.tokenizer });
    const roles: Role[] = [];
    let gateway: PolicyGateway | undefined;
    try {
      for (const [name, spec] of Object.entries(o.roles)) {
        const params =
          typeof spec.adapter === 'string'
            ? (await loadLoraAdapter(spec.adapter, manifest.config)).params
            : (spec.adapter ??
              (spec.trainable
                ? initLoraParams(manifest.config, manifest.lora, `${c.seed}:lora:${name}`)
                : undefined));
        const engine = new LocalPolicyEngine({
          artifacts,
          tokenizer: o.tokenizer,
          model: name,
          maxBatchSize: Math.max(c.num_generations, c.rollout_concurrency),
        });
        engine.generator.setLora(params);
        const policy =
          spec.trainable && params
            ? await LoraPolicy.open({ artifacts: o.artifacts, params, device, ...policyOptions(c) })
            : undefined;
        host.serve(name, engine);
        roles.push({ name, spec, engine, ...(policy && { policy }) });
      }
      gateway = await createPolicyGateway({ ...o.gateway, host });
      return await this.#loop(gateway, roles);
    } finally {
      await gateway?.close();
      for (const r of roles) await r.policy?.release();
      await host.close();
      await artifacts.release();
    }
  }

  async #loop(gateway: PolicyGateway, roles: Role[]): Promise<MultiRoleTrainResult> {
    const c = this.config;
    const o = this.#o;
    const G = c.num_generations;
    const cursor = new EpochCursor(o.trainDataset.length, c.seed, { epoch: 0, data_cursor: 0 });
    const metrics: Record<string, number>[] = [];
    let step = 0;
    for (let batch = 0; step < c.max_steps && !o.signal?.aborted; batch++) {
      const rows = cursor.take(c.queries_per_step).map((i) => o.trainDataset[i]!);
      const base = createRng(`${c.seed}:rollouts:${batch}`).nextUint32();
      const jobs = rows.flatMap((row, q) => Array.from({ length: G }, (_, g) => ({ row, q, g })));
      const rollouts: RecordedRollout[] = new Array(jobs.length);
      const scored: number[] = new Array(jobs.length);
      let next = 0;
      const worker = async () => {
        for (let k = next++; k < jobs.length; k = next++) {
          const { row, q, g } = jobs[k]!;
          const id = `b${batch}.q${q}.g${g}`;
          const unbind = gateway.bindRollout(id, { seed: base + q * G + g });
          let answer = '';
          try {
            const out = await o.program({
              baseURL: gateway.rolloutBaseURL(id),
              rolloutId: id,
              question: row.question,
              model: roles.find((r) => r.spec.trainable)!.name,
              apiKey: o.gateway?.apiKey ?? 'EMPTY',
              headers: {},
              seed: base + q * G + g,
              groundTruth: row.result,
              ...(o.signal && { signal: o.signal }),
            });
            answer = typeof out === 'string' ? out : out.answer;
            if (typeof out !== 'string' && out.reward !== undefined)
              gateway.recorder.setReward(id, { reward: out.reward });
          } catch (e) {
            if (o.signal?.aborted) throw e;
          } finally {
            unbind();
          }
          const rec = gateway.recorder.take(id) ?? {
            id,
            calls: [],
            createdAt: Date.now(),
            inFlight: 0,
          };
          rollouts[k] = rec;
          scored[k] =
            rec.reward ??
            (o.reward
              ? (
                  await o.reward.score({
                    question: row.question,
                    groundTruth: row.result,
                    finalAnswer: rec.finalAnswer ?? answer,
                  })
                ).score
              : 0);
        }
      };
      await Promise.all(
        Array.from({ length: Math.min(c.rollout_concurrency, jobs.length) }, worker),
      );

      const record: Record<string, number> = {
        step: step + 1,
        reward: scored.reduce((a, b) => a + b, 0) / scored.length,
      };
      const lr = learningRateAt(step + 1, c);
      for (const role of roles) {
        const calls = rollouts.map((r) => r.calls.filter((x) => x.model === role.name));
        record[`${role.name}/calls`] = calls.reduce((s, x) => s + x.length, 0) / calls.length;
        if (!role.policy) continue;
        // Per-role rewards and advantages over the rollouts in which the role acted.
        const acted = calls.map((x, k) => ({ k, x })).filter((e) => e.x.length > 0);
        if (acted.length === 0) continue;
        const rewards = Float64Array.from(
          acted,
          ({ k }) => rollouts[k]!.roleRewards?.[role.name] ?? scored[k]!,
        );
        const groups = Int32Array.from(acted, ({ k }) => Math.floor(k / G));
        const adv = computeAdvantages(rewards, groups, { scale: c.scale_rewards });
        const trainRows: TrainRow[] = [];
        acted.forEach(({ x }, i) => {
          chainCalls(x).forEach((chain, t) => {
            trainRows.push(chainRow(chain, adv[i]!, i, t));
          });
        });
        const targets = targetsOf(trainRows);
        if (targets.count === 0) continue;
        const lp = {
          temperature: c.temperature,
          maxTokensPerMicrobatch: c.max_tokens_per_microbatch,
        };
        const old = await role.policy.logprobs(trainRows, targets, { ...lp, loraScale: 1 });
        const ref =
          c.beta !== 0
            ? await role.policy.logprobs(trainRows, targets, { ...lp, loraScale: 0 })
            : undefined;
        let mismatch = 0;
        for (let j = 0; j < targets.count; j++)
          mismatch = Math.max(mismatch, Math.abs(old[j]! - targets.sampleLogprob[j]!));
        const pgWeights = aggregationWeights(targets, AGGREGATION[c.loss_type], {
          maxLen: c.max_completion_length,
        });
        const u = await role.policy.update(
          trainRows,
          targets,
          { old, ...(ref && { ref }), pgWeights },
          {
            learningRate: lr,
            temperature: c.temperature,
            epsilonLow: c.epsilon,
            epsilonHigh: c.epsilon_high ?? c.epsilon,
            ...(c.clip_ratio_c !== undefined && { clipRatioC: c.clip_ratio_c }),
            beta: c.beta,
            klEstimator: c.kl_estimator,
            maxTokensPerMicrobatch: c.max_tokens_per_microbatch,
          },
        );
        // The role's engine samples from its new adapter from the next rollout on.
        role.engine.generator.setLora(role.policy.params);
        Object.assign(record, {
          [`${role.name}/reward`]: rewards.reduce((a, b) => a + b, 0) / rewards.length,
          [`${role.name}/loss`]: u.stats.loss,
          [`${role.name}/grad_norm`]: u.gradNorm,
          [`${role.name}/train_tokens`]: targets.count,
          [`${role.name}/logprob_mismatch/max`]: mismatch,
        });
      }
      step++;
      metrics.push(record);
      o.onLog?.(record);
    }
    const adapters: Record<string, string> = {};
    const dir = resolve(c.output_dir);
    mkdirSync(dir, { recursive: true });
    for (const role of roles) {
      if (!role.policy) continue;
      const out = join(dir, 'adapters', role.name);
      await saveLoraAdapter(out, role.policy.config, role.policy.lora!, role.policy.params);
      adapters[role.name] = out;
    }
    return { globalStep: step, metrics, adapters };
  }
}
