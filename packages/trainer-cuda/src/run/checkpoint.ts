import { copyFileSync, existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import {
  createTensor,
  DataFormatError,
  FlowGrpoError,
  readSafetensors,
  tensorToFloat32,
  writeDirAtomically,
  writeSafetensors,
} from '@flowgrpo/core';
import type { DecoderConfig, LoraConfig, ModelWeights } from '@flowgrpo/models';
import {
  type LoraParams,
  loadHfModel,
  loadLoraAdapter,
  saveHfModel,
  saveLoraAdapter,
} from '@flowgrpo/models';
import * as ort from 'onnxruntime-node';
import type { TrainStepState } from '../optimizer-step/train-step-runner.js';

// Checkpoints as HF Trainer lays them out: output_dir/checkpoint-<step>/ with the PEFT adapter
// (adapter_config.json + adapter_model.safetensors: loadable by PEFT and vLLM as they are), the
// optimizer state (optimizer.safetensors: AdamW's m and v per LoRA matrix) and trainer_state.json
// (global step, data cursor, RNG description, config, the metrics so far). Written to a
// temporary folder and renamed, so a kill never leaves a half checkpoint.

export const TRAINER_STATE = 'trainer_state.json';
export const OPTIMIZER_STATE = 'optimizer.safetensors';
export const ROLLOUT_POLICIES = 'rollout_policies.safetensors';

/**
 * An adapter a batch started from, kept while later batches are sampled from it (max_staleness,
 * async-rollouts.ts): its global_step is the policy version of those batches' rollouts.
 */
export interface RolloutPolicy {
  batch: number;
  step: number;
  params: LoraParams;
}

export interface TrainerState {
  /** Optimizer steps done (TRL's global_step). */
  global_step: number;
  /** Rollout batches (GRPO) or batches (SFT) consumed. */
  batches: number;
  epoch: number;
  /** The next example of the current epoch's seeded permutation. */
  data_cursor: number;
  /**
   * How every random stream is derived: from `seed` and the step, so nothing else is needed to
   * continue exactly (dataset order: permutation(seed, epoch); rollouts: seed + batch index).
   */
  rng: { seed: number; scheme: string };
  nan_steps_skipped: number;
  /** The metrics logged so far, one record per logged step. */
  log_history: Record<string, number>[];
  /**
   * HF's: the best evaluation so far by metric_for_best_model and its checkpoint (GRPO with
   * load_best_model_at_end); absent otherwise.
   */
  best_metric?: number;
  best_model_checkpoint?: string;
  /** Anything else the trainer wants back (e.g. best eval metric). */
  extra?: Record<string, unknown>;
  config: Record<string, unknown>;
}

export class CheckpointError extends FlowGrpoError {
  static override readonly code = 'CHECKPOINT_ERROR';
  readonly path: string;
  constructor(message: string, fields: { path: string }, options?: { cause?: unknown }) {
    super(`${fields.path}: ${message}`, options);
    this.path = fields.path;
  }
}

export const checkpointName = (step: number) => `checkpoint-${step}`;

/**
 * Writes checkpoint-<step> atomically; returns its path. With `lora` the parameters are a PEFT
 * adapter; without (full fine-tuning) they are the model's weights, written as a HF model folder
 * (config.json + model.safetensors, with `extraFiles` such as the tokenizer copied in).
 */
export async function saveCheckpoint(
  outputDir: string,
  o: {
    config: DecoderConfig;
    lora: LoraConfig | undefined;
    state: TrainStepState;
    trainer: TrainerState;
    baseModel?: string;
    /** Full fine-tuning: the model the parameters belong to (tensors not trained are kept). */
    model?: ModelWeights;
    /** Files copied into the checkpoint as they are (e.g. tokenizer.json). */
    extraFiles?: readonly string[];
    /** The adapters the batches after this step are sampled from (max_staleness ≥ 1). */
    rolloutPolicies?: readonly RolloutPolicy[];
  },
): Promise<string> {
  const dir = join(outputDir, checkpointName(o.trainer.global_step));
  await writeDirAtomically(dir, async (tmp) => {
    const params: LoraParams = new Map(
      Object.entries(o.state.params).map(([k, t]) => [k, t.data as Float32Array<ArrayBuffer>]),
    );
    if (o.lora) await saveLoraAdapter(tmp, o.config, o.lora, params, { baseModel: o.baseModel });
    else {
      if (!o.model)
        throw new CheckpointError('full fine-tuning needs the model to save', { path: dir });
      const tensors = new Map(o.model.tensors);
      for (const [name, t] of Object.entries(o.state.params))
        tensors.set(name, createTensor('F32', [...t.dims], t.data as Float32Array<ArrayBuffer>));
      await saveHfModel(tmp, { config: o.config, tensors }, { dtype: 'F32' });
    }
    for (const f of o.extraFiles ?? []) copyFileSync(f, join(tmp, basename(f)));
    await writeOptimizerState(tmp, o.state);
    if (o.rolloutPolicies?.length) await writeRolloutPolicies(tmp, o.rolloutPolicies);
    await writeFile(join(tmp, TRAINER_STATE), `${JSON.stringify(o.trainer, null, 2)}\n`);
  });
  return dir;
}

export interface LoadedCheckpoint {
  dir: string;
  /** undefined for a full fine-tuning checkpoint (the parameters are the model's weights). */
  lora: LoraConfig | undefined;
  params: LoraParams;
  optimizer: { step: number; m: Record<string, ort.Tensor>; v: Record<string, ort.Tensor> };
  trainer: TrainerState;
  /** The adapters batches after it are sampled from (a run with max_staleness ≥ 1). */
  rolloutPolicies: RolloutPolicy[];
}

/** trainer_state.json of a checkpoint folder (a CheckpointError when missing or corrupt). */
export function readTrainerState(dir: string): TrainerState {
  const statePath = join(dir, TRAINER_STATE);
  let trainer: TrainerState;
  try {
    trainer = JSON.parse(readFileSync(statePath, 'utf8')) as TrainerState;
  } catch (cause) {
    throw new CheckpointError(
      `cannot read ${TRAINER_STATE}: ${(cause as Error).message}`,
      { path: dir },
      { cause },
    );
  }
  if (!Number.isInteger(trainer.global_step) || !Number.isInteger(trainer.data_cursor))
    throw new CheckpointError(`${TRAINER_STATE} has no integer global_step / data_cursor`, {
      path: dir,
    });
  return trainer;
}

/** Reads a checkpoint folder; a missing or corrupt part is a CheckpointError naming the file. */
export async function loadCheckpoint(
  dir: string,
  config: DecoderConfig,
): Promise<LoadedCheckpoint> {
  const trainer = readTrainerState(dir);
  let adapter: { lora: LoraConfig | undefined; params: LoraParams };
  try {
    if (existsSync(join(dir, 'adapter_config.json'))) adapter = await loadLoraAdapter(dir, config);
    else {
      const model = await loadHfModel(dir, { dtype: 'F32' });
      adapter = {
        lora: undefined,
        params: new Map(
          [...model.tensors].map(([k, t]) => [k, Float32Array.from(tensorToFloat32(t))]),
        ),
      };
    }
  } catch (cause) {
    throw new CheckpointError(`parameters: ${(cause as Error).message}`, { path: dir }, { cause });
  }
  const optimizer = await readOptimizerState(dir, adapter.params, trainer.global_step);
  const rolloutPolicies = existsSync(join(dir, ROLLOUT_POLICIES))
    ? await readRolloutPolicies(dir, adapter.params)
    : [];
  return { dir, lora: adapter.lora, params: adapter.params, optimizer, trainer, rolloutPolicies };
}

/**
 * rollout_policies.safetensors: each kept adapter's tensors as `batch-<b>.<param>` (flat), and
 * which batch and step each one is in the metadata.
 */
async function writeRolloutPolicies(dir: string, policies: readonly RolloutPolicy[]) {
  const tensors = policies.flatMap((p) =>
    [...p.params].map(
      ([name, data]) =>
        [
          `batch-${p.batch}.${name}`,
          { dtype: 'F32' as const, shape: [data.length], data },
        ] as const,
    ),
  );
  const index = policies.map((p) => ({ batch: p.batch, step: p.step }));
  await writeSafetensors(join(dir, ROLLOUT_POLICIES), tensors, {
    metadata: { format: 'pt', policies: JSON.stringify(index) },
  });
}

async function readRolloutPolicies(dir: string, like: LoraParams): Promise<RolloutPolicy[]> {
  const fail = (message: string, cause?: unknown) =>
    new CheckpointError(`${ROLLOUT_POLICIES}: ${message}`, { path: dir }, { cause });
  let file: Awaited<ReturnType<typeof readSafetensors>>;
  let index: { batch: number; step: number }[];
  try {
    file = await readSafetensors(join(dir, ROLLOUT_POLICIES));
    index = JSON.parse(file.metadata?.policies ?? '[]');
  } catch (cause) {
    throw fail((cause as Error).message, cause);
  }
  return index.map(({ batch, step }) => {
    const params: LoraParams = new Map();
    for (const [name, p] of like) {
      const t = file.tensors.get(`batch-${batch}.${name}`);
      if (!t) throw fail(`lacks ${name} of the adapter batch ${batch} was sampled from`);
      const data = Float32Array.from(tensorToFloat32(t));
      if (data.length !== p.length) throw fail(`batch-${batch}.${name} has the wrong size`);
      params.set(name, data);
    }
    return { batch, step, params };
  });
}

/** optimizer.safetensors: AdamW's moments (m.<param>, v.<param>) and its step. */
export async function writeOptimizerState(dir: string, state: TrainStepState): Promise<void> {
  const moments = [
    ...Object.entries(state.m).map(([k, t]) => [`m.${k}`, t] as const),
    ...Object.entries(state.v).map(([k, t]) => [`v.${k}`, t] as const),
  ].map(
    ([name, t]) =>
      [name, { dtype: 'F32' as const, shape: [...t.dims], data: t.data as Float32Array }] as const,
  );
  await writeSafetensors(join(dir, OPTIMIZER_STATE), moments, {
    metadata: { format: 'pt', optimizer: 'adamw', step: String(state.step) },
  });
}

/** Reads optimizer.safetensors of `dir`: the moments of every one of `params`. */
export async function readOptimizerState(
  dir: string,
  params: LoraParams,
  defaultStep: number,
): Promise<LoadedCheckpoint['optimizer']> {
  let tensors: Awaited<ReturnType<typeof readSafetensors>>;
  try {
    tensors = await readSafetensors(join(dir, OPTIMIZER_STATE));
  } catch (cause) {
    if (DataFormatError.isInstance(cause) || cause instanceof Error)
      throw new CheckpointError(
        `${OPTIMIZER_STATE}: ${(cause as Error).message}`,
        { path: dir },
        { cause },
      );
    throw cause;
  }
  const m: Record<string, ort.Tensor> = {};
  const v: Record<string, ort.Tensor> = {};
  for (const [name, p] of params) {
    const tm = tensors.tensors.get(`m.${name}`);
    const tv = tensors.tensors.get(`v.${name}`);
    if (!tm || !tv)
      throw new CheckpointError(`${OPTIMIZER_STATE} lacks the moments of ${name}`, { path: dir });
    const dims = [...tm.shape];
    if (dims.reduce((a, b) => a * b, 1) !== p.length)
      throw new CheckpointError(`${OPTIMIZER_STATE}: moments of ${name} have the wrong shape`, {
        path: dir,
      });
    m[name] = new ort.Tensor('float32', Float32Array.from(tensorToFloat32(tm)), dims);
    v[name] = new ort.Tensor('float32', Float32Array.from(tensorToFloat32(tv)), dims);
  }
  const step = Number(tensors.metadata?.step ?? defaultStep);
  return { step, m, v };
}

/** checkpoint-<n> folders of a run, oldest first. */
export function listCheckpoints(outputDir: string): { step: number; dir: string }[] {
  if (!existsSync(outputDir)) return [];
  return readdirSync(outputDir)
    .map((name) => /^checkpoint-(\d+)$/.exec(name))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => ({ step: Number(m[1]), dir: join(outputDir, m[0]) }))
    .filter((c) => existsSync(join(c.dir, TRAINER_STATE)))
    .sort((a, b) => a.step - b.step);
}

/**
 * Removes the oldest checkpoints beyond `limit` (0 = keep all). `keep` (the best checkpoint, as
 * HF keeps it with `load_best_model_at_end`) is never removed and not counted in `limit`.
 */
export function rotateCheckpoints(outputDir: string, limit: number, keep?: string): void {
  if (limit <= 0) return;
  // By name, so that a best recorded under another path to the same folder still matches.
  const kept = keep === undefined ? undefined : basename(keep);
  const others = listCheckpoints(outputDir).filter((c) => basename(c.dir) !== kept);
  for (const c of others.slice(0, Math.max(0, others.length - limit)))
    rmSync(c.dir, { recursive: true, force: true });
}
