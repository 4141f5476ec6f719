import { join } from 'node:path';
import { type LossAggregation, tokenWeights } from '@flowgrpo/grpo';
import type { DecoderConfig, DeviceRequest, LoraConfig, LoraParams } from '@flowgrpo/models';
import {
  createSession,
  LORA_SCALE,
  loraParamSpecs,
  type ModelWeights,
  readArtifactsManifest,
  type Session,
  TEMPERATURE,
  weightAsFloat32,
} from '@flowgrpo/models';
import * as ort from 'onnxruntime-node';
import { buildFullTrainingGraphs } from '../graphs/full-graphs.js';
import {
  ADVANTAGES,
  BETA,
  CLIP_RATIO_C,
  EPSILON_HIGH,
  EPSILON_LOW,
  IS_CAP,
  IS_MASK,
  IS_WEIGHTED,
  KL_COEFFS,
  NLL_WEIGHTS,
  OLD_LOGPROBS,
  ON_POLICY,
  PG_WEIGHTS,
  REF_LOGPROBS,
  SAMPLER_LOGPROBS,
  STAT_WEIGHTS,
  TRAIN_STEP_STATS,
  type TrainStepStat,
} from '../graphs/train-step-graph.js';
import { TrainLoopError } from '../optimizer-step/errors.js';
import { TrainStepRunner, type TrainStepState } from '../optimizer-step/train-step-runner.js';
import {
  type BaseWeightsDtypeKey,
  checkArtifactsBaseWeights,
  checkArtifactsCheckpointing,
  type GRPOConfig,
} from '../run/config.js';
import {
  packMicroBatches,
  perTargetFeed,
  scatterTargets,
  type Targets,
  type TrainRow,
  tokenFeeds,
} from './collate.js';

// A decoder being trained: log-probabilities of given tokens (the `logprobs` graph — old log-probs
// with the adapter, reference log-probs with lora_scale = 0: the same weights, no second model),
// and optimizer steps (the `train_step` graph + AdamW, gradients accumulated over token-budgeted
// micro-batches). Two kinds of parameters:
//   LoRA  the adapter matrices, over an artifacts directory (base weights in weights.data)
//   full  every weight of the model (full fine-tuning, e.g. of a model created from a seed): the
//         graphs take the weights as inputs and are built from the model itself (openFull)
// It holds a host copy of the parameters for the rollout engine, refreshed after every update.

export type KlEstimatorName = 'k1' | 'k2' | 'k3';

export interface LoraPolicyOptions {
  /** An artifacts directory built with a LoRA config (logprobs + train_step graphs). */
  artifacts: string;
  /** The adapter to start from (PEFT names). */
  params: LoraParams;
  device?: DeviceRequest;
  /** ORT intra-op threads for the logprobs and train-step sessions. */
  intraOpThreads?: number;
  /** false: the two sessions share the mapped frozen weights, unpacked (CreateSessionOptions). */
  prepackWeights?: boolean;
  /**
   * The run's gradient_checkpointing: `open` refuses artifacts whose train_step was built the
   * other way (left out: whichever they hold); `openFull` builds its train_step with it.
   */
  gradientCheckpointing?: boolean;
  /**
   * The run's base_weights_dtype: `open` refuses artifacts whose projections are in another
   * dtype ('auto' and left out: whichever they hold).
   */
  baseWeightsDtype?: BaseWeightsDtypeKey;
  /** AdamW (torch semantics) and global-norm clipping. */
  optimizer?: {
    beta1?: number;
    beta2?: number;
    eps?: number;
    weightDecay?: number;
    maxGradNorm?: number;
  };
  /** Resume: optimizer moments and step count (parameters come from `params`). */
  state?: { step: number; m: Record<string, ort.Tensor>; v: Record<string, ort.Tensor> };
}

/** The objective of one update, per target (see train-step-graph.ts). */
export interface UpdateInputs {
  /**
   * Per target: log-probs of the policy before the update. Omitted: the update's own forward,
   * detached (TRL's `old_per_token_logps = None`) — right for the first update on a batch, as
   * the parameters have not moved yet; later updates on the same batch (num_iterations > 1) pass
   * the first one's `logprobs`.
   */
  old?: Float32Array;
  /** Per target: reference log-probs (needed when beta ≠ 0). */
  ref?: Float32Array;
  /** Per target weights of the policy-gradient term; omit for pure SFT. */
  pgWeights?: Float64Array;
  /** Per target weights of the −logp term (SFT); omit for pure GRPO. */
  nllWeights?: Float64Array;
  /**
   * Weight each target whose sampled log-prob is known (`targets.sampleLogprob` not NaN) by the
   * importance ratio π_old / π_sampler, in the train step's graph from the same π_old as the PPO
   * ratio (a per-token mode of vllm_importance_sampling_mode; the per-turn modes are weighed into
   * `pgWeights` on the host: applyImportanceWeights).
   */
  importance?: { cap: number; mode: TokenImportanceSamplingMode };
}

export interface UpdateHyperParams {
  learningRate: number;
  temperature: number;
  epsilonLow: number;
  epsilonHigh: number;
  /** Dual-clip constant; undefined = off. */
  clipRatioC?: number;
  beta: number;
  klEstimator: KlEstimatorName;
  maxTokensPerMicrobatch: number;
}

/** The update's hyper-parameters from a GRPO config (TRL's keys) at learning rate `lr`. */
export function updateHyperParams(
  c: Pick<
    GRPOConfig,
    | 'temperature'
    | 'epsilon'
    | 'epsilon_high'
    | 'clip_ratio_c'
    | 'beta'
    | 'kl_estimator'
    | 'max_tokens_per_microbatch'
  >,
  lr: number,
): UpdateHyperParams {
  return {
    learningRate: lr,
    temperature: c.temperature,
    epsilonLow: c.epsilon,
    epsilonHigh: c.epsilon_high ?? c.epsilon,
    ...(c.clip_ratio_c !== undefined && { clipRatioC: c.clip_ratio_c }),
    beta: c.beta,
    klEstimator: c.kl_estimator,
    maxTokensPerMicrobatch: c.max_tokens_per_microbatch,
  };
}

export interface UpdateResult {
  /** Sums over the batch: the loss, its parts, and token means of the statistics. */
  stats: Record<TrainStepStat, number>;
  gradNorm: number;
  /** Per target log-probs at the parameters before the update. */
  logprobs: Float32Array;
  microBatches: number;
  skipped?: 'nonfinite_loss' | 'nonfinite_grad_norm';
  step: number;
}

const KL_ONE_HOT: Record<KlEstimatorName, number[]> = {
  k1: [1, 0, 0],
  k2: [0, 1, 0],
  k3: [0, 0, 1],
};
// "Off" for the dual clip: a cap −c·A that no finite PPO loss reaches.
const NO_DUAL_CLIP = 1e30;

const scalar = (x: number) => new ort.Tensor('float32', Float32Array.of(x), []);
const asBool = (t: ort.Tensor) =>
  new ort.Tensor('bool', Uint8Array.from(t.data as Float32Array), t.dims);

export class LoraPolicy {
  readonly config: DecoderConfig;
  /** The LoRA config; undefined for full fine-tuning. */
  readonly lora: LoraConfig | undefined;
  /** Parameter names and shapes, in graph-input order. */
  readonly paramSpecs: readonly { name: string; shape: number[] }[];
  readonly #runner: TrainStepRunner;
  readonly #logprobs: Session;
  #params: LoraParams;

  private constructor(
    config: DecoderConfig,
    lora: LoraConfig | undefined,
    specs: readonly { name: string; shape: number[] }[],
    runner: TrainStepRunner,
    logprobs: Session,
    params: LoraParams,
  ) {
    this.config = config;
    this.lora = lora;
    this.paramSpecs = specs;
    this.#runner = runner;
    this.#logprobs = logprobs;
    this.#params = params;
  }

  static async open(o: LoraPolicyOptions): Promise<LoraPolicy> {
    const manifest = readArtifactsManifest(o.artifacts);
    if (!manifest.lora || !manifest.graphs.train_step || !manifest.graphs.logprobs)
      throw new TrainLoopError(
        `${o.artifacts} has no LoRA train_step and logprobs graphs; build the artifacts with a LoRA config`,
      );
    // Every trainer opens its policy here (GRPO, SFT, the gateway's): GRPO and SFT have refused
    // a mismatch already, before output_dir; this covers every caller.
    if (o.gradientCheckpointing !== undefined)
      checkArtifactsCheckpointing(o.gradientCheckpointing, manifest.gradientCheckpointing);
    checkArtifactsBaseWeights(o.baseWeightsDtype ?? 'auto', manifest.baseWeightsDtype, o.device);
    const specs = loraParamSpecs(manifest.config, manifest.lora).map((s) => ({
      name: s.name,
      shape: [...s.shape],
    }));
    return LoraPolicy.#create(o, manifest.config, manifest.lora, specs, {
      trainStep: join(o.artifacts, manifest.graphs.train_step.file),
      logprobs: join(o.artifacts, manifest.graphs.logprobs.file),
    });
  }

  /**
   * Full fine-tuning of `weights`: builds a train_step and a logprobs graph that take every
   * weight as an input into `dir` (plus a small weights.data with the RoPE tables), and opens
   * them. `params` defaults to the model's own weights.
   */
  static async openFull(
    o: Omit<LoraPolicyOptions, 'artifacts' | 'params'> & {
      weights: ModelWeights;
      dir: string;
      params?: LoraParams;
      maxPositions?: number;
    },
  ): Promise<LoraPolicy> {
    const graphs = buildFullTrainingGraphs(o.weights, o.dir, {
      maxPositions: o.maxPositions,
      gradientCheckpointing: o.gradientCheckpointing,
    });
    const params =
      o.params ??
      new Map(
        graphs.params.map((p) => [p.name, Float32Array.from(weightAsFloat32(o.weights, p.name))]),
      );
    return LoraPolicy.#create({ ...o, params }, o.weights.config, undefined, graphs.params, graphs);
  }

  static async #create(
    o: Omit<LoraPolicyOptions, 'artifacts'>,
    config: DecoderConfig,
    lora: LoraConfig | undefined,
    specs: readonly { name: string; shape: number[] }[],
    files: { trainStep: string; logprobs: string },
  ): Promise<LoraPolicy> {
    const params: Record<string, ort.Tensor> = {};
    for (const s of specs) {
      const data = o.params.get(s.name);
      if (!data || data.length !== s.shape.reduce((a, b) => a * b, 1))
        throw new TrainLoopError(`parameter ${s.name} is missing or not of shape [${s.shape}]`);
      params[s.name] = new ort.Tensor('float32', Float32Array.from(data), s.shape);
    }
    const session = {
      ...(o.intraOpThreads !== undefined && { intraOpThreads: o.intraOpThreads }),
      ...(o.prepackWeights !== undefined && { prepackWeights: o.prepackWeights }),
    };
    const logprobs = await createSession(files.logprobs, { ...session, device: o.device ?? 'cpu' });
    let runner: TrainStepRunner;
    try {
      runner = await TrainStepRunner.create({
        trainStep: files.trainStep,
        params,
        device: logprobs.device,
        session,
        optimizer: o.optimizer ?? {},
        ...(o.state && { state: o.state }),
      });
    } catch (e) {
      await logprobs.release();
      throw e;
    }
    const host: LoraParams = new Map(
      specs.map((s) => [s.name, Float32Array.from(o.params.get(s.name)!)]),
    );
    return new LoraPolicy(config, lora, specs, runner, logprobs, host);
  }

  /** Optimizer updates done so far. */
  get step(): number {
    return this.#runner.globalStep;
  }

  get device() {
    return this.#runner.device;
  }

  /** The current adapter (host copy; do not mutate). */
  get params(): LoraParams {
    return this.#params;
  }

  /** The parameters as feeds of the logprobs graph (and lora_scale with LoRA). */
  #paramFeeds(scale: number): Record<string, ort.Tensor> {
    const feeds: Record<string, ort.Tensor> = this.lora ? { [LORA_SCALE]: scalar(scale) } : {};
    if (!this.lora && scale !== 1)
      throw new TrainLoopError('full fine-tuning has no adapter to scale: lora_scale must be 1');
    for (const s of this.paramSpecs)
      feeds[s.name] = new ort.Tensor('float32', this.#params.get(s.name)!, s.shape);
    return feeds;
  }

  /**
   * log π(target) per target at the current adapter (loraScale 1) or the base model (0). Rows
   * must be unpacked (the logprobs graph has no segment_ids); `update` takes packed rows too.
   */
  async logprobs(
    rows: readonly TrainRow[],
    targets: Targets,
    options: { loraScale: number; temperature: number; maxTokensPerMicrobatch: number },
  ): Promise<Float32Array> {
    const out = new Float32Array(targets.count);
    const lora = this.#paramFeeds(options.loraScale);
    for (const mb of packMicroBatches(rows, targets, options.maxTokensPerMicrobatch)) {
      const r = await this.#logprobs.run({
        ...tokenFeeds(mb, rows, targets),
        ...lora,
        [TEMPERATURE]: scalar(options.temperature),
      });
      scatterTargets(mb, targets, r.outputs.logprobs!, out);
    }
    return out;
  }

  /** One optimizer update on the whole batch (micro-batches accumulated). */
  async update(
    rows: readonly TrainRow[],
    targets: Targets,
    inputs: UpdateInputs,
    hp: UpdateHyperParams,
  ): Promise<UpdateResult> {
    const { mbs, feeds } = this.#objectiveFeeds(rows, targets, inputs, hp);
    const n = targets.count;
    const r = await this.#runner.step(feeds, { lr: hp.learningRate });
    const stats = Object.fromEntries(TRAIN_STEP_STATS.map((k) => [k, 0])) as Record<
      TrainStepStat,
      number
    >;
    const logprobs = new Float32Array(n);
    r.outputs.forEach((o, i) => {
      for (const k of TRAIN_STEP_STATS) if (k !== 'loss') stats[k] += Number(o[k]!.data[0]);
      scatterTargets(mbs[i]!, targets, o.logprobs!, logprobs);
    });
    stats.loss = r.loss;
    if (!r.skipped) this.#params = await this.#hostParams();
    return {
      stats,
      gradNorm: r.gradNorm,
      logprobs,
      microBatches: mbs.length,
      step: r.step,
      ...(r.skipped && { skipped: r.skipped }),
    };
  }

  /**
   * The loss and LoRA gradients of the objective at the current adapter, without an update
   * (accumulated over micro-batches exactly as `update` accumulates them). CPU device only.
   */
  async gradients(
    rows: readonly TrainRow[],
    targets: Targets,
    inputs: UpdateInputs,
    hp: UpdateHyperParams,
  ): Promise<{ loss: number; grads: Record<string, Float32Array>; microBatches: number }> {
    const { mbs, feeds } = this.#objectiveFeeds(rows, targets, inputs, hp);
    const r = await this.#runner.gradients(feeds);
    return { ...r, microBatches: mbs.length };
  }

  #objectiveFeeds(
    rows: readonly TrainRow[],
    targets: Targets,
    inputs: UpdateInputs,
    hp: UpdateHyperParams,
  ) {
    const n = targets.count;
    const zeros = new Float32Array(n);
    const mask = new Float64Array(n).fill(n === 0 ? 0 : 1 / n);
    const mbs = packMicroBatches(rows, targets, hp.maxTokensPerMicrobatch);
    const is = inputs.importance;
    const known = new Float32Array(n);
    const sampler = new Float32Array(n);
    if (is)
      targets.sampleLogprob.forEach((v, j) => {
        if (Number.isNaN(v)) return;
        known[j] = 1;
        sampler[j] = v;
      });
    const shared = {
      [TEMPERATURE]: scalar(hp.temperature),
      ...(this.lora && { [LORA_SCALE]: scalar(1) }),
      [EPSILON_LOW]: scalar(hp.epsilonLow),
      [EPSILON_HIGH]: scalar(hp.epsilonHigh),
      [CLIP_RATIO_C]: scalar(hp.clipRatioC ?? NO_DUAL_CLIP),
      [BETA]: scalar(hp.beta),
      [KL_COEFFS]: new ort.Tensor('float32', Float32Array.from(KL_ONE_HOT[hp.klEstimator]), [3]),
      [IS_CAP]: scalar(is?.cap ?? 1),
      [IS_MASK]: new ort.Tensor('bool', Uint8Array.of(is?.mode === 'token_mask' ? 1 : 0), []),
    };
    const feeds = mbs.map((mb) => ({
      ...tokenFeeds(mb, rows, targets, { segments: true }),
      ...shared,
      [OLD_LOGPROBS]: perTargetFeed(mb, targets, inputs.old ?? zeros),
      [ON_POLICY]: new ort.Tensor('bool', Uint8Array.of(inputs.old === undefined ? 1 : 0), []),
      [REF_LOGPROBS]: perTargetFeed(mb, targets, inputs.ref ?? inputs.old ?? zeros),
      [ADVANTAGES]: perTargetFeed(mb, targets, targets.advantage),
      [PG_WEIGHTS]: perTargetFeed(mb, targets, inputs.pgWeights ?? zeros),
      [SAMPLER_LOGPROBS]: perTargetFeed(mb, targets, sampler),
      [IS_WEIGHTED]: asBool(perTargetFeed(mb, targets, known)),
      [NLL_WEIGHTS]: perTargetFeed(mb, targets, inputs.nllWeights ?? zeros),
      [STAT_WEIGHTS]: perTargetFeed(mb, targets, mask),
    }));
    return { mbs, feeds };
  }

  async #hostParams(): Promise<LoraParams> {
    const t = await this.#runner.exportParams();
    return new Map(Object.entries(t).map(([k, v]) => [k, v.data as Float32Array<ArrayBuffer>]));
  }

  /** Parameters, optimizer moments and step count (for checkpoints and exact resume). */
  exportState(): Promise<TrainStepState> {
    return this.#runner.exportState();
  }

  async release(): Promise<void> {
    await this.#runner.release();
    await this.#logprobs.release();
  }
}

/**
 * Aggregation weights of the policy-gradient term for a batch of targets, over the WHOLE batch:
 * `flow` treats each trajectory as a sequence of turns; the other aggregations treat each row
 * (one completion) as a sequence, as TRL does for single-turn completions.
 */
export function aggregationWeights(
  targets: Targets,
  aggregation: LossAggregation,
  options: { maxLen?: number } = {},
): Float64Array {
  const mask = new Uint8Array(targets.count).fill(1);
  if (aggregation === 'flow')
    return tokenWeights({ mask, seqIndex: targets.trajectory, turnIndex: targets.turn }, 'flow');
  return tokenWeights({ mask, seqIndex: targets.row }, aggregation, options);
}

/** TRL's vllm_importance_sampling_mode: the ratio per token or per turn, truncated or masked. */
export type ImportanceSamplingMode =
  | TokenImportanceSamplingMode
  | 'sequence_truncate'
  | 'sequence_mask';
/** The modes the train step weighs in its own graph (UpdateInputs.importance). */
export type TokenImportanceSamplingMode = 'token_truncate' | 'token_mask';

/**
 * Importance sampling for tokens sampled by another engine or an earlier adapter than the one the
 * old log-probs come from: each token's policy-gradient weight is scaled by ρ = π_old / π_sampled,
 * TRL's four ways (trl GRPOTrainer._generate_and_score_completions):
 *
 *   token_*     ρₖ per token;  sequence_*  ρ = exp Σₖ (log π_old − log π_sampled) over the turn's
 *               tokens (a turn is one completion here), the same for all of them
 *   *_truncate  min(ρ, cap) (TIS);  *_mask  ρ, or 0 where ρ > cap (the token or turn leaves the
 *               loss: a sample its sampler found far less likely than the trained policy does)
 *
 * Tokens with no sampled log-prob (NaN) keep their weight and count in no turn's sum.
 */
export function applyImportanceWeights(
  pgWeights: Float64Array,
  old: Float32Array,
  targets: Targets,
  cap: number,
  mode: ImportanceSamplingMode = 'token_truncate',
): void {
  const known = (j: number) => !Number.isNaN(targets.sampleLogprob[j]!);
  const logRatio = (j: number) => old[j]! - targets.sampleLogprob[j]!;
  const weigh = (ratio: number) =>
    mode.endsWith('_truncate') ? Math.min(ratio, cap) : ratio > cap ? 0 : ratio;
  if (mode.startsWith('token_')) {
    for (let j = 0; j < targets.count; j++)
      if (known(j)) pgWeights[j]! *= weigh(Math.exp(logRatio(j)));
    return;
  }
  // A turn's tokens may be spread over packed rows: sum by (trajectory, turn).
  const turnOf = (j: number) => `${targets.trajectory[j]}:${targets.turn[j]}`;
  const sums = new Map<string, number>();
  for (let j = 0; j < targets.count; j++)
    if (known(j)) sums.set(turnOf(j), (sums.get(turnOf(j)) ?? 0) + logRatio(j));
  for (let j = 0; j < targets.count; j++)
    if (known(j)) pgWeights[j]! *= weigh(Math.exp(sums.get(turnOf(j))!));
}
