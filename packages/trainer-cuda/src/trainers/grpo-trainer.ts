import { join, resolve } from 'node:path';
import type { PolicyEngine, RolloutAgent } from '@flowgrpo/agent';
import { ConfigError, expectAbortListeners, type SampleRow, type Trajectory } from '@flowgrpo/core';
import type { DeviceRequest, Tokenizer } from '@flowgrpo/models';
import {
  DecoderArtifacts,
  DecoderGenerator,
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
import {
  type RewardFunction,
  type RewardResult,
  rewardInputFromTrajectory,
} from '@flowgrpo/reward';
import { scoreTrajectory } from '../eval/checked-reward.js';
import { type EvalResult, evaluate, runOne } from '../eval/evaluate.js';
import { mapConcurrent } from '../eval/map-concurrent.js';
import { countRolloutFailures, type RolloutFailures } from '../eval/rollout-failures.js';
import { type BestModelRule, bestModelRule } from '../run/best-model.js';
import type { RolloutPolicy, TrainerState } from '../run/checkpoint.js';
import {
  checkArtifactsBaseWeights,
  checkArtifactsCheckpointing,
  checkArtifactsLora,
  checkArtifactsSamplingWeights,
  type GRPOConfig,
  type GRPOConfigInput,
  GRPOConfigSchema,
  parseConfig,
  policyOptions,
} from '../run/config.js';
import { checkGrpoMemory } from '../run/memory-check.js';
import { describeEstimate, type MemoryEstimate } from '../run/memory-estimate.js';
import { type Progress, silentProgress } from '../run/progress.js';
import { type QuerySampler, querySampler } from '../run/query-sampler.js';
import type { MetricsRecord, RunDirectory } from '../run/run-dir.js';
import { RunLifecycle } from '../run/run-lifecycle.js';
import type { RunLock } from '../run/run-lock.js';
import type { StepClock } from '../run/step-clock.js';
import { type GrpoUpdateResult, grpoUpdate, noUpdate } from '../update/grpo-update.js';
import { LoraPolicy } from '../update/lora-policy.js';
import { NonFiniteGuard } from '../update/non-finite-guard.js';
import { type TrainablePolicy, WorkerLoraPolicy } from '../update/policy-worker.js';
import { type ScoredBatch, scoreBatch } from '../update/scored-batch.js';
import {
  AsyncRollouts,
  checkMaxStaleness,
  rolloutLookahead,
  trajectoryStaleness,
} from './async-rollouts.js';
import { freshGRPOState } from './grpo-state.js';
import { rolloutJobs } from './rollout-jobs.js';
import { RunBook } from './run-book.js';
import { ServedVersions, servesVersions } from './served-versions.js';
import { stepRecord } from './step-record.js';

// Flow-GRPO on a local decoder, in one loop that reads like llama2.c's train.py — six phases
// (#loop below):
//
//   for each rollout batch:
//     1. rollout   Q queries × G rollouts through the agent (the policy is the planner; tools and
//                  fixed roles run as in the app) — or, with max_staleness ≥ 1, the batch the
//                  sampler drew while the earlier updates ran (async-rollouts.ts)
//     2. score     rewards → group-relative advantages, broadcast to every turn → filters
//                  (zero-variance groups, truncated turns) → token-exact rows: a ScoredBatch
//                  (scored-batch.ts)
//     3. update    old log-probs, reference log-probs when beta ≠ 0, token weights, μ optimizer
//                  updates (grpo-update.ts, the same for the gateway's trainers) → the rollout
//                  engine gets the new LoRA tensors
//     4. metrics   TRL's names, then flowgrpo's (step-record.ts, every GRPO trainer's record)
//     5. log       metrics.jsonl with its alarms, the rollouts as Parquet, the stopping rules
//     6. eval / save
//
// The counters and the rules of 5, 6 and the run's end are the book every GRPO trainer keeps
// (run-book.ts). Every random stream derives from `seed` and the batch number, so a run resumed
// from a checkpoint continues exactly as the uninterrupted run would have (CPU EP).

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
   * adapter is saved after every update and hot-loaded with its `updateAdapter` — or, with
   * max_staleness ≥ 1, each version a batch is sampled from is loaded under its own name
   * (served-versions.ts).
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
  /**
   * Bytes the memory preflight compares its estimate with (default: what the machine, and its
   * cgroup's limit, have free): for tests, and for a caller who knows better.
   */
  availableMemory?: number;
}

/** A batch's questions and rollouts (their staleness when sampled ahead: max_staleness). */
interface DrawnBatch {
  rows: SampleRow[];
  trajectories: Trajectory[];
  /** Per trajectory: optimizer steps between its adapter and the one trained on it. */
  staleness?: number[];
}

/** A batch's rollouts, scored: each reward function result, the failures, the ScoredBatch. */
interface ScoredRollouts {
  scored: RewardResult<object>[];
  failures: RolloutFailures;
  batch: ScoredBatch;
}

export interface TrainResult {
  globalStep: number;
  /** The last checkpoint written. */
  checkpoint: string | undefined;
  metrics: MetricsRecord[];
  eval?: EvalResult;
  /**
   * With load_best_model_at_end: the checkpoint of the best evaluation (the final one included)
   * and its metric — the adapter to use, as HF loads it at the end.
   */
  bestCheckpoint?: string;
  bestMetric?: number;
  report: string;
  stopped: 'max_steps' | 'aborted';
}

export { NonFiniteLossError } from '../update/non-finite-guard.js';

/** The first questions whose length the memory preflight reads (encoding every one would be slow). */
const PROMPT_SAMPLE_ROWS = 16;

export class GRPOTrainer {
  readonly config: GRPOConfig;
  readonly #o: GRPOTrainerOptions;
  readonly #bestModel: BestModelRule | undefined;
  #life: RunLifecycle | undefined;
  #policy: TrainablePolicy | undefined;
  #engine: PolicyEngine | undefined;
  #local: LocalPolicyEngine | undefined;
  #artifacts: DecoderArtifacts | undefined;
  /** The sampler running ahead of the updates (max_staleness ≥ 1), while train() runs. */
  #ahead: AsyncRollouts | undefined;
  /** With a rolloutEngine and max_staleness ≥ 1: the versions loaded on its servers. */
  #versions: ServedVersions | undefined;
  /** The run's state while train() runs (the version an evaluation is served from). */
  #state: TrainerState | undefined;

  constructor(options: GRPOTrainerOptions) {
    this.config = parseConfig(GRPOConfigSchema, options.config, 'GRPO config');
    this.#o = options;
    if (options.trainDataset.length === 0)
      throw new ConfigError('the train dataset is empty', { key: 'trainDataset' });
    const manifest = readArtifactsManifest(options.artifacts);
    checkArtifactsLora(this.config.lora, manifest.lora);
    checkArtifactsCheckpointing(this.config.gradient_checkpointing, manifest.gradientCheckpointing);
    if (!options.rolloutEngine)
      checkArtifactsSamplingWeights(this.config.share_sampling_weights, manifest);
    checkArtifactsBaseWeights(this.config.base_weights_dtype, manifest.baseWeightsDtype);
    checkMaxStaleness(this.config, { rolloutEngine: options.rolloutEngine });
    this.#bestModel = bestModelRule(this.config, {
      name: 'GRPOTrainer',
      hasEvalDataset: (options.evalDataset?.length ?? 0) > 0,
    });
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
    // (+ 1: a sampler running ahead listens too, max_staleness.)
    expectAbortListeners(this.#o.signal, 4 * this.config.rollout_concurrency + 1);
    const c = this.config;
    const o = this.#o;
    const progress = o.progress ?? silentProgress;
    const manifest = readArtifactsManifest(o.artifacts);
    // ---- memory: refused here, before output_dir or a session, when the peak will not fit ------
    if (!c.skip_memory_check) {
      const estimate = this.memoryEstimate(manifest);
      // The total and a warning only: `flowgrpo train`'s preflight has printed the terms already.
      for (const line of describeEstimate(estimate, { terms: false })) progress.log(line);
    }

    // ---- output_dir (lock, HF's rules), then resume or start ----------------------------------
    const life = await RunLifecycle.open({
      ...c,
      trainer: 'grpo',
      modelConfig: manifest.config,
      inputs: [
        { key: 'artifacts', path: o.artifacts, runProduct: true },
        ...(typeof o.adapter === 'string'
          ? [{ key: 'adapter', path: o.adapter, runProduct: true }]
          : []),
      ],
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

  /**
   * The run's estimated peak memory (run/memory-check.ts); throws InsufficientMemoryError when it
   * exceeds the memory available. A row is taken as the longest of the first questions (as the
   * tokenizer encodes them; the agent's template is not counted) and every turn's completion.
   */
  memoryEstimate(
    manifest: ReturnType<typeof readArtifactsManifest> = readArtifactsManifest(this.#o.artifacts),
  ): MemoryEstimate {
    const o = this.#o;
    const promptTokens = Math.max(
      0,
      ...o.trainDataset
        .slice(0, PROMPT_SAMPLE_ROWS)
        .map((row) => o.tokenizer.encode(row.question).length),
    );
    return checkGrpoMemory(
      this.config,
      {
        config: manifest.config,
        lora: manifest.lora,
        headChunk: manifest.vocabChunks?.size ?? manifest.config.vocabSize,
        maxPositions: manifest.maxPositions,
        halfProjections: manifest.baseWeightsDtype !== undefined,
        promptTokens,
        localRollouts: !o.rolloutEngine,
      },
      o.availableMemory,
    );
  }

  async #train(
    life: RunLifecycle,
    manifest: ReturnType<typeof readArtifactsManifest>,
  ): Promise<TrainResult> {
    const c = this.config;
    const o = this.#o;
    const { state, params, optimizer, rolloutPolicies } = await life.start(
      freshGRPOState(c),
      async () =>
        typeof o.adapter === 'string'
          ? (await loadLoraAdapter(o.adapter, manifest.config)).params
          : (o.adapter ?? initLoraParams(manifest.config, manifest.lora!, `${c.seed}:lora`)),
    );
    this.#run.writeJson('config.json', { trainer: 'grpo', ...c, artifacts: resolve(o.artifacts) });

    // ---- the model, its optimizer, the rollout engine -------------------------------------
    // With rollouts sampled while the update runs, the update runs in its own thread: ONNX
    // Runtime's run blocks the thread it is on, and this one drives the agents (policy-worker.ts).
    const policyOpen = rolloutLookahead(c) > 0 ? WorkerLoraPolicy.open : LoraPolicy.open;
    const policy: TrainablePolicy = await policyOpen({
      artifacts: o.artifacts,
      params,
      device: o.device ?? 'cpu',
      ...policyOptions(c),
      ...(optimizer && { state: optimizer }),
    });
    this.#policy = policy;
    try {
      const agent = await this.#openRolloutEngine(manifest, policy, state.global_step);
      return await this.#loop(agent, policy, state, rolloutPolicies ?? []);
    } finally {
      await this.close();
    }
  }

  /** The rollout engine with the policy's adapter, and the agent sampling it as training does. */
  async #openRolloutEngine(
    manifest: ReturnType<typeof readArtifactsManifest>,
    policy: TrainablePolicy,
    step: number,
  ): Promise<RolloutAgent> {
    const c = this.config;
    const o = this.#o;
    if (o.rolloutEngine) {
      this.#engine = o.rolloutEngine;
      // Sampled ahead: every batch loads the version it is sampled from itself, under its own
      // name; nothing is hot-loaded under the synchronous loop's single name.
      if (rolloutLookahead(c) > 0 && servesVersions(o.rolloutEngine)) {
        this.#versions = new ServedVersions({
          engine: o.rolloutEngine,
          folder: (s) => this.#adapterFolder(s),
          save: (dir, params) => this.#saveAdapter(dir, params),
        });
        return this.#samplingAgent(o.rolloutEngine);
      }
    } else {
      // share_sampling_weights: the decode graph over the mapped weights, nothing prepacked (a
      // copy of its own per Gemm), half projections cast per product; else the fused graph.
      this.#artifacts = await DecoderArtifacts.open(o.artifacts, {
        graphs: [c.share_sampling_weights ? 'decode' : samplingGraph(manifest, o.device ?? 'cpu')],
        device: o.device ?? 'cpu',
        ...(c.intra_op_threads && { intraOpThreads: c.intra_op_threads }),
        ...(c.share_sampling_weights && { prepackWeights: false }),
      });
      this.#local = new LocalPolicyEngine({
        generator: new DecoderGenerator(this.#artifacts, {
          ...(c.generate_workers !== undefined && { generateWorkers: c.generate_workers }),
          // The fused generator would open the generate graph of its own accord.
          ...(c.share_sampling_weights && { useGenerateGraph: false }),
        }),
        tokenizer: o.tokenizer,
        model: 'policy',
        defaults: { topK: c.top_k },
        maxBatchSize: Math.max(c.num_generations, c.rollout_concurrency),
      });
      this.#engine = this.#local;
    }
    await this.#sync(policy.params, step);
    return this.#samplingAgent(this.#engine);
  }

  /** The agent sampling `engine` as training does (the run's temperature, top_p, length). */
  #samplingAgent(engine: PolicyEngine): RolloutAgent {
    const c = this.config;
    return this.#o.agent(
      trainingSampling(engine, {
        temperature: c.temperature,
        topP: c.top_p,
        maxTokens: c.max_completion_length,
      }),
    );
  }

  // ---- the loop: rollout → score → update → metrics → log → eval / save ----------------------
  async #loop(
    agent: RolloutAgent,
    policy: TrainablePolicy,
    state: TrainerState,
    rolloutPolicies: readonly RolloutPolicy[],
  ): Promise<TrainResult> {
    const c = this.config;
    const o = this.#o;
    const progress = this.#progress;
    const bar = progress.start('GRPO', c.max_steps);
    bar.update(state.global_step);
    const guard = new NonFiniteGuard(c.max_nan_steps_in_a_row, (line) => progress.log(line));
    const questions = querySampler(o.trainDataset, c, state);
    const book = new RunBook({
      config: c,
      run: this.#run,
      state,
      save: (rotate) => this.#checkpoint(state, rotate),
      ...(o.evalDataset && { evaluate: (name) => this.evaluate(o.evalDataset!, name) }),
      ...(this.#bestModel && { bestModel: this.#bestModel }),
      title: 'GRPO run',
      log: (line) => progress.log(line),
      ...(o.onLog && { onLog: o.onLog }),
    });
    this.#state = state;
    const ahead = this.#startSampler(agent, state, rolloutPolicies);
    this.#ahead = ahead;
    let stopped: TrainResult['stopped'] = 'max_steps';
    while (state.global_step < c.max_steps) {
      if (o.signal?.aborted) {
        stopped = 'aborted';
        break;
      }
      const step = book.startStep();
      const batch = state.batches;

      // 1. Rollouts: Q groups of G, at most rollout_concurrency at once — sampled now, or by
      //    the sampler while the earlier updates ran (max_staleness).
      const drawn = ahead
        ? await this.#sampledAhead(ahead, questions, policy, state, step)
        : await this.#sampleNow(agent, questions, state, step);
      if (!drawn) {
        stopped = 'aborted';
        break;
      }
      const { rows, trajectories, staleness } = drawn;
      // 2. Rewards → advantages → filters → rows.
      const scored = await this.#scorePhase(trajectories, step);
      // 3. μ updates of the policy on them, then the rollout engine gets the new adapter (the
      //    sampler takes it itself, `lookahead` batches on).
      const update = await this.#updatePhase(policy, scored, book, guard, {
        batch,
        queryIds: rows.map((row) => String(row.id)),
        step,
        offPolicy: ahead !== undefined,
      });
      // 4. Metrics: TRL's names, then flowgrpo's (step-record.ts, every GRPO trainer's).
      const record = stepRecord({
        config: c,
        step: state.global_step,
        epoch: questions.epochs,
        trained: {
          policy: { batch: scored.batch, update, trainSeconds: step.seconds.train },
        },
        rewards: { results: scored.scored, name: o.reward.name },
        failures: scored.failures,
        questions: questions.metrics,
        counters: book.counters,
        seconds: step.seconds,
        ...(staleness && { staleness }),
      });
      // 5. Log (alarms, the stopping rules), write the rollouts.
      await book.log(record, scored.failures, trajectories, step);
      bar.update(state.global_step, {
        reward: Number(record.reward),
        acc: Number(record.accuracy),
      });
      // 6. Evaluate and checkpoint when their intervals are crossed.
      await book.evalSave(step);
    }
    // Batches sampled past the run's last step are discarded, and their versions unloaded.
    await ahead?.close();
    await this.#versions?.releaseAll();
    bar.stop();
    const end = await book.finish(stopped);
    return {
      globalStep: state.global_step,
      checkpoint: end.checkpoint,
      metrics: this.#run.readMetrics(),
      ...(end.eval && { eval: end.eval }),
      ...(end.best && { bestCheckpoint: end.best.checkpoint, bestMetric: end.best.metric }),
      report: end.report,
      stopped,
    };
  }

  /** This batch's questions and their rollouts, sampled now; undefined when aborted. */
  async #sampleNow(
    agent: RolloutAgent,
    questions: QuerySampler,
    state: TrainerState,
    step: StepClock,
  ): Promise<DrawnBatch | undefined> {
    const batch = state.batches;
    const rows = questions.take(state.global_step, batch, this.config.queries_per_step);
    const trajectories = await step.time('rollout', () =>
      this.#rolloutPhase(agent, rows, batch, this.#o.signal),
    );
    return trajectories && { rows, trajectories };
  }

  /**
   * This batch's rollouts as the sampler drew them (its adapter is given to the batch
   * `lookahead` on first), with their staleness against the adapter this update starts from;
   * undefined when aborted. The run's own questions advance past the same rows, so that its
   * state (checkpoints, epoch) reads as the synchronous run's.
   */
  async #sampledAhead(
    ahead: AsyncRollouts,
    questions: QuerySampler,
    policy: TrainablePolicy,
    state: TrainerState,
    step: StepClock,
  ): Promise<DrawnBatch | undefined> {
    const batch = state.batches;
    ahead.started(batch, state.global_step, policy.params);
    const sampled = await step.time('wait_rollout', () => ahead.next(batch));
    step.seconds.rollout = sampled.rolloutSeconds;
    step.seconds.wait_train = sampled.waitTrainSeconds;
    const trajectories = sampled.trajectories;
    if (!trajectories) return undefined;
    const rows = questions.take(sampled.version, batch, this.config.queries_per_step);
    return { rows, trajectories, staleness: trajectoryStaleness(trajectories, state.global_step) };
  }

  /**
   * With max_staleness ≥ 1, the sampler that draws the batches ahead (async-rollouts.ts) from
   * questions of its own — the same ones in the same order as the run's, from a copy of its
   * cursor; undefined for the synchronous loop.
   */
  #startSampler(
    agent: RolloutAgent,
    state: TrainerState,
    policies: readonly RolloutPolicy[],
  ): AsyncRollouts | undefined {
    const c = this.config;
    const lookahead = rolloutLookahead(c);
    if (lookahead === 0) return undefined;
    const questions = querySampler(this.#o.trainDataset, c, structuredClone(state));
    const versions = this.#versions;
    // The version the previous batch was sampled from, held until the next batch holds its own:
    // batches sampled from the same version keep it loaded in between.
    let held: number | undefined;
    return new AsyncRollouts({
      lookahead,
      firstBatch: state.batches,
      policies,
      take: (version, batch) => questions.take(version, batch, c.queries_per_step),
      sample: async (p, rows, batch, signal) => {
        if (!versions) {
          this.#local!.generator.setLora(p.params);
          return this.#rolloutPhase(agent, rows, batch, signal);
        }
        const engine = await versions.acquire(p.step, p.params);
        if (held !== undefined) await versions.release(held);
        held = p.step;
        return this.#rolloutPhase(this.#samplingAgent(engine), rows, batch, signal);
      },
      concurrency: c.rollout_concurrency,
      ...(this.#o.signal && { signal: this.#o.signal }),
    });
  }

  /** The batch's rollouts; undefined when `signal` aborted them. */
  async #rolloutPhase(
    agent: RolloutAgent,
    rows: readonly SampleRow[],
    batch: number,
    signal: AbortSignal | undefined,
  ): Promise<Trajectory[] | undefined> {
    const c = this.config;
    const jobs = rolloutJobs(c.seed, batch, rows, c.num_generations);
    try {
      return await mapConcurrent(jobs, c.rollout_concurrency, ({ row, q, g, seed }) =>
        runOne(agent, row, seed, signal, {
          queryId: String(row.id),
          groupId: `batch-${batch}/q-${q}`,
          index: g,
        }),
      );
    } catch (e) {
      if (signal?.aborted) return undefined;
      throw e;
    }
  }

  /**
   * Rewards and group-relative advantages (broadcast to every planner turn), filters, rows. A
   * reward function's fault (a throw, a result that is no reward) scores 0 and is recorded on the
   * trajectory (metadata.rewardError), as for a crashed rollout: the run goes on.
   */
  async #scorePhase(trajectories: Trajectory[], step: StepClock): Promise<ScoredRollouts> {
    const c = this.config;
    const reward = this.#o.reward;
    const scored = await step.time('reward', () =>
      Promise.all(
        trajectories.map((tr) => scoreTrajectory(reward, rewardInputFromTrajectory(tr), tr)),
      ),
    );
    const failures = countRolloutFailures(trajectories);
    const rewards = Float64Array.from(scored, (r) => r.score);
    const groups = Int32Array.from(trajectories, (_, i) => Math.floor(i / c.num_generations));
    return { scored, failures, batch: scoreBatch(trajectories, rewards, groups, c) };
  }

  /**
   * The batch's optimizer steps (grpo-update.ts), or — nothing left to train on after the
   * filters — none (the book counts a step all the same).
   */
  async #updatePhase(
    policy: TrainablePolicy,
    scored: ScoredRollouts,
    book: RunBook,
    guard: NonFiniteGuard,
    o: { batch: number; queryIds: string[]; step: StepClock; offPolicy: boolean },
  ): Promise<GrpoUpdateResult> {
    const state = book.state;
    const result: GrpoUpdateResult =
      scored.batch.targets.count === 0
        ? noUpdate()
        : await grpoUpdate(policy, scored.batch, {
            config: this.config,
            step: state.global_step,
            guard,
            at: { batch: o.batch, queryIds: o.queryIds },
            time: (phase, f) => o.step.time(phase, f),
            // Rollouts from an earlier adapter: always weighed against the sampler's log-probs.
            ...(o.offPolicy && { importanceCorrection: true }),
          });
    book.advance(
      {
        steps: result.updates.length,
        skipped: result.updates.filter((u) => u.skipped).length,
      },
      scored.failures,
    );
    // The sampler running ahead copies the adapters it samples from itself.
    if (!o.offPolicy) await o.step.time('sync', () => this.#sync(policy.params, state.global_step));
    return result;
  }

  get #progress(): Progress {
    return this.#o.progress ?? silentProgress;
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
    const run = (engine: PolicyEngine = this.#engine!) =>
      evaluate({
        agent: this.#o.agent(greedy(engine)),
        dataset,
        reward: this.#o.reward,
        concurrency: c.rollout_concurrency,
        successThreshold: c.success_threshold,
        seed: c.seed,
        name,
        ...(this.#o.signal && { signal: this.#o.signal }),
        onProgress: (done, _total, correct) => bar.update(done, { acc: correct / done }),
      });
    // With a sampler running ahead the engine holds an earlier adapter: evaluation takes it
    // between two batches, with the adapter trained so far — set on the local engine, or loaded
    // on the servers as its own version.
    const ahead = this.#ahead;
    const policy = this.#policy;
    const versions = this.#versions;
    const step = this.#state?.global_step;
    const result =
      ahead && policy
        ? await ahead.exclusive(async () => {
            if (!versions || step === undefined) {
              this.#local!.generator.setLora(policy.params);
              return run();
            }
            const served = await versions.acquire(step, policy.params);
            try {
              return await run(served);
            } finally {
              await versions.release(step);
            }
          })
        : await run();
    bar.stop();
    this.#run.writeJson(join('eval', `${name}.json`), result);
    return result;
  }

  async close(): Promise<void> {
    await this.#ahead?.close();
    this.#ahead = undefined;
    // Reached with versions still held only when the run failed: the error that ended it is the
    // one to report, and an adapter left on a server costs its memory until the trainer's next
    // run or the server's restart.
    await this.#versions?.releaseAll().catch(() => {});
    this.#versions = undefined;
    this.#state = undefined;
    await this.#policy?.release();
    this.#policy = undefined;
    await this.#artifacts?.release();
    this.#artifacts = undefined;
  }

  /** New adapter → rollout engine: in place for the local engine, saved + hot-loaded for a server. */
  async #sync(params: LoraParams, step: number): Promise<void> {
    if (this.#local) {
      this.#local.generator.setLora(params);
      return;
    }
    const engine = this.#engine!;
    if (!engine.updateAdapter) return;
    const dir = this.#adapterFolder(step);
    await this.#saveAdapter(dir, params);
    await engine.updateAdapter({ name: 'flowgrpo-policy', path: dir });
  }

  /** adapters/step-<step>: the PEFT folder a server loads the adapter of global_step `step` from. */
  #adapterFolder(step: number): string {
    return this.#run.path(join('adapters', `step-${step}`));
  }

  async #saveAdapter(dir: string, params: LoraParams): Promise<void> {
    await saveLoraAdapter(dir, this.#policy!.config, this.#policy!.lora!, params, {
      ...(this.#o.baseModel && { baseModel: this.#o.baseModel }),
    });
  }

  /** checkpoint-<step>: the adapter, its optimizer state and the run's state; `limit` kept. */
  async #checkpoint(
    state: TrainerState,
    rotate: { limit: number; keep?: string },
  ): Promise<string> {
    const policy = this.#policy!;
    return this.#life!.saveCheckpoint(
      {
        config: policy.config,
        lora: policy.lora!,
        state: await policy.exportState(),
        trainer: state,
        ...(this.#o.baseModel && { baseModel: this.#o.baseModel }),
        ...(this.#ahead && { rolloutPolicies: this.#ahead.policiesFor(state.batches) }),
      },
      rotate,
    );
  }
}
