import type { PolicyEngine } from '@flowgrpo/agent';
import { ConfigError, expectAbortListeners, type SampleRow, type Trajectory } from '@flowgrpo/core';
import type { RolloutPolicy } from '../run/checkpoint.js';
import type { GRPOConfig } from '../run/config.js';
import { servesVersions } from './served-versions.js';

// Rollouts sampled while the update runs (`max_staleness` ≥ 1): TRL's AsyncGRPO, verl's
// fully-async trainer and AReaL's bounded off-policyness, in one process. The local engine's
// sessions run in its generate workers (or interleave with the train_step session on this
// thread), so the next batch is sampled while this one trains:
//
//   schedule    batch b is sampled from the adapter that batch b − L started from, L =
//               ⌊max_staleness / num_iterations⌋ batches ahead (the first L batches from batch 0's)
//               — always that one, never a fresher adapter that happens to be ready: the run is
//               then the same whatever the timing, and a resumed run samples what the
//               uninterrupted one did. A batch advances global_step by at most num_iterations, so
//               its staleness (the optimizer steps between the adapter it was sampled from and
//               the one trained on it) is at most L·μ ≤ max_staleness.
//   snapshots   the adapter each batch starts from is copied (a few small LoRA tensors) and kept
//               while a batch to come is sampled from it; the trainer updates its own tensors.
//   one engine  batches are sampled one after the other, each with its adapter set on the engine
//               for the whole batch; evaluation takes the engine between two batches (exclusive).
//               A remote engine holds each version as its own adapter on every server, and
//               the batch's requests name it (served-versions.ts).
//   versions    every trajectory carries metadata.policy_version (the global_step of its adapter);
//               its turns carry the sampler's log-probs, which the update weighs against (the
//               truncated importance ratio of grpo-update.ts, always on here).
//   resume      a checkpoint keeps the adapters the batches after it are sampled from
//               (rollout_policies.safetensors); batches in flight at the save are discarded and
//               sampled again after the resume, from those adapters, with the same seeds
//               (rollout-jobs.ts) and questions (the sampler's own copy of the data cursor).

/** A batch's rollouts as the sampler left them. */
export interface SampledBatch {
  batch: number;
  /** The global_step of the adapter they were sampled from (−1: aborted before sampling). */
  version: number;
  /** Undefined when the run was aborted during them. */
  trajectories: Trajectory[] | undefined;
  /** Seconds the sampler waited for that adapter (the trainer's updates). */
  waitTrainSeconds: number;
  /** Seconds the sampling took. */
  rolloutSeconds: number;
}

export interface AsyncRolloutsOptions {
  /** L: batches sampled ahead of the one training (rolloutLookahead). */
  lookahead: number;
  /** The first batch this run trains (state.batches at its start). */
  firstBatch: number;
  /** The adapters earlier batches started from, as a checkpoint kept them. */
  policies: readonly RolloutPolicy[];
  /** The questions of batch `batch`, sampled from an adapter of global_step `version`. */
  take: (version: number, batch: number) => SampleRow[];
  /**
   * Samples the rollouts of `batch` on `rows` with `policy` set on the engine; undefined when
   * `signal` aborted them.
   */
  sample: (
    policy: RolloutPolicy,
    rows: SampleRow[],
    batch: number,
    signal: AbortSignal,
  ) => Promise<Trajectory[] | undefined>;
  /** The run's abort signal. */
  signal?: AbortSignal;
  /** Rollouts of a batch running at once (the abort listeners they add). */
  concurrency: number;
}

/** Batches sampled ahead of the one training: ⌊max_staleness / num_iterations⌋ (0: synchronous). */
export function rolloutLookahead(c: Pick<GRPOConfig, 'max_staleness' | 'num_iterations'>): number {
  return Math.floor(c.max_staleness / c.num_iterations);
}

/**
 * Refuses a max_staleness the trainer could not keep: with a `rolloutEngine` that cannot serve
 * several adapters at once (each batch sampled ahead keeps the adapter of its version on the
 * servers while newer ones are loaded: served-versions.ts), and below num_iterations (a batch's
 * μ updates reach the sampler at once, so no batch could be sampled ahead without being μ steps
 * stale).
 */
export function checkMaxStaleness(
  c: Pick<GRPOConfig, 'max_staleness' | 'num_iterations'>,
  o: { rolloutEngine: PolicyEngine | undefined },
): void {
  if (c.max_staleness === 0) return;
  if (o.rolloutEngine && !servesVersions(o.rolloutEngine))
    throw new ConfigError(
      `GRPO config: max_staleness = ${c.max_staleness}: this rolloutEngine cannot serve several adapters at once (it has no loadAdapter, unloadAdapter and withAdapter), so rollouts sampled ahead could not keep the adapter of their version`,
      { key: 'max_staleness' },
      {
        hint: 'set max_staleness: 0, or sample on OpenAIPolicyEngine (vLLM with VLLM_ALLOW_RUNTIME_LORA_UPDATING=True, SGLang, flowgrpo serve) or on the local engine',
      },
    );
  if (c.max_staleness < c.num_iterations)
    throw new ConfigError(
      `GRPO config: max_staleness = ${c.max_staleness} < num_iterations = ${c.num_iterations}: each batch's ${c.num_iterations} updates reach the sampler together, so no batch could be sampled ahead within the bound`,
      { key: 'max_staleness, num_iterations' },
      { hint: `set max_staleness to 0 or to at least ${c.num_iterations}` },
    );
}

/** The staleness of each trajectory trained at global_step `step`: step − its policy_version. */
export function trajectoryStaleness(trajectories: readonly Trajectory[], step: number): number[] {
  return trajectories.map((tr) => step - Number(tr.metadata?.policy_version ?? step));
}

/** A promise with its settling functions; `value` once resolved. */
interface Deferred<T> {
  promise: Promise<T>;
  resolve: (v: T) => void;
  reject: (e: unknown) => void;
  value?: T;
}

function deferred<T>(): Deferred<T> {
  const d = {} as Deferred<T>;
  d.promise = new Promise<T>((resolve, reject) => {
    d.resolve = (v) => {
      d.value = v;
      resolve(v);
    };
    d.reject = reject;
  });
  // A batch the trainer never asks for (the run ended first) may fail unobserved.
  d.promise.catch(() => {});
  return d;
}

export class AsyncRollouts {
  readonly lookahead: number;
  /** Aborts the rollouts in flight: the run's signal, or close(). */
  readonly signal: AbortSignal;
  readonly #o: AsyncRolloutsOptions;
  /** By batch: the adapter it started from. */
  readonly #policies = new Map<number, Deferred<RolloutPolicy>>();
  readonly #batches = new Map<number, Deferred<SampledBatch>>();
  readonly #stop = new AbortController();
  readonly #stopped = deferred<undefined>();
  /** The engine's queue: one batch's sampling or one evaluation at a time. */
  #engine: Promise<unknown> = Promise.resolve();
  readonly #sampler: Promise<void>;

  constructor(o: AsyncRolloutsOptions) {
    this.#o = o;
    this.lookahead = o.lookahead;
    this.signal = o.signal ? AbortSignal.any([o.signal, this.#stop.signal]) : this.#stop.signal;
    expectAbortListeners(this.signal, 4 * o.concurrency + 1);
    this.signal.addEventListener('abort', () => this.#stopped.resolve(undefined), { once: true });
    for (const p of o.policies) this.#policy(p.batch).resolve(p);
    this.#sampler = this.#run();
  }

  /**
   * The trainer starts `batch` from the adapter of global_step `step`: the batch `lookahead`
   * later may now be sampled from a copy of it.
   */
  started(batch: number, step: number, params: ReadonlyMap<string, Float32Array>): void {
    const copy = new Map([...params].map(([k, v]) => [k, Float32Array.from(v)]));
    this.#policy(batch).resolve({ batch, step, params: copy });
    // Adapters no batch to come is sampled from, and none a checkpoint keeps.
    for (const b of this.#policies.keys()) if (b < batch - this.lookahead) this.#policies.delete(b);
  }

  /** Batch `batch`'s rollouts, once sampled (call started(batch) first). */
  next(batch: number): Promise<SampledBatch> {
    const d = this.#batch(batch);
    return d.promise.finally(() => this.#batches.delete(batch));
  }

  /** The adapters batches from `nextBatch` on are sampled from, older than its own (checkpoints). */
  policiesFor(nextBatch: number): RolloutPolicy[] {
    const out: RolloutPolicy[] = [];
    for (let b = Math.max(0, nextBatch - this.lookahead); b < nextBatch; b++) {
      const p = this.#policies.get(b)?.value;
      if (p) out.push(p);
    }
    return out;
  }

  /** Runs `f` with the engine to itself, between two batches' sampling (evaluation). */
  exclusive<T>(f: () => Promise<T>): Promise<T> {
    const run = this.#engine.then(f);
    this.#engine = run.catch(() => {});
    return run;
  }

  /** Stops sampling: the batch in flight is aborted and discarded. */
  async close(): Promise<void> {
    this.#stop.abort();
    await this.#sampler;
  }

  #policy(batch: number): Deferred<RolloutPolicy> {
    let d = this.#policies.get(batch);
    if (!d) {
      d = deferred<RolloutPolicy>();
      this.#policies.set(batch, d);
    }
    return d;
  }

  #batch(batch: number): Deferred<SampledBatch> {
    let d = this.#batches.get(batch);
    if (!d) {
      d = deferred<SampledBatch>();
      this.#batches.set(batch, d);
    }
    return d;
  }

  /** The adapter batch `batch` is sampled from (see schedule above). */
  #sourceOf(batch: number): Deferred<RolloutPolicy> {
    const source = Math.max(0, batch - this.lookahead);
    // Resumed from a checkpoint that kept no adapter for it (written with max_staleness 0): the
    // batches in flight are sampled from the adapter the run resumed with.
    if (source < this.#o.firstBatch && !this.#policies.has(source))
      return this.#policy(this.#o.firstBatch);
    return this.#policy(source);
  }

  /**
   * The sampler: batch after batch, each once its adapter exists, until close() or an abort (the
   * batch it stops at says so: no trajectories).
   */
  async #run(): Promise<void> {
    for (let batch = this.#o.firstBatch; ; batch++) {
      const out = this.#batch(batch);
      const aborted = { batch, version: -1, waitTrainSeconds: 0, rolloutSeconds: 0 };
      try {
        const waited = performance.now();
        const policy = await Promise.race([this.#sourceOf(batch).promise, this.#stopped.promise]);
        if (!policy || this.signal.aborted) {
          out.resolve({ ...aborted, trajectories: undefined });
          return;
        }
        const waitTrainSeconds = (performance.now() - waited) / 1000;
        const rows = this.#o.take(policy.step, batch);
        // Timed from when the engine is the batch's (an evaluation may hold it first).
        const { trajectories, rolloutSeconds } = await this.exclusive(async () => {
          const started = performance.now();
          const trajectories = await this.#o.sample(policy, rows, batch, this.signal);
          return { trajectories, rolloutSeconds: (performance.now() - started) / 1000 };
        });
        for (const tr of trajectories ?? [])
          tr.metadata = { ...tr.metadata, policy_version: policy.step };
        out.resolve({
          batch,
          version: policy.step,
          trajectories,
          waitTrainSeconds,
          rolloutSeconds,
        });
        if (!trajectories) return;
      } catch (e) {
        out.reject(e);
        return;
      }
    }
  }
}
