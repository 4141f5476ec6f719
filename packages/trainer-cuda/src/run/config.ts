import { ConfigError } from '@flowgrpo/core';
import {
  LORA_TARGET_MODULES,
  type LoraConfig,
  loraFitsBuilt,
  type ProjectionDtype,
} from '@flowgrpo/models';
import { z } from 'zod';
import { AlarmsConfigSchema } from './alarms.js';
import { CurriculumSchema } from './query-sampler.js';

// Trainer configurations, keyed as TRL's GRPOConfig / SFTConfig (and HF TrainingArguments) where
// a key means the same thing, plus flowgrpo's own keys for what TRL has no word for (multi-turn
// rollouts, token budgets). Validated by zod; an error names the key.

const positiveInt = z.number().int().positive();
const nonNegative = z.number().nonnegative();

/**
 * LoRA as PEFT's LoraConfig names it. Strict: a mistyped key ("lora_alhpa") or one of PEFT's keys
 * this trainer does not act on (lora_dropout) is an error, not a setting silently ignored.
 */
export const LoraOptionsSchema = z
  .object({
    r: positiveInt.default(16),
    lora_alpha: z.number().positive().default(32),
    target_modules: z
      .array(z.enum(LORA_TARGET_MODULES))
      .min(1)
      .default(['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj']),
    use_rslora: z.boolean().default(false),
  })
  .strict();

const common = {
  /** Run directory: config.json, metrics.jsonl, checkpoints, report.html. */
  output_dir: z.string().min(1),
  learning_rate: z.number().positive(),
  lr_scheduler_type: z
    .enum(['constant', 'constant_with_warmup', 'linear', 'cosine'])
    .default('constant'),
  warmup_ratio: z.number().min(0).max(1).default(0),
  warmup_steps: z.number().int().nonnegative().default(0),
  weight_decay: nonNegative.default(0),
  adam_beta1: z.number().min(0).lt(1).default(0.9),
  adam_beta2: z.number().min(0).lt(1).default(0.999),
  adam_epsilon: z.number().positive().default(1e-8),
  /** Global gradient-norm clipping; 0 turns it off (as in HF's Trainer). */
  max_grad_norm: nonNegative.default(1),
  /** Optimizer steps in all (TRL's `max_steps`). */
  max_steps: positiveInt,
  /** Write metrics at steps L, 2L, … and the last (HF's rule; each record is that step's values). */
  logging_steps: positiveInt.default(1),
  /** Save a checkpoint every this many optimizer steps (0 = only at the end). */
  save_steps: z.number().int().nonnegative().default(0),
  /** Keep at most this many checkpoints (oldest removed first); 0 = all. */
  save_total_limit: z.number().int().nonnegative().default(0),
  /** Evaluate every this many optimizer steps (0 = only at the end, when an eval set is given). */
  eval_steps: z.number().int().nonnegative().default(0),
  seed: z.number().int().default(42),
  /** A checkpoint folder to resume from, or true for the latest one in output_dir. */
  resume_from_checkpoint: z.union([z.string(), z.boolean()]).default(false),
  /**
   * Replace the run already in output_dir (HF's name). Without it a fresh run into an output_dir
   * holding checkpoints is refused; with it, the earlier run's files are deleted once the new run
   * has written its first checkpoint (until then they are kept aside and put back on failure).
   * Without it a folder that is not a run and holds files is refused too; with it the run is
   * written beside them, and they are kept (output-dir-checks.ts).
   */
  overwrite_output_dir: z.boolean().default(false),
  lora: LoraOptionsSchema.default(LoraOptionsSchema.parse({})),
  /** flowgrpo: padded tokens per micro-batch (gradient accumulation is automatic and exact). */
  max_tokens_per_microbatch: positiveInt.default(8192),
  /** flowgrpo: stop the run after this many non-finite updates in a row. */
  max_nan_steps_in_a_row: positiveInt.default(3),
  /** ORT intra-op threads for the training sessions (default: ORT's choice). */
  intra_op_threads: positiveInt.optional(),
  /**
   * flowgrpo: the train_step and logprobs sessions read the frozen weights where they lie — a
   * read-only map of weights.data, one copy shared by both sessions (and by any other process
   * that maps the file) — instead of each keeping its own prepacked copies (ONNX Runtime's
   * `session.disable_prepacking`). Saves about twice the projections' float32 size, less one
   * head when the head runs in vocabulary chunks; the Gemms pack their weight on every call
   * instead (docs/performance.md, "Frozen weights held once"). LoRA only: full fine-tuning
   * feeds the weights as inputs, so there is nothing to share (refused there).
   */
  share_frozen_weights: z.boolean().default(false),
  /**
   * HF's `gradient_checkpointing`: the train step keeps only each layer's input from the forward
   * and recomputes the layer's activations in the backward, one layer at a time — the
   * activations of a micro-batch shrink from every layer's to about one layer's, for one more
   * forward per step. The gradients are the same bits (decoderForward's `recompute`). It is built
   * into the train_step graph: artifacts built without it are refused (rebuild them).
   */
  gradient_checkpointing: z.boolean().default(false),
  /**
   * flowgrpo (the frozen base's `torch_dtype`): the dtype the layers' projection matrices — the
   * frozen q/k/v/o and gate/up/down weights, nearly all of a model — are stored and held in. In
   * half precision (bfloat16, float16) the train_step and logprobs graphs hold each one once, in
   * half, and cast it to float32 where a product needs it; the products, LoRA, gradients and
   * AdamW stay float32. 'auto': the checkpoint's own dtype as its config.json's torch_dtype names
   * it (as transformers' torch_dtype='auto' reads it), so a bf16 checkpoint's weights are the same
   * values either way (float32 on the WebGPU EP, which has no bfloat16: bf16 artifacts are refused
   * there). float16 refuses a weight past its range (65,504) rather than store inf. It is built
   * into the artifacts: prebuilt ones are taken as they are under 'auto', and refused under a
   * dtype they were not built with. LoRA only (full fine-tuning trains every weight in float32).
   * docs/performance.md, "Frozen weights in half precision".
   */
  base_weights_dtype: z.enum(['auto', 'float32', 'bfloat16', 'float16']).default('auto'),
  /**
   * flowgrpo: run even when the memory preflight estimates a peak above the memory available
   * (run/memory-check.ts) — for an estimate that is wrong. Named after HF's
   * `skip_memory_metrics`; the check itself has no HF or TRL counterpart.
   */
  skip_memory_check: z.boolean().default(false),
  /** flowgrpo: reward-integrity alarms' thresholds and windows (run/alarms.ts). */
  alarms: AlarmsConfigSchema.default(AlarmsConfigSchema.parse({})),
};

export const GRPOConfigSchema = z
  .object({
    ...common,
    learning_rate: z.number().positive().default(1e-5),
    /** G: completions (trajectories) per query. */
    num_generations: z.number().int().min(2).default(8),
    /** flowgrpo: queries per rollout batch (the batch holds queries × G trajectories). */
    queries_per_step: positiveInt.default(8),
    /**
     * Ask the questions in a seeded permutation per epoch (TRL's `shuffle_dataset`); false: in
     * the dataset's own order, for data you ordered yourself (easy before hard).
     */
    shuffle_dataset: z.boolean().default(true),
    /**
     * flowgrpo: per-source sampling weights that change over steps (query-sampler.ts): each
     * step's questions are shared out between the sources of `column` by the stage's weights.
     */
    curriculum: CurriculumSchema.optional(),
    /** μ: optimizer updates per rollout batch, against the true old log-probs (PPO epochs). */
    num_iterations: positiveInt.default(1),
    /** KL coefficient (TRL default 0: no reference model pass). */
    beta: nonNegative.default(0),
    /** flowgrpo: the KL estimator: k1, k2 or k3 (TRL's and verl's low-variance KL). */
    kl_estimator: z.enum(['k1', 'k2', 'k3']).default('k3'),
    /** Lower clip ε. */
    epsilon: z.number().min(0).max(1).default(0.2),
    /** Upper clip ε (DAPO clip-higher); default = epsilon. */
    epsilon_high: nonNegative.optional(),
    /** verl's dual-clip constant c > 1 (for A < 0 the loss is capped at −c·A); off when unset. */
    clip_ratio_c: z.number().gt(1).optional(),
    /**
     * TRL's loss types plus Flow-GRPO's: grpo (mean over completions of token means), dapo and
     * bnpo (token mean over the batch), dr_grpo (Σ / (completions × max_completion_length)),
     * flow (mean over trajectories of mean over turns of mean over tokens — AgentFlow).
     */
    loss_type: z.enum(['grpo', 'dapo', 'bnpo', 'dr_grpo', 'flow']).default('flow'),
    /** How rewards are scaled into advantages: group std (GRPO), batch std, or none (Dr.GRPO). */
    scale_rewards: z
      .union([z.enum(['group', 'batch', 'none']), z.boolean()])
      .default('group')
      .transform((v) => (v === true ? 'group' : v === false ? 'none' : v)),
    /** Most tokens the policy samples per planner turn. */
    max_completion_length: positiveInt.default(256),
    temperature: z.number().positive().default(1),
    top_p: z.number().gt(0).max(1).default(1),
    top_k: z.number().int().nonnegative().default(0),
    /** Truncated completions carry no loss (TRL's mask_truncated_completions). */
    mask_truncated_completions: z.boolean().default(false),
    /** flowgrpo: drop groups whose rewards are all equal (no gradient; DAPO dynamic sampling). */
    filter_zero_variance_groups: z.boolean().default(false),
    /** flowgrpo: rollouts running at once. */
    rollout_concurrency: positiveInt.default(64),
    /**
     * flowgrpo: worker threads that generate rollouts side by side, each a continuous batch on one
     * thread (0: on the trainer's thread). Default: one per core up to 4 for a model of at most
     * 64 MiB of weights, else 0 (DecoderGenerator's generateWorkers).
     */
    generate_workers: z.number().int().nonnegative().optional(),
    /**
     * flowgrpo: the local rollout engine samples with the standard decode graph over the mapped
     * weights.data, its session's prepacking off and half-precision projections cast at each
     * product — no copy of the frozen weights of its own (the fused generate graph keeps about
     * 1.3× the projections in float32 and 2× the head: 8.4 GiB at Qwen2.5-1.5B). Sampling runs
     * 0.29–0.40× as fast on the CPU and draws the fused graph's tokens up to float32 rounding
     * (docs/performance.md, "Sampling weights held once"). Half-precision artifacts must be built
     * for it (flowgrpo export --share-sampling-weights; flowgrpo train builds them from its
     * config). Rollouts on another engine (`rollout`, vLLM) open no sampling session: ignored.
     */
    share_sampling_weights: z.boolean().default(false),
    /**
     * flowgrpo: planner turns per rollout — the agent's setting: the CLI passes it to the agent
     * it builds; a `GRPOTrainer` in code leaves it to the `agent` factory.
     */
    max_turns: positiveInt.default(5),
    /**
     * Truncated importance sampling for rollouts from another engine (TRL's vLLM correction):
     * the loss of each token is weighted by min(π_old / π_sampler, cap).
     */
    vllm_importance_sampling_correction: z.boolean().default(false),
    vllm_importance_sampling_cap: z.number().positive().default(2),
    /**
     * TRL's key: the ratio per token or per turn (sequence_*), truncated at the cap or zeroed
     * above it (*_mask) — applyImportanceWeights. flowgrpo's default is the per-token truncation
     * it has always applied (TRL's default has changed between versions).
     */
    vllm_importance_sampling_mode: z
      .enum(['token_truncate', 'token_mask', 'sequence_truncate', 'sequence_mask'])
      .default('token_truncate'),
    /**
     * TRL's AsyncGRPO key: the next batches' rollouts are sampled while the current update runs,
     * from an adapter at most this many optimizer steps older than the one trained on them, and
     * weighted by min(π_old / π_sampler, vllm_importance_sampling_cap) (async-rollouts.ts). 0: the
     * synchronous loop (sample, then update).
     */
    max_staleness: z.number().int().nonnegative().default(0),
    /** Reward that counts as a correct answer for accuracy metrics. */
    success_threshold: z.number().default(1),
    /**
     * HF's: keep the checkpoint whose evaluation is best by `metric_for_best_model` (every
     * eval_steps and the final one) and hand it back as the run's result (`bestCheckpoint`;
     * trainer_state.json's `best_model_checkpoint` and `best_metric`). It never leaves rotation.
     * Needs an eval dataset and eval_steps > 0; choose the eval set apart from the test set.
     */
    load_best_model_at_end: z.boolean().default(false),
    /** HF's: an evaluation metric, with or without its `eval/` or `eval_` prefix. */
    metric_for_best_model: z.string().default('eval/accuracy'),
    /** HF's: whether a larger metric is better (default: unless its name ends with `loss`). */
    greater_is_better: z.boolean().optional(),
    /**
     * flowgrpo: stop the run (ROLLOUTS_FAILED) when every rollout of this many consecutive steps
     * failed — a broken setup, not a hard batch.
     */
    max_failed_rollout_steps: positiveInt.default(2),
  })
  .strict();
export type GRPOConfig = z.output<typeof GRPOConfigSchema>;
export type GRPOConfigInput = z.input<typeof GRPOConfigSchema>;

export const SFTConfigSchema = z
  .object({
    ...common,
    learning_rate: z.number().positive().default(2e-4),
    /** Examples (with `packing`: packed rows) per optimizer step. */
    per_device_train_batch_size: positiveInt.default(16),
    /** Loss on the assistant turns only (TRL's assistant_only_loss); false = every token. */
    assistant_only_loss: z.boolean().default(true),
    /**
     * Longest example kept (tokens); longer ones are truncated from the left. With `packing`, also
     * the length of a packed row.
     */
    max_length: positiveInt.default(1024),
    /**
     * TRL's sequence packing: examples share rows of `max_length` tokens (padding-free: each
     * attends to itself only, positions restart, the loss per token is unchanged); a batch of
     * `per_device_train_batch_size` is then that many packed rows. Off by default, as in TRL.
     */
    packing: z.boolean().default(false),
    /** 'bfd' (best-fit decreasing, TRL's default: examples stay whole) or 'wrapped' (cut to fill). */
    packing_strategy: z
      .enum(['bfd', 'wrapped'], {
        error: (issue) =>
          `must be 'bfd' or 'wrapped'${issue.input === undefined ? '' : ` (got ${JSON.stringify(issue.input)})`}`,
      })
      .default('bfd'),
    /**
     * Train a LoRA adapter (true, the default) or every weight of the model (false: full
     * fine-tuning, as for a small model created from a seed). TRL's `--use_peft`.
     */
    use_peft: z.boolean().default(true),
    /** Stop when the eval loss has not improved for this many evaluations (0 = never). */
    early_stopping_patience: z.number().int().nonnegative().default(0),
    /**
     * How much the eval loss must fall below the best so far to count as an improvement for
     * `early_stopping_patience` (HF's EarlyStoppingCallback `early_stopping_threshold`).
     */
    early_stopping_threshold: z.number().nonnegative().default(0),
  })
  .strict();
export type SFTConfig = z.output<typeof SFTConfigSchema>;
export type SFTConfigInput = z.input<typeof SFTConfigSchema>;

/**
 * What the SFT schema cannot say key by key (a zod refinement would forbid the `.partial()` that
 * eval-only configs take): share_frozen_weights needs LoRA — full fine-tuning feeds every weight
 * as an input, so nothing is frozen to share. Called by SFTTrainer and by the CLI's config parse
 * (`what` names the file there, as parseConfig's does), so that `flowgrpo train --dry-run` reports it.
 */
export function checkSftConfig(
  c: Pick<SFTConfig, 'use_peft' | 'share_frozen_weights' | 'base_weights_dtype'>,
  what = 'SFT config',
): void {
  if (!c.use_peft && c.share_frozen_weights)
    throw new ConfigError(
      `${what}: share_frozen_weights: nothing to share under use_peft: false (every weight is trained)`,
      { key: 'share_frozen_weights' },
      { hint: 'remove share_frozen_weights, or train a LoRA adapter (use_peft: true)' },
    );
  // 'auto' and float32 are what full fine-tuning does anyway.
  if (!c.use_peft && (c.base_weights_dtype === 'bfloat16' || c.base_weights_dtype === 'float16'))
    throw new ConfigError(
      `${what}: base_weights_dtype: ${c.base_weights_dtype}: nothing is frozen under use_peft: false (every weight is trained in float32)`,
      { key: 'base_weights_dtype' },
      { hint: 'remove base_weights_dtype, or train a LoRA adapter (use_peft: true)' },
    );
}

/** Parses a config; an invalid one throws ConfigError naming the first offending key. */
export function parseConfig<S extends z.ZodType>(
  schema: S,
  input: unknown,
  what: string,
): z.output<S> {
  const r = schema.safeParse(input);
  if (r.success) return r.data;
  const issue = r.error.issues[0]!;
  const key =
    issue.path.join('.') || (issue.code === 'unrecognized_keys' ? issue.keys.join(', ') : '');
  const message =
    issue.code === 'unrecognized_keys'
      ? `unknown key${issue.keys.length > 1 ? 's' : ''} ${issue.keys.map((k) => `'${k}'`).join(', ')}`
      : issue.message;
  throw new ConfigError(`${what}: ${key ? `${key}: ` : ''}${message}`, { key });
}

/**
 * Refuses the GRPO keys a trainer cannot act on when `c` sets them away from their defaults: the
 * trainer behaves as their defaults, and another value would be ignored without a word. `why`
 * says what the trainer does instead.
 */
export function refuseUnusedKeys(
  c: GRPOConfig,
  what: string,
  keys: readonly (keyof GRPOConfig)[],
  why: string,
): void {
  const defaults = GRPOConfigSchema.parse({ output_dir: '.', max_steps: 1 });
  const set = keys.filter((k) => c[k] !== defaults[k]);
  if (set.length > 0)
    throw new ConfigError(
      `${what}: ${set.map((k) => `${k} = ${JSON.stringify(c[k])}`).join(', ')}: ${why}`,
      { key: set.join(', ') },
      { hint: `remove ${set.length > 1 ? 'these keys' : 'this key'} (docs/gateway.md)` },
    );
}

/** The learning rate at (1-based) optimizer step `step` under HF's schedules. */
export function learningRateAt(
  step: number,
  c: Pick<
    GRPOConfig,
    'learning_rate' | 'lr_scheduler_type' | 'warmup_ratio' | 'warmup_steps' | 'max_steps'
  >,
): number {
  const warmup = c.warmup_steps > 0 ? c.warmup_steps : Math.ceil(c.warmup_ratio * c.max_steps);
  const s = step - 1; // HF counts the first update as step 0
  if (c.lr_scheduler_type !== 'constant' && s < warmup)
    return (c.learning_rate * s) / Math.max(1, warmup);
  const progress = (s - warmup) / Math.max(1, c.max_steps - warmup);
  switch (c.lr_scheduler_type) {
    case 'constant':
    case 'constant_with_warmup':
      return c.learning_rate;
    case 'linear':
      return c.learning_rate * Math.max(0, 1 - progress);
    case 'cosine':
      return c.learning_rate * 0.5 * (1 + Math.cos(Math.PI * Math.min(1, progress)));
  }
}

/** The policy's session and AdamW options from a trainer config (both trainers share them). */
export function policyOptions(
  c: Pick<
    GRPOConfig,
    | 'intra_op_threads'
    | 'share_frozen_weights'
    | 'gradient_checkpointing'
    | 'base_weights_dtype'
    | 'adam_beta1'
    | 'adam_beta2'
    | 'adam_epsilon'
    | 'weight_decay'
    | 'max_grad_norm'
  >,
) {
  return {
    ...(c.intra_op_threads && { intraOpThreads: c.intra_op_threads }),
    ...(c.share_frozen_weights && { prepackWeights: false }),
    gradientCheckpointing: c.gradient_checkpointing,
    baseWeightsDtype: c.base_weights_dtype,
    optimizer: {
      beta1: c.adam_beta1,
      beta2: c.adam_beta2,
      eps: c.adam_epsilon,
      weightDecay: c.weight_decay,
      // HF clips only when max_grad_norm > 0; an AdamW clip at 0 would zero every gradient.
      ...(c.max_grad_norm > 0 && { maxGradNorm: c.max_grad_norm }),
    },
  };
}

/**
 * share_sampling_weights with half-precision projections needs a decode graph that casts them at
 * each product (built in): artifacts built without it are refused with how to rebuild them,
 * rather than sampled with a float32 copy the run asked not to hold. Float32 projections need
 * nothing of the graph: the decode session reads them mapped.
 */
export function checkArtifactsSamplingWeights(
  wanted: boolean,
  manifest: {
    graphs: object;
    baseWeightsDtype?: string | undefined;
    decodeCastsPerUse?: boolean | undefined;
  },
): void {
  if (!wanted) return;
  const missing = !('decode' in manifest.graphs)
    ? 'have no decode graph'
    : manifest.baseWeightsDtype && !manifest.decodeCastsPerUse
      ? `hold the projections in ${manifest.baseWeightsDtype} and their decode graph casts them once, at load`
      : undefined;
  if (!missing) return;
  throw new ConfigError(
    `share_sampling_weights: true, but the artifacts ${missing}`,
    { key: 'share_sampling_weights' },
    {
      hint: "rebuild the artifacts for it (flowgrpo export --share-sampling-weights, or buildTrainingArtifacts' decodeCastsPerUse; flowgrpo train builds them from its config when the model is a HF folder), or set share_sampling_weights: false",
    },
  );
}

/**
 * The config's gradient_checkpointing is the artifacts' train_step graph's (it is built in): a
 * mismatch is refused with how to rebuild them, rather than run with the other memory profile.
 */
export function checkArtifactsCheckpointing(wanted: boolean, built: boolean | undefined): void {
  if (wanted === (built === true)) return;
  throw new ConfigError(
    `gradient_checkpointing: ${wanted}, but the artifacts' train_step graph was built ${built ? 'with' : 'without'} it`,
    { key: 'gradient_checkpointing' },
    {
      hint: `rebuild the artifacts with it ${wanted ? 'on' : 'off'} (flowgrpo export ${wanted ? 'with' : 'without'} --gradient-checkpointing, or buildTrainingArtifacts' gradientCheckpointing; flowgrpo train builds them from its config when the model is a HF folder), or set gradient_checkpointing: ${!wanted}`,
    },
  );
}

export type BaseWeightsDtypeKey = GRPOConfig['base_weights_dtype'];

/**
 * The projections' dtype an artifacts build gets from `base_weights_dtype`: 'auto' is the
 * checkpoint's (its config.json torch_dtype) when half, else float32 — and float32 on WebGPU,
 * whose EP has no bfloat16 (the casts would fall back to the CPU).
 */
export function resolveBaseWeightsDtype(
  key: BaseWeightsDtypeKey,
  torchDtype: string | undefined,
  device?: string,
): ProjectionDtype {
  if (key !== 'auto') return key;
  if (device === 'webgpu') return 'float32';
  return torchDtype === 'bfloat16' || torchDtype === 'float16' ? torchDtype : 'float32';
}

/**
 * The config's base_weights_dtype against the artifacts' (built in): 'auto' takes what they
 * hold; a dtype they were not built with is refused with how to rebuild them.
 */
export function checkArtifactsBaseWeights(
  key: BaseWeightsDtypeKey,
  built: ProjectionDtype | undefined,
  /** The device the sessions open on, when known: WebGPU has no bfloat16. */
  device?: string,
): void {
  const has = built ?? 'float32';
  if (device === 'webgpu' && has === 'bfloat16')
    throw new ConfigError(
      'the artifacts hold the projections in bfloat16, which the WebGPU EP cannot run (its casts would fall back to the CPU on every step)',
      { key: 'base_weights_dtype' },
      {
        hint: 'rebuild the artifacts in float32 or float16 (flowgrpo export --base-weights-dtype float32; flowgrpo train does it under base_weights_dtype: auto when the model is a HF folder), or run on the CPU',
      },
    );
  if (key === 'auto' || key === has) return;
  throw new ConfigError(
    `base_weights_dtype: ${key}, but the artifacts hold the projections in ${has}`,
    { key: 'base_weights_dtype' },
    {
      hint: `rebuild the artifacts in ${key} (flowgrpo export --base-weights-dtype ${key}, or buildTrainingArtifacts' baseWeightsDtype; flowgrpo train builds them from its config when the model is a HF folder), or set base_weights_dtype: auto (or ${has})`,
    },
  );
}

/**
 * The run's `lora` must be the one the artifacts were built with (rank, scaling — alpha and
 * use_rslora — and target modules): the graphs take LoRA tensors of those shapes and that scale.
 */
export function checkArtifactsLora(
  l: z.output<typeof LoraOptionsSchema>,
  built: (LoraConfig & { scaling: number }) | undefined,
): void {
  const lora = {
    r: l.r,
    alpha: l.lora_alpha,
    targetModules: l.target_modules,
    useRslora: l.use_rslora,
  };
  if (!built || !loraFitsBuilt(lora, built))
    throw new ConfigError(
      `config.lora (r=${l.r}, alpha=${l.lora_alpha}${l.use_rslora ? ', rslora' : ''}, ${l.target_modules.join('/')}) does not match the artifacts' LoRA (${built ? `r=${built.r}, alpha=${built.alpha}${built.useRslora ? ', rslora' : ''}, ${built.targetModules.join('/')}` : 'none'}); rebuild them with flowgrpo export`,
      { key: 'lora' },
    );
}
