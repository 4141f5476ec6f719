import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { type ChatMessage, ConfigError, type Trajectory } from '@flowgrpo/core';
import type { DecoderConfig, DeviceRequest, ModelWeights, Tokenizer } from '@flowgrpo/models';
import {
  type ArtifactsManifest,
  initLoraParams,
  type LoraParams,
  loadHfModel,
  loadLoraAdapter,
  readArtifactsManifest,
  vocabChunks,
} from '@flowgrpo/models';
import { writeReport } from '../report/report.js';
import { AlarmStopError, stoppingAlarm } from '../run/alarms.js';
import { checkpointName } from '../run/checkpoint.js';
import {
  checkArtifactsBaseWeights,
  checkArtifactsCheckpointing,
  checkArtifactsLora,
  checkSftConfig,
  learningRateAt,
  parseConfig,
  policyOptions,
  type SFTConfig,
  type SFTConfigInput,
  SFTConfigSchema,
} from '../run/config.js';
import { EpochCursor } from '../run/data-order.js';
import { checkSftMemory } from '../run/memory-check.js';
import { describeEstimate } from '../run/memory-estimate.js';
import { type Progress, silentProgress } from '../run/progress.js';
import type { MetricsRecord } from '../run/run-dir.js';
import { RunLifecycle } from '../run/run-lifecycle.js';
import type { RunLock } from '../run/run-lock.js';
import {
  packMicroBatches,
  rowsFromTrajectories,
  type TrainRow,
  targetsOf,
} from '../update/collate.js';
import { LoraPolicy } from '../update/lora-policy.js';
import { packRows } from '../update/packing.js';

// Supervised fine-tuning with LoRA — the SFT → GRPO seed's warm start. Examples in TRL's dataset
// formats (conversational `messages`, `prompt`/`completion`, plain `text`) or recorded
// trajectories (the loss on the planner's action tokens only), tokenized once; loss on the
// assistant tokens only; optionally packed several to a row (TRL's `packing`, packing.ts);
// batches split into token-budgeted micro-batches whose gradients add up exactly; evaluation loss
// with early stopping; the same checkpoints, metrics and report as GRPO.

/** Tokenizer and generation files a model folder may hold (copied into full checkpoints). */
const TOKENIZER_FILES = [
  'tokenizer.json',
  'tokenizer_config.json',
  'special_tokens_map.json',
  'generation_config.json',
  'tok.bin',
];

export type SFTExample =
  | { messages: ChatMessage[] }
  | { prompt: string; completion: string }
  | { text: string }
  | { trajectory: Trajectory };

export interface SFTTrainerOptions {
  config: SFTConfigInput;
  /** LoRA: an artifacts directory built with a LoRA config matching `config.lora`. */
  artifacts?: string;
  /**
   * Full fine-tuning (`use_peft: false`): the model, as an HF folder (its tokenizer files are
   * copied into every checkpoint, which is then a complete HF model folder) or as weights.
   */
  model?: string | ModelWeights;
  tokenizer: Tokenizer;
  trainDataset: readonly SFTExample[];
  /** Held-out examples: the eval loss (and early stopping) is computed on them. */
  evalDataset?: readonly SFTExample[];
  adapter?: string | LoraParams;
  device?: DeviceRequest;
  progress?: Progress;
  signal?: AbortSignal;
  onLog?: (record: MetricsRecord) => void;
  baseModel?: string;
  /** A lock on output_dir the caller already holds (claimOutputDir), kept after the run. */
  lock?: RunLock;
  /**
   * Bytes the memory preflight compares its estimate with (default: what the machine, and its
   * cgroup's limit, have free): for tests, and for a caller who knows better.
   */
  availableMemory?: number;
}

export interface SFTResult {
  globalStep: number;
  /** The checkpoint with the lowest eval loss (or the last one without an eval set). */
  bestCheckpoint: string;
  bestEvalLoss: number | undefined;
  checkpoint: string;
  metrics: MetricsRecord[];
  report: string;
  stopped: 'max_steps' | 'early_stopping' | 'aborted';
}

/** One example as a training row: ids, the loss mask, and nothing sampled. */
export function sftRows(
  example: SFTExample,
  tokenizer: Tokenizer,
  o: { assistantOnly: boolean; maxLength: number },
): TrainRow[] {
  const eos = tokenizer.eosTokenId === undefined ? [] : [tokenizer.eosTokenId];
  let rows: TrainRow[];
  const row = (tokens: number[], mask: number[]): TrainRow => ({
    tokens: Int32Array.from(tokens),
    mask: Uint8Array.from(mask),
    logprobs: new Float32Array(tokens.length).fill(Number.NaN),
    advantage: 1,
    trajectory: 0,
    turn: 0,
  });
  if ('trajectory' in example) {
    rows = rowsFromTrajectories([example.trajectory], [1]);
  } else if ('text' in example) {
    const ids = [...tokenizer.encode(example.text, { addBos: true }), ...eos];
    rows = [
      row(
        ids,
        ids.map(() => 1),
      ),
    ];
  } else if ('prompt' in example) {
    const p = Array.from(tokenizer.encode(example.prompt, { addBos: true }));
    const c = [...tokenizer.encode(example.completion), ...eos];
    rows = [row([...p, ...c], [...p.map(() => 0), ...c.map(() => 1)])];
  } else {
    if (!tokenizer.applyChatTemplate)
      throw new ConfigError('conversational examples need a tokenizer with a chat template', {
        key: 'tokenizer',
      });
    // Assistant spans by prefix rendering: the tokens of messages[0..i] with the generation
    // prompt are a prefix of those of messages[0..i] (ChatML and the Qwen templates keep this).
    const msgs = example.messages;
    const full = Array.from(
      tokenizer.encode(tokenizer.applyChatTemplate(msgs, { addGenerationPrompt: false })),
    );
    const mask = full.map(() => (o.assistantOnly ? 0 : 1));
    if (o.assistantOnly)
      msgs.forEach((m, i) => {
        if (m.role !== 'assistant') return;
        const start = tokenizer.encode(
          tokenizer.applyChatTemplate!(msgs.slice(0, i), { addGenerationPrompt: true }),
        ).length;
        const end = tokenizer.encode(
          tokenizer.applyChatTemplate!(msgs.slice(0, i + 1), { addGenerationPrompt: false }),
        ).length;
        for (let k = start; k < Math.min(end, full.length); k++) mask[k] = 1;
      });
    rows = [row(full, mask)];
  }
  // Longer than max_length: keep the end (where the answer is).
  return rows.map((r) => {
    if (r.tokens.length <= o.maxLength) return r;
    const cut = r.tokens.length - o.maxLength;
    return {
      ...r,
      tokens: r.tokens.slice(cut),
      mask: r.mask.slice(cut),
      logprobs: r.logprobs.slice(cut),
    };
  });
}

export class SFTTrainer {
  readonly config: SFTConfig;
  readonly #o: SFTTrainerOptions;

  constructor(options: SFTTrainerOptions) {
    this.config = parseConfig(SFTConfigSchema, options.config, 'SFT config');
    checkSftConfig(this.config);
    this.#o = options;
    if (options.trainDataset.length === 0)
      throw new ConfigError('the train dataset is empty', { key: 'trainDataset' });
  }

  async train(): Promise<SFTResult> {
    const c = this.config;
    const o = this.#o;
    const progress = o.progress ?? silentProgress;
    // LoRA over an artifacts directory, or (use_peft: false) every weight of the model.
    const full = !c.use_peft;
    let model: ModelWeights | undefined;
    let modelConfig: DecoderConfig;
    let manifest: ArtifactsManifest | undefined;
    if (full) {
      if (!o.model)
        throw new ConfigError(
          'use_peft: false (full fine-tuning) needs `model`: an HF folder or weights',
          {
            key: 'model',
          },
        );
      model = typeof o.model === 'string' ? await loadHfModel(o.model, { dtype: 'F32' }) : o.model;
      modelConfig = model.config;
    } else {
      if (!o.artifacts)
        throw new ConfigError('LoRA training needs `artifacts` built with a LoRA config', {
          key: 'artifacts',
        });
      manifest = readArtifactsManifest(o.artifacts);
      checkArtifactsLora(c.lora, manifest.lora);
      checkArtifactsCheckpointing(c.gradient_checkpointing, manifest.gradientCheckpointing);
      checkArtifactsBaseWeights(c.base_weights_dtype, manifest.baseWeightsDtype);
      modelConfig = manifest.config;
    }
    // ---- memory: refused here, before output_dir or a session, when the peak will not fit ------
    if (!c.skip_memory_check) {
      const estimate = checkSftMemory(
        c,
        {
          config: modelConfig,
          lora: manifest?.lora,
          // Full fine-tuning builds its graphs here, with the default vocabulary chunks.
          headChunk:
            manifest?.vocabChunks?.size ??
            (full ? vocabChunks(modelConfig.vocabSize).size : modelConfig.vocabSize),
          maxPositions: manifest?.maxPositions ?? c.max_length + 1,
          halfProjections: manifest?.baseWeightsDtype !== undefined,
        },
        o.availableMemory,
      );
      // The total and a warning only: `flowgrpo train`'s preflight has printed the terms already.
      for (const line of describeEstimate(estimate, { terms: false })) progress.log(line);
    }
    // ---- output_dir (lock, HF's rules), then resume or start ----------------------------------
    const life = await RunLifecycle.open({
      ...c,
      trainer: 'sft',
      modelConfig,
      inputs: [
        ...(typeof o.model === 'string' ? [{ key: 'model', path: o.model }] : []),
        ...(o.artifacts ? [{ key: 'artifacts', path: o.artifacts, runProduct: true }] : []),
        ...(typeof o.adapter === 'string'
          ? [{ key: 'adapter', path: o.adapter, runProduct: true }]
          : []),
      ],
      ...(o.lock && { lock: o.lock }),
      log: (line) => progress.log(line),
    });
    try {
      return await this.#train(life, { model, modelConfig, manifest });
    } finally {
      life.close();
    }
  }

  async #train(
    life: RunLifecycle,
    m: {
      model: ModelWeights | undefined;
      modelConfig: DecoderConfig;
      manifest: ArtifactsManifest | undefined;
    },
  ): Promise<SFTResult> {
    const c = this.config;
    const o = this.#o;
    const progress = o.progress ?? silentProgress;
    const run = life.run;
    const full = !c.use_peft;
    const { model, modelConfig, manifest } = m;
    const tok = { assistantOnly: c.assistant_only_loss, maxLength: c.max_length };
    const examples = o.trainDataset.map((e) => sftRows(e, o.tokenizer, tok));
    // The unit a batch is made of: an example's rows, or (packing, as TRL packs the dataset
    // once before training) one packed row. The evaluation set stays unpacked: same loss.
    const units: TrainRow[][] = c.packing
      ? packRows(examples.flat(), c.max_length, c.packing_strategy).map((r) => [r])
      : examples;
    if (units.length === 0)
      throw new ConfigError('no example of the train dataset has a token to train on', {
        key: 'trainDataset',
      });
    const evalRows = (o.evalDataset ?? []).flatMap((e) => sftRows(e, o.tokenizer, tok));

    const start = await life.start(
      {
        global_step: 0,
        batches: 0,
        epoch: 0,
        data_cursor: 0,
        rng: { seed: c.seed, scheme: 'order = permutation(seed, epoch)' },
        nan_steps_skipped: 0,
        log_history: [],
        extra: {
          best_eval_loss: null,
          best_checkpoint: null,
          evals_without_improvement: 0,
          num_tokens: 0,
        },
        config: { ...c },
      },
      async (): Promise<LoraParams | undefined> => {
        if (!manifest) return undefined;
        if (typeof o.adapter === 'string')
          return (await loadLoraAdapter(o.adapter, manifest.config)).params;
        return (
          (typeof o.adapter === 'object' ? o.adapter : undefined) ??
          initLoraParams(manifest.config, manifest.lora!, `${c.seed}:lora`)
        );
      },
    );
    const { state, params, optimizer: optimizerState } = start;
    run.writeJson('config.json', {
      trainer: 'sft',
      ...c,
      ...(o.artifacts && { artifacts: resolve(o.artifacts) }),
      ...(typeof o.model === 'string' && { model: resolve(o.model) }),
    });

    const common = {
      device: o.device ?? 'cpu',
      ...policyOptions(c),
      ...(optimizerState && { state: optimizerState }),
    };
    const policy = full
      ? await LoraPolicy.openFull({
          ...common,
          weights: model!,
          dir: run.path('graphs'),
          ...(params && { params }),
          maxPositions: c.max_length + 1,
        })
      : await LoraPolicy.open({ ...common, artifacts: o.artifacts!, params: params! });
    // A full fine-tuning checkpoint is a complete HF folder: the tokenizer goes with it.
    const extraFiles =
      full && typeof o.model === 'string'
        ? TOKENIZER_FILES.map((f) => join(o.model as string, f)).filter((f) => existsSync(f))
        : [];
    const extra = state.extra as {
      best_eval_loss: number | null;
      best_checkpoint: string | null;
      evals_without_improvement: number;
      num_tokens?: number;
    };
    const evalLoss = async (): Promise<number> => {
      const targets = targetsOf(evalRows);
      const lp = await policy.logprobs(evalRows, targets, {
        loraScale: 1,
        temperature: 1,
        maxTokensPerMicrobatch: c.max_tokens_per_microbatch,
      });
      let s = 0;
      for (const x of lp) s -= x;
      return s / Math.max(1, lp.length);
    };
    let stopped: SFTResult['stopped'] = 'max_steps';
    let lastCheckpoint = '';
    const save = async (o2: { keepAll?: boolean } = {}) => {
      // save_total_limit counts the checkpoints besides the best, which is never rotated away.
      lastCheckpoint = await life.saveCheckpoint(
        {
          config: modelConfig,
          lora: policy.lora,
          ...(model && { model }),
          extraFiles,
          state: await policy.exportState(),
          trainer: state,
          ...(o.baseModel && { baseModel: o.baseModel }),
        },
        { limit: o2.keepAll ? 0 : c.save_total_limit, keep: extra.best_checkpoint ?? undefined },
      );
      return lastCheckpoint;
    };
    try {
      const bar = progress.start('SFT', c.max_steps);
      bar.update(state.global_step);
      let inARow = 0;
      const cursor = new EpochCursor(units.length, c.seed, state);
      while (state.global_step < c.max_steps) {
        if (o.signal?.aborted) {
          stopped = 'aborted';
          break;
        }
        const t0 = performance.now();
        const rows = cursor.take(c.per_device_train_batch_size).flatMap((i) => units[i]!);
        const targets = targetsOf(rows);
        // What the graph computes: the rows of the micro-batches, each padded to its longest.
        const mbs = packMicroBatches(rows, targets, c.max_tokens_per_microbatch);
        let tokens = 0;
        let slots = 0;
        for (const mb of mbs) {
          for (const ri of mb.rows) tokens += rows[ri]!.tokens.length;
          slots += mb.rows.length * mb.seqLen;
        }
        extra.num_tokens = (extra.num_tokens ?? 0) + tokens;
        const lr = learningRateAt(state.global_step + 1, c);
        const r = await policy.update(
          rows,
          targets,
          { nllWeights: new Float64Array(targets.count).fill(1 / Math.max(1, targets.count)) },
          {
            learningRate: lr,
            temperature: 1,
            epsilonLow: 0.2,
            epsilonHigh: 0.2,
            beta: 0,
            klEstimator: 'k3',
            maxTokensPerMicrobatch: c.max_tokens_per_microbatch,
          },
        );
        state.global_step++;
        state.batches++;
        if (r.skipped) {
          state.nan_steps_skipped++;
          if (++inARow >= c.max_nan_steps_in_a_row)
            throw new ConfigError(
              `SFT: ${inARow} updates in a row were not finite (step ${state.global_step}); lower learning_rate`,
              {
                key: 'learning_rate',
              },
            );
        } else inARow = 0;
        const record: MetricsRecord = {
          step: state.global_step,
          epoch: cursor.epochs,
          loss: r.stats.nll_loss,
          train_loss: r.stats.nll_loss,
          grad_norm: r.gradNorm,
          learning_rate: lr,
          entropy: r.stats.entropy_sum,
          // TRL's: tokens trained on so far (padding excluded).
          num_tokens: extra.num_tokens,
          // This step: tokens, the share carrying loss, rows and micro-batches through the
          // graph, and the share of the graph's token slots that is padding.
          'train/tokens': tokens,
          trainable_token_ratio: tokens === 0 ? 0 : targets.count / tokens,
          'train/rows': mbs.reduce((s, mb) => s + mb.rows.length, 0),
          'train/micro_batches': mbs.length,
          'train/padding_ratio': slots === 0 ? 0 : 1 - tokens / slots,
          nan_steps_skipped: state.nan_steps_skipped,
          'timing/train_s': (performance.now() - t0) / 1000,
        };
        const evalNow =
          evalRows.length > 0 &&
          ((c.eval_steps > 0 && state.global_step % c.eval_steps === 0) ||
            state.global_step >= c.max_steps);
        if (evalNow) {
          const loss = await evalLoss();
          record.eval_loss = loss;
          // As HF's EarlyStoppingCallback: any lower loss is the new best checkpoint, but only
          // an improvement larger than the threshold resets the patience counter.
          const best = extra.best_eval_loss;
          if (best === null || best - loss > c.early_stopping_threshold)
            extra.evals_without_improvement = 0;
          else extra.evals_without_improvement++;
          if (best === null || loss < best) {
            extra.best_eval_loss = loss;
            // Named before the save, so that the checkpoint's own trainer_state records itself
            // as the best (a resumed run keeps it through rotation).
            extra.best_checkpoint = join(run.dir, checkpointName(state.global_step));
            await save();
          }
        }
        state.log_history.push(record as Record<string, number>);
        if (
          state.global_step % c.logging_steps === 0 ||
          evalNow ||
          state.global_step >= c.max_steps
        ) {
          const logged = run.logMetrics(record);
          o.onLog?.(record);
          // An alarm the config stops on (alarms.stop_on): this step's model is kept, beside
          // every checkpoint before it, and the run ends with the alarm named.
          const alarm = stoppingAlarm(logged, c.alarms.stop_on);
          if (alarm) {
            const checkpoint = lastCheckpoint.endsWith(`-${state.global_step}`)
              ? lastCheckpoint
              : await save({ keepAll: true });
            await run.guard(join(run.dir, 'report.html'), () =>
              writeReport(run.dir, { title: `SFT run — ${run.dir}`, metrics: run.readMetrics() }),
            );
            throw new AlarmStopError({
              alarm: alarm.name,
              step: state.global_step,
              value: alarm.value,
              checkpoint,
            });
          }
        }
        bar.update(state.global_step, {
          loss: r.stats.nll_loss,
          ...(extra.best_eval_loss !== null && { eval_loss: extra.best_eval_loss }),
        });
        if (
          c.save_steps > 0 &&
          state.global_step % c.save_steps === 0 &&
          !lastCheckpoint.endsWith(`-${state.global_step}`)
        )
          await save();
        if (
          c.early_stopping_patience > 0 &&
          extra.evals_without_improvement >= c.early_stopping_patience
        ) {
          stopped = 'early_stopping';
          progress.log(
            `SFT: eval loss has not improved for ${extra.evals_without_improvement} evaluations; stopping at step ${state.global_step} (best ${extra.best_eval_loss?.toFixed(4)})`,
          );
          break;
        }
      }
      bar.stop();
      if (!lastCheckpoint.endsWith(`-${state.global_step}`)) await save();
      const report = await run.guard(join(run.dir, 'report.html'), () =>
        writeReport(run.dir, { title: `SFT run — ${run.dir}`, metrics: run.readMetrics() }),
      );
      return {
        globalStep: state.global_step,
        bestCheckpoint: extra.best_checkpoint ?? lastCheckpoint,
        bestEvalLoss: extra.best_eval_loss ?? undefined,
        checkpoint: lastCheckpoint,
        metrics: run.readMetrics(),
        report,
        stopped,
      };
    } finally {
      await policy.release();
    }
  }
}
