import { join } from 'node:path';
import { ConfigError } from '@flowgrpo/core';
import { LocalPolicyHost, type RecordedRollout, rolloutTrajectory } from '@flowgrpo/gateway';
import type { DeviceRequest, Tokenizer, TrainingSampling } from '@flowgrpo/models';
import {
  type ArtifactsManifest,
  DecoderArtifacts,
  DecoderGenerator,
  initLoraParams,
  LocalPolicyEngine,
  type LoraParams,
  loadLoraAdapter,
  readArtifactsManifest,
  saveLoraAdapter,
} from '@flowgrpo/models';
import { type GRPOConfig, policyOptions } from '../run/config.js';
import type { LoadedRolesCheckpoint } from '../run/roles-checkpoint.js';
import { StepClock } from '../run/step-clock.js';
import type { PolicyStep } from '../trainers/step-record.js';
import { grpoUpdate, noUpdate } from '../update/grpo-update.js';
import { LoraPolicy } from '../update/lora-policy.js';
import type { NonFiniteGuard } from '../update/non-finite-guard.js';
import { scoreBatch } from '../update/scored-batch.js';

// Roles served by the gateway, each a LoRA adapter on the shared base: an engine per role over
// one opened artifacts directory, and for a trained role its LoraPolicy (train-step + logprobs
// sessions, its own AdamW state). `updateRole` is the GRPO update of one role from recorded
// rollouts — scoreBatch and grpoUpdate, as GRPOTrainer's — shared by MultiRoleGRPOTrainer (the
// trainer runs the agent) and OnlineGRPOTrainer (agents run themselves and post rewards).

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

/** An engine (and, for trained roles, a LoraPolicy) per role over opened artifacts. */
export async function openRoles(o: {
  artifactsDir: string;
  artifacts: DecoderArtifacts;
  manifest: ArtifactsManifest;
  tokenizer: Tokenizer;
  roles: Record<string, RoleSpec>;
  config: GRPOConfig;
  device: DeviceRequest;
  /** A checkpoint's roles to continue from (their adapters and optimizer states). */
  resume?: LoadedRolesCheckpoint['roles'];
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
      const resumed = spec.trainable ? o.resume?.[name] : undefined;
      if (o.resume && spec.trainable && !resumed)
        throw new ConfigError(
          `the checkpoint to resume from has no folder for the trained role '${name}' (it has ${Object.keys(o.resume).join(', ')})`,
          { key: 'roles' },
          { hint: 'resume with the roles the run was started with' },
        );
      const params = resumed
        ? resumed.params
        : typeof spec.adapter === 'string'
          ? (await loadLoraAdapter(spec.adapter, manifest.config)).params
          : (spec.adapter ??
            (spec.trainable
              ? initLoraParams(manifest.config, manifest.lora, `${c.seed}:lora:${name}`)
              : undefined));
      const engine = new LocalPolicyEngine({
        // share_sampling_weights: the decode session only (the fused generator would open an
        // artifacts folder's generate graph, and its float32 copies, of its own accord).
        ...(c.share_sampling_weights
          ? { generator: new DecoderGenerator(o.artifacts, { useGenerateGraph: false }) }
          : { artifacts: o.artifacts }),
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
              ...(resumed && { state: resumed.optimizer }),
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
  resume?: LoadedRolesCheckpoint['roles'];
}): Promise<HostedRoles> {
  const manifest = readArtifactsManifest(o.artifactsDir);
  // The gateway samples with the decode graph; share_sampling_weights: over the mapped weights,
  // nothing prepacked (half projections cast per product, built in).
  const artifacts = await DecoderArtifacts.open(o.artifactsDir, {
    graphs: ['decode'],
    device: o.device,
    ...(o.config.share_sampling_weights && { prepackWeights: false }),
  });
  const host = await LocalPolicyHost.open({
    artifacts,
    tokenizer: o.tokenizer,
    // The base model and hot-loaded adapters too: the decode session alone.
    ...(o.config.share_sampling_weights && { useGenerateGraph: false }),
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
 * The GRPO update of `role` from rollouts (`rewards[i]`, `groups[i]` per rollout), through the
 * path every trainer takes: the rollouts in which the role acted become Trajectories of its calls
 * (rolloutTrajectory: one chain → segments, else one turn per call), scored against its
 * `role_rewards` entry when posted (group-relative advantages over those rollouts only), collated
 * by scoreBatch and trained by grpoUpdate (μ updates, the non-finite guard); the role's engine
 * then samples from its new adapter. `importanceCorrection`: weight each token by
 * min(π_now / π_sampled, cap), for rollouts sampled by an earlier adapter. Returns the role's
 * part of the step (its batch and update: step-record.ts makes its `<role>/` metrics of them),
 * or undefined for a frozen role or one that did not act; a batch the filters left nothing to
 * train on has no optimizer step.
 */
export async function updateRole(
  role: ServedRole,
  rollouts: readonly RecordedRollout[],
  rewards: ArrayLike<number>,
  groups: ArrayLike<number>,
  o: {
    config: GRPOConfig;
    /** Global steps done before this update. */
    step: number;
    guard: NonFiniteGuard;
    batch: number;
    /** The step's clock: the update's phases count into its timing/*. */
    clock: StepClock;
    importanceCorrection?: boolean;
  },
): Promise<PolicyStep | undefined> {
  if (!role.policy) return undefined;
  const acted = rollouts
    .map((r, k) => ({ r, k }))
    .filter(({ r }) => r.calls.some((x) => x.model === role.name));
  if (acted.length === 0) return undefined;
  const roleRewards = Float64Array.from(
    acted,
    ({ r, k }) => r.roleRewards?.[role.name] ?? rewards[k]!,
  );
  const roleGroups = Int32Array.from(acted, ({ k }) => groups[k]!);
  const trajectories = acted.map(({ r, k }) =>
    rolloutTrajectory(r, { model: role.name, queryId: r.id, groupId: String(groups[k]) }),
  );
  const batch = scoreBatch(trajectories, roleRewards, roleGroups, o.config);
  // The role's own seconds (its train/tokens_per_s), counted into the step's timing/* as well.
  const own = new StepClock(o.step);
  const update =
    batch.targets.count === 0
      ? noUpdate()
      : await grpoUpdate(role.policy, batch, {
          config: o.config,
          step: o.step,
          guard: o.guard,
          at: { batch: o.batch, queryIds: acted.map(({ r }) => r.id), who: role.name },
          ...(o.importanceCorrection && { importanceCorrection: true }),
          time: (phase, f) => own.time(phase, () => o.clock.time(phase, f)),
        });
  // The role's engine samples from its new adapter from the next call on.
  if (update.updates.length > 0)
    await o.clock.time('sync', async () => role.engine.generator.setLora(role.policy!.params));
  return { batch, update, trainSeconds: own.seconds.train };
}

/** Calls per rollout of each role (trained or frozen), over all the step's rollouts. */
export function callsPerRole(
  roles: readonly ServedRole[],
  rollouts: readonly RecordedRollout[],
): Record<string, number> {
  return Object.fromEntries(
    roles.map((role) => [
      role.name,
      rollouts.reduce((s, r) => s + r.calls.filter((x) => x.model === role.name).length, 0) /
        rollouts.length,
    ]),
  );
}

/**
 * The step the trained roles' updates make together: as many optimizer steps as the role that
 * took most (they all start from the same step), and every skipped one counted.
 */
export function roleSteps(trained: Readonly<Record<string, PolicyStep>>): {
  steps: number;
  skipped: number;
} {
  const updates = Object.values(trained).map((p) => p.update.updates);
  return {
    steps: Math.max(0, ...updates.map((u) => u.length)),
    skipped: updates.reduce((s, u) => s + u.filter((x) => x.skipped).length, 0),
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
