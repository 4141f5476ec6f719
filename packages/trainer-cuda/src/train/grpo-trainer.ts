import { join, resolve } from 'node:path';
import type { PolicyEngine, RolloutAgent } from '@flowgrpo/agent';
import {
  ConfigError,
  createRng,
  FlowGrpoError,
  type SampleRow,
  type Trajectory,
} from '@flowgrpo/core';
import {
  computeAdvantages,
  filterZeroVarianceGroups,
  grpoMetrics,
  type LossAggregation,
} from '@flowgrpo/grpo';
import type { DeviceRequest, Tokenizer } from '@flowgrpo/models';
import {
  DecoderArtifacts,
  DecoderGenerator,
  expectAbortListeners,
  greedy,
  initLoraParams,
  LocalPolicyEngine,
  type LoraParams,
  loadLoraAdapter,
  readArtifactsManifest,
  samplingGraph,
  saveLoraAdapter,
  trainingSampling,
} from '@flowgrpo/models';
import { type RewardFunction, rewardInputFromTrajectory, rewardMetrics } from '@flowgrpo/reward';
import { scoreTrajectory } from './checked-reward.js';
import type { LoadedCheckpoint, TrainerState } from './checkpoint.js';
import { rowsFromTrajectories, targetsOf } from './collate.js';
import {
  checkArtifactsLora,
  type GRPOConfig,
  type GRPOConfigInput,
  GRPOConfigSchema,
  learningRateAt,
  parseConfig,
  policyOptions,
} from './config.js';
import { EpochCursor } from './data-order.js';
import {
  type EvalResult,
  evaluate,
  runOne,
  trajectoryCompletionLength,
  trajectoryToolCalls,
  trajectoryToolErrors,
  trajectoryTurns,
} from './evaluate.js';
import {
  aggregationWeights,
  applyTruncatedImportanceWeights,
  LoraPolicy,
  type UpdateResult,
  updateHyperParams,
} from './lora-policy.js';
import { type Progress, silentProgress } from './progress.js';
import { writeReport } from './report.js';
import {
  countRolloutFailures,
  describeRolloutFailures,
  RolloutsFailedError,
  rolloutFailureMetrics,
} from './rollout-failures.js';
import type { MetricsRecord, RunDirectory } from './run-dir.js';
import { RunLifecycle } from './run-lifecycle.js';
import type { RunLock } from './run-lock.js';
import { withoutTruncated } from './truncation.js';

// Flow-GRPO on a local decoder, in one loop that reads like llama2.c's train.py:
//
//   for each rollout batch:
//     Q queries × G rollouts through the agent (the policy is the planner; tools and fixed roles
//       run as in the app) → rewards → group-relative advantages, broadcast to every turn
//     → filters (zero-variance groups, truncated turns) → token-exact rows
//     → old log-probs (recomputed), reference log-probs (lora_scale 0) when beta ≠ 0
//     → μ optimizer updates (clip, KL, the loss type's aggregation; micro-batches accumulated)
//     → policy refresh (new LoRA tensors in the rollout engine) → log, evaluate, checkpoint
//
// Every random stream derives from `seed` and the batch number, so a run resumed from a
// checkpoint continues exactly as the uninterrupted run would have (CPU EP).

export interface GRPOTrainerOptions {
  config: GRPOConfigInput;
  /** An artifacts directory built with a LoRA config matching `config.lora`. */
  artifacts: string;
  tokenizer: Tokenizer;
  /** Builds the rollout agent around a policy engine (FlowRollout, TagAgent, your own). */
  agent: (policy: PolicyEngine) => RolloutAgent;
  /** Scores a trajectory's final answer against the row's `result` (combine several with combineRewards). */
  reward: RewardFunction<object>;
  trainDataset: readonly SampleRow[];
  evalDataset?: readonly SampleRow[];
  /** The adapter to start from: a PEFT folder or matrices (default: PEFT's init from `seed`). */
  adapter?: string | LoraParams;
  device?: DeviceRequest;
  /**
   * A rollout engine other than the local decode graph (e.g. OpenAIPolicyEngine over vLLM): the
   * adapter is saved after every update and hot-loaded with its `updateAdapter`.
   */
  rolloutEngine?: PolicyEngine;
  progress?: Progress;
  /** Aborting stops the run after saving a checkpoint of the last finished step. */
  signal?: AbortSignal;
  onLog?: (record: MetricsRecord) => void;
  /** Name of the base model in adapter_config.json. */
  baseModel?: string;
  /** A lock on output_dir the caller already holds (claimOutputDir), kept after the run. */
  lock?: RunLock;
}

export interface TrainResult {
  globalStep: number;
  /** The last checkpoint written. */
  checkpoint: string | undefined;
  metrics: MetricsRecord[];
  eval?: EvalResult;
  report: string;
  stopped: 'max_steps' | 'aborted';
}

/** Too many updates in a row had a non-finite loss or gradient norm. */
export class NonFiniteLossError extends FlowGrpoError {
  static override readonly code = 'NON_FINITE_LOSS';
  readonly step: number;
  readonly batch: number;
  readonly queryIds: string[];
  constructor(fields: {
    step: number;
    batch: number;
    queryIds: string[];
    inARow: number;
    reason: string;
  }) {
    super(
      `${fields.inARow} updates in a row had a non-finite ${fields.reason} (last at step ${fields.step}, rollout batch ${fields.batch}, queries ${fields.queryIds.join(', ')}); parameters were left at step ${fields.step}`,
    );
    this.step = fields.step;
    this.batch = fields.batch;
    this.queryIds = fields.queryIds;
  }
}

const AGGREGATION: Record<GRPOConfig['loss_type'], LossAggregation> = {
  grpo: 'seq-mean-token-mean',
  dapo: 'token-mean',
  bnpo: 'token-mean',
  dr_grpo: 'seq-sum-norm',
  flow: 'flow',
};

export class GRPOTrainer {
  readonly config: GRPOConfig;
  readonly #o: GRPOTrainerOptions;
  #life: RunLifecycle | undefined;
  #policy: LoraPolicy | undefined;
  #engine: PolicyEngine | undefined;
  #local: LocalPolicyEngine | undefined;
  #artifacts: DecoderArtifacts | undefined;

  constructor(options: GRPOTrainerOptions) {
    this.config = parseConfig(GRPOConfigSchema, options.config, 'GRPO config');
    this.#o = options;
    if (options.trainDataset.length === 0)
      throw new ConfigError('the train dataset is empty', { key: 'trainDataset' });
    const manifest = readArtifactsManifest(options.artifacts);
    checkArtifactsLora(this.config.lora, manifest.lora);
  }

  /** The run directory, open while train() runs. */
  get #run(): RunDirectory {
    if (!this.#life)
      throw new ConfigError(
        'evaluate() runs inside train(); use evaluate() from the package otherwise',
      );
    return this.#life.run;
  }

  /** The engine rollouts call (the local decode graph unless `rolloutEngine` was given). */
  get engine(): PolicyEngine | undefined {
    return this.#engine;
  }

  async train(): Promise<TrainResult> {
    expectAbortListeners(this.#o.signal, 4 * this.config.rollout_concurrency);
    const c = this.config;
    const o = this.#o;
    const progress = o.progress ?? silentProgress;
    const manifest = readArtifactsManifest(o.artifacts);

    // ---- output_dir (lock, HF's rules), then resume or start ----------------------------------
    const life = await RunLifecycle.open({
      ...c,
      trainer: 'grpo',
      modelConfig: manifest.config,
      startsFrom: [o.artifacts, ...(typeof o.adapter === 'string' ? [o.adapter] : [])],
      ...(o.lock && { lock: o.lock }),
      log: (line) => progress.log(line),
    });
    this.#life = life;
    try {
      return await this.#train(life, manifest);
    } finally {
      life.close();
      this.#life = undefined;
    }
  }

  async #train(
    life: RunLifecycle,
    manifest: ReturnType<typeof readArtifactsManifest>,
  ): Promise<TrainResult> {
    const c = this.config;
    const o = this.#o;
    const progress = o.progress ?? silentProgress;
    const G = c.num_generations;
    const Q = c.queries_per_step;
    let state: TrainerState = {
      global_step: 0,
      batches: 0,
      epoch: 0,
      data_cursor: 0,
      rng: {
        seed: c.seed,
        scheme: 'order = permutation(seed, epoch); rollout seeds from (seed, batch)',
      },
      nan_steps_skipped: 0,
      log_history: [],
      config: { ...c },
    };
    let params: LoraParams;
    let optimizerState: LoadedCheckpoint['optimizer'] | undefined;
    const ck = life.resumed;
    if (ck) {
      state = { ...ck.trainer, config: { ...c } };
      params = ck.params;
      optimizerState = ck.optimizer;
    } else if (typeof o.adapter === 'string') {
      params = (await loadLoraAdapter(o.adapter, manifest.config)).params;
    } else {
      params = o.adapter ?? initLoraParams(manifest.config, manifest.lora!, `${c.seed}:lora`);
    }
    this.#run.writeJson('config.json', { trainer: 'grpo', ...c, artifacts: resolve(o.artifacts) });

    // ---- the model, its optimizer, the rollout engine -------------------------------------
    const policy = await LoraPolicy.open({
      artifacts: o.artifacts,
      params,
      device: o.device ?? 'cpu',
      ...policyOptions(c),
      ...(optimizerState && { state: optimizerState }),
    });
    this.#policy = policy;
    try {
      if (o.rolloutEngine) this.#engine = o.rolloutEngine;
      else {
        this.#artifacts = await DecoderArtifacts.open(o.artifacts, {
          graphs: [samplingGraph(manifest, o.device ?? 'cpu')],
          device: o.device ?? 'cpu',
          ...(c.intra_op_threads && { intraOpThreads: c.intra_op_threads }),
        });
        this.#local = new LocalPolicyEngine({
          generator: new DecoderGenerator(this.#artifacts, {
            ...(c.generate_workers !== undefined && { generateWorkers: c.generate_workers }),
          }),
          tokenizer: o.tokenizer,
          model: 'policy',
          defaults: { topK: c.top_k },
          maxBatchSize: Math.max(G, c.rollout_concurrency),
        });
        this.#engine = this.#local;
      }
      await this.#sync(policy.params, state.global_step);
      const agent = o.agent(
        trainingSampling(this.#engine, {
          temperature: c.temperature,
          topP: c.top_p,
          maxTokens: c.max_completion_length,
        }),
      );

      // ---- the loop -----------------------------------------------------------------------------
      const bar = progress.start('GRPO', c.max_steps);
      bar.update(state.global_step);
      let inARow = 0;
      let emptyBatches = Number(state.extra?.empty_batches ?? 0);
      let failedSteps = Number(state.extra?.failed_steps ?? 0);
      const cursor = new EpochCursor(o.trainDataset.length, c.seed, state);
      let lastCheckpoint: string | undefined;
      // The report shows a sample of the last batch's trajectories (every rollout is in Parquet).
      let lastBatch: Trajectory[] = [];
      let finalEval: EvalResult | undefined;
      let stopped: TrainResult['stopped'] = 'max_steps';
      while (state.global_step < c.max_steps) {
        if (o.signal?.aborted) {
          stopped = 'aborted';
          break;
        }
        const t: Record<string, number> = {};
        const time = async <T>(k: string, f: () => Promise<T>): Promise<T> => {
          const s = performance.now();
          try {
            return await f();
          } finally {
            t[k] = (t[k] ?? 0) + (performance.now() - s) / 1000;
          }
        };

        // Queries of this batch, in the seeded order of their epoch.
        const rows = cursor.take(Q).map((i) => o.trainDataset[i]!);
        const batch = state.batches;
        // Steps this batch advances (num_iterations updates, or one empty step): logging, eval
        // and save fire when the batch crosses a multiple of their interval.
        const stepAtStart = state.global_step;
        const crossed = (every: number) =>
          every > 0 && Math.floor(state.global_step / every) > Math.floor(stepAtStart / every);

        // Rollouts: Q groups of G, at most rollout_concurrency at once.
        let trajectories: Trajectory[];
        try {
          trajectories = await time('rollout', () => this.#rollouts(agent, rows, batch));
        } catch (e) {
          if (o.signal?.aborted) {
            stopped = 'aborted';
            break;
          }
          throw e;
        }

        // Rewards and group-relative advantages (broadcast to every planner turn). A reward
        // function's fault (a throw, a result that is no reward) scores 0 and is recorded on the
        // trajectory (metadata.rewardError), as for a crashed rollout: the run goes on.
        const scored = await time('reward', () =>
          Promise.all(
            trajectories.map((tr) => scoreTrajectory(o.reward, rewardInputFromTrajectory(tr), tr)),
          ),
        );
        const failures = countRolloutFailures(trajectories);
        const rewards = Float64Array.from(scored, (r) => r.score);
        const groups = Int32Array.from(trajectories, (_, i) => Math.floor(i / G));
        const advantages = computeAdvantages(rewards, groups, { scale: c.scale_rewards });
        trajectories.forEach((tr, i) => {
          tr.reward = rewards[i]!;
          tr.advantage = advantages[i]!;
          for (const turn of tr.turns ?? []) turn.advantage = advantages[i]!;
        });

        // Filters: zero-variance groups (no gradient anyway) and truncated completions.
        const keep = c.filter_zero_variance_groups
          ? filterZeroVarianceGroups(rewards, groups).keepSample
          : undefined;
        const kept = trajectories
          .map((tr, i) => ({ tr, i }))
          .filter(({ i }) => !keep || keep[i] === 1);
        const trainRows = rowsFromTrajectories(
          kept.map(({ tr }) =>
            c.mask_truncated_completions ? withoutTruncated(tr, c.max_completion_length) : tr,
          ),
          kept.map(({ i }) => advantages[i]!),
        );
        const targets = targetsOf(trainRows);

        // Nothing left to train on (every group filtered, every turn truncated): the batch
        // counts as a step without an update, so a run cannot loop forever on such batches.
        const updates: UpdateResult[] = [];
        const lrs: number[] = [];
        let mismatchSum = 0;
        let mismatchMax = 0;
        let mismatchCount = 0;
        if (targets.count === 0) {
          state.global_step++;
          emptyBatches++;
          // (Rollouts that all failed say so below, with the cause.)
          if (failures.failed < failures.total)
            progress.log(
              `step ${state.global_step}: nothing to train on after the filters; no update`,
            );
        } else {
          // Old log-probs: the first update's own forward, detached (TRL's
          // old_per_token_logps = None; the parameters have not moved yet), which later updates
          // on this batch reuse. Only the importance-sampling correction needs them before the
          // first update: then the logprobs graph computes them (the same bits). Reference
          // log-probs when beta ≠ 0.
          const lpOptions = {
            temperature: c.temperature,
            maxTokensPerMicrobatch: c.max_tokens_per_microbatch,
          };
          let old = c.vllm_importance_sampling_correction
            ? await time('logprobs', () =>
                policy.logprobs(trainRows, targets, { ...lpOptions, loraScale: 1 }),
              )
            : undefined;
          const ref =
            c.beta !== 0
              ? await time('logprobs', () =>
                  policy.logprobs(trainRows, targets, { ...lpOptions, loraScale: 0 }),
                )
              : undefined;
          // Sampler vs trainer log-probs, per token (sampled log-probs are NaN where unknown).
          const compare = (trainer: Float32Array) => {
            for (let j = 0; j < targets.count; j++) {
              const s = targets.sampleLogprob[j]!;
              if (Number.isNaN(s)) continue;
              const d = Math.abs(trainer[j]! - s);
              mismatchSum += d;
              mismatchMax = Math.max(mismatchMax, d);
              mismatchCount++;
            }
          };
          if (old) compare(old);
          const pgWeights = aggregationWeights(targets, AGGREGATION[c.loss_type], {
            maxLen: c.max_completion_length,
          });
          // Truncated importance sampling: the rollout engine's distribution differs from ours.
          if (old && c.vllm_importance_sampling_correction)
            applyTruncatedImportanceWeights(
              pgWeights,
              old,
              targets,
              c.vllm_importance_sampling_cap,
            );

          // μ updates against the same old log-probs.
          for (let it = 0; it < c.num_iterations && state.global_step < c.max_steps; it++) {
            const lr = learningRateAt(state.global_step + 1, c);
            const r = await time('train', () =>
              policy.update(
                trainRows,
                targets,
                { ...(old && { old }), ...(ref && { ref }), pgWeights },
                updateHyperParams(c, lr),
              ),
            );
            if (!old) {
              old = r.logprobs;
              compare(old);
            }
            if (r.skipped) {
              state.nan_steps_skipped++;
              inARow++;
              progress.log(
                `step ${state.global_step + 1}: update skipped (${r.skipped}); parameters unchanged`,
              );
              if (inARow >= c.max_nan_steps_in_a_row)
                throw new NonFiniteLossError({
                  step: state.global_step,
                  batch,
                  queryIds: rows.map((row) => String(row.id)),
                  inARow,
                  reason: r.skipped === 'nonfinite_loss' ? 'loss' : 'gradient norm',
                });
            } else inARow = 0;
            // A skipped update still counts as a step (as TRL does with inf/nan gradients).
            state.global_step++;
            updates.push(r);
            lrs.push(lr);
          }
        }
        state.batches++;
        await time('sync', () => this.#sync(policy.params, state.global_step));

        // Metrics: TRL's names, then flowgrpo's.
        const last = updates.findLast((u) => !u.skipped) ?? updates.at(-1);
        const turns = trajectories.map(trajectoryTurns);
        const calls = trajectories.map(trajectoryToolCalls);
        const toolErrors = trajectories.map(trajectoryToolErrors);
        const totalCalls = calls.reduce((a, b) => a + b, 0);
        const allTokens = trainRows.reduce((s, r) => s + r.tokens.length, 0);
        const record: MetricsRecord = {
          step: state.global_step,
          epoch: cursor.epochs,
          learning_rate: lrs.at(-1) ?? 0,
          ...(last && { loss: last.stats.loss, grad_norm: last.gradNorm }),
          ...grpoMetrics({
            rewards,
            groups,
            completionLengths: trajectories.map(trajectoryCompletionLength),
            ...(last && {
              loss: {
                clipFracLow: last.stats.clip_low_sum,
                clipFracHigh: last.stats.clip_high_sum,
                clipFrac: last.stats.clip_region_sum,
                ...(c.beta !== 0 && { kl: last.stats.kl_sum }),
                entropy: last.stats.entropy_sum,
              },
            }),
          }),
          ...rewardMetrics(scored, o.reward.name),
          ...rolloutFailureMetrics(failures),
          accuracy: mean(Array.from(rewards, (r) => (r >= c.success_threshold ? 1 : 0))),
          'turns/mean': mean(turns),
          'tools/calls_per_trajectory': mean(calls),
          'tools/error_rate':
            totalCalls === 0 ? 0 : toolErrors.reduce((a, b) => a + b, 0) / totalCalls,
          trainable_token_ratio: allTokens === 0 ? 0 : targets.count / allTokens,
          'logprob_mismatch/mean': mismatchCount === 0 ? 0 : mismatchSum / mismatchCount,
          'logprob_mismatch/max': mismatchMax,
          nan_steps_skipped: state.nan_steps_skipped,
          empty_batches: emptyBatches,
          'train/tokens': allTokens,
          'train/micro_batches': last?.microBatches ?? 0,
          'train/tokens_per_s': (allTokens / Math.max(1e-9, t.train ?? 1)) * updates.length,
          ...Object.fromEntries(Object.entries(t).map(([k, v]) => [`timing/${k}_s`, v])),
        };
        // Failed rollouts are said on the step's own line, with the first message of each kind.
        if (failures.failed > 0)
          progress.log(
            `step ${state.global_step}: ${describeRolloutFailures(failures)}${updates.length === 0 ? '; no update' : ''}`,
          );
        failedSteps = failures.failed === failures.total ? failedSteps + 1 : 0;
        state.extra = { ...state.extra, empty_batches: emptyBatches, failed_steps: failedSteps };
        state.log_history.push(record as Record<string, number>);
        // HF's rule: steps L, 2L, … and the last (each record is that batch's own values).
        if (crossed(c.logging_steps) || state.global_step >= c.max_steps) {
          this.#run.logMetrics(record);
          o.onLog?.(record);
        }
        await this.#run.writeRollouts(state.global_step, trajectories);
        lastBatch = trajectories;
        // Every rollout of several steps in a row failed: a broken setup, which more steps would
        // not mend. The checkpoints written so far stay as they are; report.html is written so
        // the failures can be read per step and per trajectory without decoding the Parquet.
        if (failedSteps >= c.max_failed_rollout_steps) {
          await this.#writeReport(lastBatch);
          throw new RolloutsFailedError(
            `every rollout of the last ${failedSteps} steps failed (max_failed_rollout_steps: ${c.max_failed_rollout_steps}); last at step ${state.global_step}`,
            failures,
          );
        }
        bar.update(state.global_step, {
          reward: Number(record.reward),
          acc: Number(record.accuracy),
        });

        if (o.evalDataset && crossed(c.eval_steps) && state.global_step < c.max_steps) {
          const ev = await this.evaluate(o.evalDataset, `step-${state.global_step}`);
          this.#run.logMetrics({ step: state.global_step, ...evalMetrics(ev) });
        }
        if (crossed(c.save_steps)) {
          lastCheckpoint = await this.#checkpoint(state);
        }
      }
      bar.stop();

      if (stopped === 'aborted') progress.log('stopping: writing a final checkpoint');
      if (!lastCheckpoint?.endsWith(`checkpoint-${state.global_step}`))
        lastCheckpoint = await this.#checkpoint(state);
      if (o.evalDataset && stopped === 'max_steps') {
        finalEval = await this.evaluate(o.evalDataset, 'final');
        this.#run.logMetrics({ step: state.global_step, ...evalMetrics(finalEval) });
      }
      const report = await this.#writeReport(lastBatch, finalEval);
      return {
        globalStep: state.global_step,
        checkpoint: lastCheckpoint,
        metrics: this.#run.readMetrics(),
        ...(finalEval && { eval: finalEval }),
        report,
        stopped,
      };
    } finally {
      await this.close();
    }
  }

  /** report.html from metrics.jsonl so far, the last batch's trajectories and the final eval. */
  #writeReport(lastBatch: readonly Trajectory[], finalEval?: EvalResult): Promise<string> {
    return this.#run.guard(join(this.#run.dir, 'report.html'), () =>
      writeReport(this.#run.dir, {
        title: `GRPO run — ${this.#run.dir}`,
        metrics: this.#run.readMetrics(),
        ...(finalEval && { evals: [finalEval] }),
        trajectories: lastBatch.slice(0, 32),
      }),
    );
  }

  /** Evaluates the current policy (greedy) on `dataset`. */
  async evaluate(dataset: readonly SampleRow[], name = 'eval'): Promise<EvalResult> {
    if (!this.#engine)
      throw new ConfigError(
        'evaluate() runs inside train(); use evaluate() from the package otherwise',
      );
    const c = this.config;
    const progress = this.#o.progress ?? silentProgress;
    const bar = progress.start('eval', dataset.length);
    const result = await evaluate({
      agent: this.#o.agent(greedy(this.#engine)),
      dataset,
      reward: this.#o.reward,
      concurrency: c.rollout_concurrency,
      successThreshold: c.success_threshold,
      seed: c.seed,
      name,
      ...(this.#o.signal && { signal: this.#o.signal }),
      onProgress: (done, _total, correct) => bar.update(done, { acc: correct / done }),
    });
    bar.stop();
    this.#run.writeJson(join('eval', `${name}.json`), result);
    return result;
  }

  async close(): Promise<void> {
    await this.#policy?.release();
    this.#policy = undefined;
    await this.#artifacts?.release();
    this.#artifacts = undefined;
  }

  async #rollouts(
    agent: RolloutAgent,
    rows: readonly SampleRow[],
    batch: number,
  ): Promise<Trajectory[]> {
    const c = this.config;
    const G = c.num_generations;
    const base = createRng(`${c.seed}:rollouts:${batch}`).nextUint32();
    const jobs = rows.flatMap((row, q) => Array.from({ length: G }, (_, g) => ({ row, q, g })));
    const out: Trajectory[] = new Array(jobs.length);
    let next = 0;
    const worker = async () => {
      for (;;) {
        const k = next++;
        if (k >= jobs.length) return;
        const { row, q, g } = jobs[k]!;
        out[k] = await runOne(agent, row, base + q * G + g, this.#o.signal, {
          queryId: String(row.id),
          groupId: `batch-${batch}/q-${q}`,
          index: g,
        });
      }
    };
    await Promise.all(Array.from({ length: Math.min(c.rollout_concurrency, jobs.length) }, worker));
    return out;
  }

  /** New adapter → rollout engine: in place for the local engine, saved + hot-loaded for a server. */
  async #sync(params: LoraParams, step: number): Promise<void> {
    if (this.#local) {
      this.#local.generator.setLora(params);
      return;
    }
    const engine = this.#engine!;
    if (!engine.updateAdapter) return;
    const dir = join(this.#run.dir, 'adapters', `step-${step}`);
    await saveLoraAdapter(dir, this.#policy!.config, this.#policy!.lora!, params, {
      ...(this.#o.baseModel && { baseModel: this.#o.baseModel }),
    });
    await engine.updateAdapter({ name: 'flowgrpo-policy', path: dir });
  }

  async #checkpoint(state: TrainerState): Promise<string> {
    const policy = this.#policy!;
    return this.#life!.saveCheckpoint(
      {
        config: policy.config,
        lora: policy.lora!,
        state: await policy.exportState(),
        trainer: state,
        ...(this.#o.baseModel && { baseModel: this.#o.baseModel }),
      },
      { limit: this.config.save_total_limit },
    );
  }
}

function mean(xs: readonly number[]): number {
  return xs.length === 0 ? 0 : xs.reduce((a, b) => a + b, 0) / xs.length;
}

/** eval/* metrics of an evaluation, for metrics.jsonl. */
export function evalMetrics(e: EvalResult): MetricsRecord {
  return {
    'eval/accuracy': e.accuracy,
    'eval/accuracy_ci_low': e.accuracy_ci95[0],
    'eval/accuracy_ci_high': e.accuracy_ci95[1],
    'eval/reward': e.reward_mean,
    'eval/format_compliance': e.format_compliance,
    'eval/turns_mean': e.turns_mean,
    'eval/tool_calls_per_trajectory': e.tool_calls_per_trajectory,
    'eval/tool_error_rate': e.tool_error_rate,
    'eval/completion_length': e.completion_length_mean,
    'eval/time_s': e.time_s,
  };
}
