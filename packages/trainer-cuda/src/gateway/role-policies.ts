import { join } from 'node:path';
import { ConfigError } from '@flowgrpo/core';
import {
  type CallChain,
  chainCalls,
  LocalPolicyHost,
  type RecordedRollout,
} from '@flowgrpo/gateway';
import { computeAdvantages, type LossAggregation } from '@flowgrpo/grpo';
import type { DeviceRequest, Tokenizer, TrainingSampling } from '@flowgrpo/models';
import {
  type ArtifactsManifest,
  DecoderArtifacts,
  initLoraParams,
  LocalPolicyEngine,
  type LoraParams,
  loadLoraAdapter,
  readArtifactsManifest,
  saveLoraAdapter,
} from '@flowgrpo/models';
import { type TrainRow, targetsOf } from '../train/collate.js';
import { type GRPOConfig, policyOptions } from '../train/config.js';
import {
  aggregationWeights,
  applyTruncatedImportanceWeights,
  LoraPolicy,
  updateHyperParams,
} from '../train/lora-policy.js';

// Roles served by the gateway, each a LoRA adapter on the shared base: an engine per role over
// one opened artifacts directory, and for a trained role its LoraPolicy (train-step + logprobs
// sessions, its own AdamW state). `updateRole` is one GRPO update of one role from recorded
// rollouts — shared by MultiRoleGRPOTrainer (the trainer runs the agent) and OnlineGRPOTrainer
// (agents run themselves and post rewards).

export interface RoleSpec {
  /** Train this role's adapter (true) or serve it frozen (false). */
  trainable: boolean;
  /** Adapter to start from (PEFT folder or matrices). Default: trained → PEFT init, frozen → base. */
  adapter?: string | LoraParams;
}

export interface ServedRole {
  name: string;
  spec: RoleSpec;
  engine: LocalPolicyEngine;
  /** The trained role's policy and optimizer; undefined when frozen. */
  policy?: LoraPolicy;
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

/** An engine (and, for trained roles, a LoraPolicy) per role over opened artifacts. */
export async function openRoles(o: {
  artifactsDir: string;
  artifacts: DecoderArtifacts;
  manifest: ArtifactsManifest;
  tokenizer: Tokenizer;
  roles: Record<string, RoleSpec>;
  config: GRPOConfig;
  device: DeviceRequest;
}): Promise<ServedRole[]> {
  const { manifest, config: c } = o;
  if (!manifest.lora)
    throw new ConfigError(`${o.artifactsDir} has no LoRA inputs; build it with a LoRA config`, {
      key: 'artifacts',
    });
  if (Object.keys(o.roles).length === 0)
    throw new ConfigError('give at least one role', { key: 'roles' });
  const out: ServedRole[] = [];
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
        artifacts: o.artifacts,
        tokenizer: o.tokenizer,
        model: name,
        maxBatchSize: Math.max(c.num_generations, c.rollout_concurrency),
      });
      engine.generator.setLora(params);
      const policy =
        spec.trainable && params
          ? await LoraPolicy.open({
              artifacts: o.artifactsDir,
              params,
              device: o.device,
              ...policyOptions(c),
            })
          : undefined;
      out.push({ name, spec, engine, ...(policy && { policy }) });
    }
  } catch (e) {
    for (const r of out) await r.policy?.release();
    throw e;
  }
  return out;
}

/** The shared base's decode session, a LocalPolicyHost over it, and the roles it serves. */
export interface HostedRoles {
  artifacts: DecoderArtifacts;
  host: LocalPolicyHost;
  roles: ServedRole[];
  /** Releases the roles' training sessions, the host and the decode session. */
  close(): Promise<void>;
}

/**
 * The gateway's `rolloutSampling` for these roles: a trained role's calls in a named rollout
 * sample at the settings its update assumes (the config's temperature and top_p, at most
 * max_completion_length tokens), whatever the agent asks — the GRPOTrainer's rule. Frozen roles,
 * and calls outside a rollout (evaluation, plain serving), sample as asked.
 */
export function trainedRoleSampling(
  roles: readonly ServedRole[],
  c: GRPOConfig,
): (model: string) => TrainingSampling | undefined {
  const trained = new Set(roles.filter((r) => r.policy).map((r) => r.name));
  const s = { temperature: c.temperature, topP: c.top_p, maxTokens: c.max_completion_length };
  return (model) => (trained.has(model) ? s : undefined);
}

/**
 * Opens the artifacts' decode session, a LocalPolicyHost over it and every role (openRoles),
 * each served under its name: what a gateway over several roles stands on. On failure nothing
 * stays open.
 */
export async function hostRoles(o: {
  artifactsDir: string;
  tokenizer: Tokenizer;
  roles: Record<string, RoleSpec>;
  config: GRPOConfig;
  device: DeviceRequest;
  baseModel?: string;
}): Promise<HostedRoles> {
  const manifest = readArtifactsManifest(o.artifactsDir);
  const artifacts = await DecoderArtifacts.open(o.artifactsDir, {
    graphs: ['decode'],
    device: o.device,
  });
  const host = await LocalPolicyHost.open({
    artifacts,
    tokenizer: o.tokenizer,
    ...(o.baseModel !== undefined && { baseModel: o.baseModel }),
  });
  let roles: ServedRole[] = [];
  const close = async () => {
    for (const r of roles) await r.policy?.release();
    await host.close();
    await artifacts.release();
  };
  try {
    roles = await openRoles({ ...o, artifacts, manifest });
  } catch (e) {
    await close();
    throw e;
  }
  for (const r of roles) host.serve(r.name, r.engine);
  return { artifacts, host, roles, close };
}

/**
 * One GRPO update of `role` from rollouts (`rewards[i]`, `groups[i]` per rollout): advantages
 * over the rollouts in which the role acted (its `role_rewards` entry when posted), one row per
 * continuity chain of its calls, old logprobs recomputed, one optimizer step, the role's engine
 * refreshed. `importanceCorrection`: weight each token by min(π_now / π_sampled, cap), for
 * rollouts sampled by an earlier adapter. Returns the role's metrics, or undefined when it had
 * nothing to train on.
 */
export async function updateRole(
  role: ServedRole,
  rollouts: readonly RecordedRollout[],
  rewards: readonly number[],
  groups: readonly number[],
  c: GRPOConfig,
  learningRate: number,
  o: { importanceCorrection?: boolean } = {},
): Promise<Record<string, number> | undefined> {
  if (!role.policy) return undefined;
  const calls = rollouts.map((r) => r.calls.filter((x) => x.model === role.name));
  const acted = calls.map((x, k) => ({ k, x })).filter((e) => e.x.length > 0);
  if (acted.length === 0) return undefined;
  const roleRewards = Float64Array.from(
    acted,
    ({ k }) => rollouts[k]!.roleRewards?.[role.name] ?? rewards[k]!,
  );
  const roleGroups = Int32Array.from(acted, ({ k }) => groups[k]!);
  const adv = computeAdvantages(roleRewards, roleGroups, { scale: c.scale_rewards });
  const rows: TrainRow[] = [];
  acted.forEach(({ x }, i) => {
    chainCalls(x).forEach((chain, t) => {
      rows.push(chainRow(chain, adv[i]!, i, t));
    });
  });
  const targets = targetsOf(rows);
  if (targets.count === 0) return undefined;
  const lp = { temperature: c.temperature, maxTokensPerMicrobatch: c.max_tokens_per_microbatch };
  // Old log-probs before the update only for the importance correction; otherwise the update's
  // own forward, detached (one update per batch: the same bits, without a second pass).
  const correct = o.importanceCorrection || c.vllm_importance_sampling_correction;
  const old = correct
    ? await role.policy.logprobs(rows, targets, { ...lp, loraScale: 1 })
    : undefined;
  const ref =
    c.beta !== 0 ? await role.policy.logprobs(rows, targets, { ...lp, loraScale: 0 }) : undefined;
  const pgWeights = aggregationWeights(targets, AGGREGATION[c.loss_type], {
    maxLen: c.max_completion_length,
  });
  if (old) applyTruncatedImportanceWeights(pgWeights, old, targets, c.vllm_importance_sampling_cap);
  const u = await role.policy.update(
    rows,
    targets,
    { ...(old && { old }), ...(ref && { ref }), pgWeights },
    updateHyperParams(c, learningRate),
  );
  const trainer = old ?? u.logprobs;
  let mismatch = 0;
  for (let j = 0; j < targets.count; j++)
    mismatch = Math.max(mismatch, Math.abs(trainer[j]! - targets.sampleLogprob[j]!));
  // The role's engine samples from its new adapter from the next call on.
  role.engine.generator.setLora(role.policy.params);
  return {
    [`${role.name}/reward`]: roleRewards.reduce((a, b) => a + b, 0) / roleRewards.length,
    [`${role.name}/loss`]: u.stats.loss,
    [`${role.name}/grad_norm`]: u.gradNorm,
    [`${role.name}/train_tokens`]: targets.count,
    [`${role.name}/logprob_mismatch/max`]: mismatch,
    ...(u.skipped && { [`${role.name}/skipped`]: 1 }),
  };
}

/** Saves every trained role's adapter as PEFT under `dir/<role>`; returns the folders. */
export async function saveRoleAdapters(
  roles: readonly ServedRole[],
  dir: string,
): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const role of roles) {
    if (!role.policy) continue;
    const folder = join(dir, role.name);
    await saveLoraAdapter(folder, role.policy.config, role.policy.lora!, role.policy.params);
    out[role.name] = folder;
  }
  return out;
}
