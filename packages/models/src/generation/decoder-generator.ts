import { randomBytes } from 'node:crypto';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { createRng, type Rng } from '@flowgrpo/core';
import * as ort from 'onnxruntime-node';
import {
  type ArtifactsManifest,
  type DecoderArtifacts,
  readArtifactsManifest,
} from '../artifacts/decoder-artifacts.js';
import type { LoraParams } from '../lora/lora-weights.js';
import type { DecoderConfig } from '../models/config.js';
import {
  ATTENTION_MASK,
  INPUT_IDS,
  LORA_SCALE,
  POSITION_IDS,
  pastKeyName,
  pastValueName,
  presentKeyName,
  presentValueName,
} from '../models/graph/decoder-graph.js';
import type { DeviceRequest } from '../runtime/devices.js';
import type { ValueSpec } from '../runtime/feeds.js';
import type { Session } from '../runtime/session.js';
import { SessionWorker, type WorkerSession } from '../runtime/session-worker.js';
import { BatcherPool } from './batcher-pool.js';
import { ContextLengthExceededError, TokenOutOfVocabularyError } from './errors.js';
import { type BatchRow, FusedBatcher } from './fused-batcher.js';
import { type GenerateRunner, localRunner, workerRunner } from './generate-runner.js';
import { checkPrefillLimits, type PrefillLimits, prefillWidth } from './prefill-pieces.js';
import { type SamplingParams, sampleToken } from './sampling.js';
import { firstStop } from './stop-strings.js';

// Batched generation. With a `generate` graph in the artifacts (and the CPU EP), requests go to a
// FusedBatcher: continuous batching, the decode loop inside the graph (fused-batcher.ts,
// models/graph/inference-graph.ts). Otherwise — a worker-thread or GPU session — over the
// standard prefill and decode graphs: prompts are left-padded to one length (attention_mask 0 on
// padding, position ids counting real tokens only), prefill runs once, then one decode run per new
// token with the KV cache carried from `present.*` to `past_key_values.*`, and sampling happens on
// the host from each step's last-position logits (see sampling.ts for the temperature / logprob
// convention). Both give a request the same tokens for the same seed.
//
// Both paths prefill a long prompt batch in pieces (prefill-pieces.ts; the decode graph takes new
// tokens after a past cache, so the pieces extend one cache). A request that fails on its own
// (invalid, or its decode or sampling throws) fails alone: generateSettled gives each request its
// own result, and its batch-mates the tokens they would have had without it.

export interface DecoderGenerateOptions extends SamplingParams {
  maxNewTokens: number;
  /** Generation of a row ends when it samples one of these; the token is kept in `tokens`. */
  stopTokenIds?: readonly number[];
  /** Generation of a row ends when its decoded text contains one (needs `decode`). */
  stopStrings?: readonly string[];
  /** Same seed, prompts and options → same tokens. Default: a random seed. */
  seed?: number | bigint | string;
  /** Detokenizer for `text` and stop strings. */
  decode?: (ids: ArrayLike<number>) => string;
  /** Id written at padded positions (never attended). Default 0. */
  padTokenId?: number;
}

export interface GenerationOutput {
  promptTokens: Int32Array<ArrayBuffer>;
  /** Generated ids, including the stop token that ended the row (if any). */
  tokens: Int32Array<ArrayBuffer>;
  /** log softmax(logits / T)[token] of each generated token (T = 1 when greedy). */
  logprobs: Float32Array<ArrayBuffer>;
  finishReason: 'stop' | 'length';
  stopTokenId?: number;
  stopString?: string;
  /** Decoded text of the generated tokens, cut before a stop string / stop token (with decode). */
  text?: string;
}

const int64 = (values: readonly number[], dims: number[]) =>
  new ort.Tensor(
    'int64',
    BigInt64Array.from(values, (v) => BigInt(v)),
    dims,
  );

/** One request of a batch: its options and the random stream it samples from. */
export interface GenerationRequest extends SamplingParams {
  prompt: ArrayLike<number>;
  maxNewTokens: number;
  stopTokenIds?: readonly number[];
  stopStrings?: readonly string[];
  /** Same seed, prompt and options → same tokens, whatever else is in the batch. */
  seed?: number | bigint | string;
}

interface RowRequest extends Omit<GenerationRequest, 'seed'> {
  rng: Rng;
}

interface Row {
  /** The request's place in the call. */
  index: number;
  request: RowRequest;
  stopIds: Set<number>;
  stopStrings: string[];
  prompt: number[];
  tokens: number[];
  logprobs: number[];
  rng: Rng;
  done: boolean;
  finish: GenerationOutput['finishReason'];
  stopTokenId?: number;
  stopString?: string;
  text?: string;
  /** Position id of the next token. */
  nextPos: number;
  /** Why this row failed on its own (it then feeds padding until the batch ends). */
  error?: unknown;
}

/** Where the graphs run: sessions on this thread, or a decode session in a worker thread. */
export interface GenerationBackend {
  /** Input specs of the graph used for steps (for the LoRA feeds). */
  readonly inputs: readonly ValueSpec[];
  /** Runs the prompt from an empty cache; returns [B, vocab] last-position logits. */
  start(feeds: Record<string, ort.Tensor>, batch: number): Promise<Float32Array>;
  /** One step with the cache of the previous call. */
  step(feeds: Record<string, ort.Tensor>): Promise<Float32Array>;
  /** Calls that share a cache must not interleave. */
  readonly exclusive: boolean;
  /**
   * Keeps only batch rows `keep` (in order) of the last call's logits and cache: finished rows
   * leave the batch. Backends that cannot reach the cache leave this out.
   */
  compact?(logits: Float32Array, keep: readonly number[]): Float32Array;
  release(): Promise<void>;
}

function emptyPast(config: DecoderConfig, batch: number): Record<string, ort.Tensor> {
  const feeds: Record<string, ort.Tensor> = {};
  const dims = [batch, config.numKeyValueHeads, 0, config.headDim];
  for (let l = 0; l < config.numHiddenLayers; l++) {
    feeds[pastKeyName(l)] = new ort.Tensor('float32', new Float32Array(0), dims);
    feeds[pastValueName(l)] = new ort.Tensor('float32', new Float32Array(0), dims);
  }
  return feeds;
}

/** Sessions of an opened artifacts directory; the KV cache goes through this thread. */
function localBackend(artifacts: DecoderArtifacts): GenerationBackend {
  // Looked up when used: artifacts opened with the generate graph alone never need it.
  const session = () => artifacts.session('decode');
  // Per generate call: a closure over that call's cache (calls may interleave).
  return {
    get inputs() {
      return session().inputs;
    },
    exclusive: false,
    async start(feeds, batch) {
      // Without a prefill session the decode graph prefills from an empty (length-0) cache:
      // the same numbers, and one copy of the weights in ORT instead of two.
      const prefill = artifacts.sessions.prefill;
      const decode = session();
      const r = prefill
        ? await prefill.run(feeds)
        : await decode.run({ ...emptyPast(artifacts.config, batch), ...feeds });
      return Object.assign(r.outputs.logits!.data as Float32Array, { cache: r.outputs });
    },
    async step(feeds) {
      const r = await session().run(feeds);
      return Object.assign(r.outputs.logits!.data as Float32Array, { cache: r.outputs });
    },
    compact(logits, keep) {
      const cache = (logits as CachedLogits).cache!;
      const V = artifacts.config.vocabSize;
      const kept = new Float32Array(keep.length * V);
      keep.forEach((b, i) => {
        kept.set(logits.subarray(b * V, (b + 1) * V), i * V);
      });
      const out: Record<string, ort.Tensor> = {};
      for (const [name, t] of Object.entries(cache)) {
        if (!name.startsWith('present.')) continue;
        const [, ...rest] = t.dims; // [B, kvHeads, S, d]
        const row = rest.reduce((a, d) => a * d, 1);
        const src = t.data as Float32Array;
        const data = new Float32Array(keep.length * row);
        keep.forEach((b, i) => {
          data.set(src.subarray(b * row, (b + 1) * row), i * row);
        });
        out[name] = new ort.Tensor('float32', data, [keep.length, ...rest]);
      }
      return Object.assign(kept, { cache: out });
    },
    async release() {},
  };
}

/** A decode session in a SessionWorker: the KV cache stays in the worker (on the GPU with WebGPU). */
function workerBackend(
  session: WorkerSession,
  config: DecoderConfig,
  owned?: SessionWorker,
): GenerationBackend {
  return {
    inputs: session.inputs,
    exclusive: true,
    async start(feeds, batch) {
      // Explicit empty past overrides what the worker carried from the previous sequence.
      const out = await session.run({ ...emptyPast(config, batch), ...feeds });
      return out.logits!.data as Float32Array;
    },
    async step(feeds) {
      const out = await session.run(feeds);
      return out.logits!.data as Float32Array;
    },
    async release() {
      await session.release();
      await owned?.terminate();
    },
  };
}

type CachedLogits = Float32Array & { cache?: Record<string, ort.Tensor> };

export interface WorkerGeneratorOptions {
  /** Default 'cpu'; passed through to the worker's session. */
  device?: DeviceRequest;
  /** Host the session in this worker (default: a new one, terminated by release()). */
  worker?: SessionWorker;
  intraOpThreads?: number;
}

export interface FusedGenerationOptions extends PrefillLimits {
  /**
   * Use the artifacts' `generate` graph when they have one (default true); false keeps to the
   * standard prefill/decode graphs.
   */
  useGenerateGraph?: boolean;
  /** Rows generated together at most (default 64). */
  maxBatchSize?: number;
  /**
   * Tokens each row samples per graph run while requests wait to join (default 16): longer
   * chunks spend less per run, shorter ones let waiting requests join sooner and waste less on
   * rows that finish mid-chunk. With nobody waiting the chunk doubles up to `maxChunkTokens`
   * (default 256).
   */
  chunkTokens?: number;
  maxChunkTokens?: number;
  /**
   * With a generate graph built with `attention: 'auto'`: batches of at least this many rows run
   * its split-cache loop (default SPLIT_CACHE_FROM).
   */
  splitCacheFrom?: number;
  /**
   * Worker threads that run the generate graph side by side, each its own continuous batch on
   * one thread, once `workersFrom` rows are in flight (batcher-pool.ts). 0: everything on this
   * thread. Default: for a model whose weights are at most ONE_THREAD_MAX_WEIGHT_BYTES, one per
   * core up to 4 (none on one core, or when the artifacts were opened with `intraOpThreads`);
   * larger models none — their one session uses every core, and a worker would hold a second copy
   * of the weights.
   */
  generateWorkers?: number;
  /** Rows in flight at which the worker threads open (default WORKERS_FROM). */
  workersFrom?: number;
}

/**
 * Rows in flight from which generation moves to worker threads: from batch 16 of stories260K,
 * two one-thread batchers of half the rows ran ×1.5–1.9 faster than one of all (docs/
 * performance.md); a lone request would only wait for the workers to start.
 */
export const WORKERS_FROM = 16;

export class DecoderGenerator {
  readonly manifest: ArtifactsManifest;
  #backend: GenerationBackend;
  #artifacts: DecoderArtifacts | undefined;
  #fused: Promise<BatcherPool | undefined> | undefined;
  /** The decode session of the standard path, opened on first use when it was not. */
  #decode: Promise<Session> | undefined;
  readonly #fusedOptions: FusedGenerationOptions;
  #queue: Promise<unknown> = Promise.resolve();
  private lora: LoraParams | undefined;
  #loraScale = 1;
  #loraVersion = 0;
  #fusedLora: BatchRow['lora'] | undefined;

  /** Multiplies the adapter's update (1: the policy; 0: the base / reference model). */
  get loraScale(): number {
    return this.#loraScale;
  }

  set loraScale(v: number) {
    if (v !== this.#loraScale) this.#loraVersion++;
    this.#loraScale = v;
  }

  /**
   * Over the sessions of opened artifacts (prefill if opened, else decode from an empty cache),
   * or over a backend (see inWorker).
   */
  constructor(
    source: DecoderArtifacts | { manifest: ArtifactsManifest; backend: GenerationBackend },
    options: FusedGenerationOptions = {},
  ) {
    if (options.maxBatchSize !== undefined) checkBatchSize(options.maxBatchSize);
    checkPrefillLimits(options);
    this.#fusedOptions = { ...options };
    if ('backend' in source) {
      this.manifest = source.manifest;
      this.#backend = source.backend;
    } else {
      this.manifest = source.manifest;
      this.#artifacts = source;
      this.#backend = localBackend(source);
    }
  }

  /** Rows generated together at most (the fused path; default 64). */
  get maxBatchSize(): number {
    return this.#fusedOptions.maxBatchSize ?? 64;
  }

  set maxBatchSize(n: number) {
    checkBatchSize(n);
    this.#fusedOptions.maxBatchSize = n;
    // A batcher that failed to open has already reported it to the generation that opened it.
    this.#fused?.then(
      (f) => {
        if (f) f.maxBatchSize = n;
      },
      () => {},
    );
  }

  /**
   * The continuous batcher over the `generate` graph, when the artifacts have one and run on
   * the CPU EP (its decode loop is a CPU Loop); opened on first use.
   */
  #fusedBatcher(): Promise<BatcherPool | undefined> {
    if (!this.#fused) {
      const art = this.#artifacts;
      // The device the generate session landed on when it is open ('auto' may have picked the
      // CPU), else the one asked for.
      const device = art?.sessions.generate?.device ?? art?.options.device ?? 'cpu';
      const cpu = device === 'cpu';
      const wanted = this.#fusedOptions.useGenerateGraph ?? true;
      this.#fused =
        art?.manifest.graphs.generate && cpu && wanted
          ? art
              .openSession('generate', generateThreads(art))
              .then((session) => this.#pool(art, session))
          : Promise.resolve(undefined);
    }
    return this.#fused;
  }

  /** The batcher on this thread over `session`, and the worker batchers it may open. */
  #pool(art: DecoderArtifacts, session: Session): BatcherPool {
    const o = this.#fusedOptions;
    const batcher = (runner: GenerateRunner) =>
      new FusedBatcher({
        runner,
        config: this.manifest.config,
        maxPositions: this.manifest.maxPositions,
        ...(o.chunkTokens !== undefined && { chunkTokens: o.chunkTokens }),
        ...(o.maxChunkTokens !== undefined && { maxChunkTokens: o.maxChunkTokens }),
        ...(o.splitCacheFrom !== undefined && { splitCacheFrom: o.splitCacheFrom }),
        ...(o.prefillChunkTokens !== undefined && { prefillChunkTokens: o.prefillChunkTokens }),
        ...(o.prefillWholeScores !== undefined && { prefillWholeScores: o.prefillWholeScores }),
      });
    const local = batcher(localRunner(session));
    if (o.maxBatchSize !== undefined) local.maxBatchSize = o.maxBatchSize;
    const count = o.generateWorkers ?? defaultGenerateWorkers(art);
    const file = join(art.dir, art.manifest.graphs.generate!.file);
    const pool = new BatcherPool(local, {
      count,
      from: o.workersFrom ?? WORKERS_FROM,
      open: async () => {
        const worker = new SessionWorker();
        try {
          const { graphs: _, ...options } = art.options;
          const ws = await worker.load(file, { ...options, device: 'cpu', intraOpThreads: 1 });
          return {
            batcher: batcher(workerRunner(ws)),
            close: () => worker.terminate(),
            ended: worker.ended,
          };
        } catch (e) {
          await worker.terminate();
          throw e;
        }
      },
    });
    // The workers end with the artifacts (or with release(), whichever comes first).
    art.onRelease(() => pool.close());
    return pool;
  }

  /**
   * The continuous batcher's counters (chunks run, rows admitted, joins into a running batch,
   * steps, row-steps), or undefined on the standard path.
   */
  async batchStats(): Promise<FusedBatcher['stats'] | undefined> {
    return (await this.#fusedBatcher())?.stats;
  }

  /**
   * The worker batchers (generateWorkers): how many are open now (0 until enough rows were in
   * flight), and why they could not open, if they could not (generation then stays here).
   */
  async batchWorkers(): Promise<{ open: number; openError?: unknown }> {
    const pool = await this.#fusedBatcher();
    return {
      open: pool?.workerCount ?? 0,
      ...(pool?.openError !== undefined && { openError: pool.openError }),
    };
  }

  /** Whether generation runs the fused `generate` graph (continuous batching). */
  async usesFusedGraph(): Promise<boolean> {
    return (await this.#fusedBatcher()) !== undefined;
  }

  /**
   * The decode graph of an artifacts directory in a worker thread: `session.run` blocks the
   * thread it runs on, so rollouts that interleave generation with tools and HTTP keep it there.
   * The KV cache is carried inside the worker (present → past) and never copied back.
   */
  static async inWorker(
    dir: string,
    options: WorkerGeneratorOptions = {},
  ): Promise<DecoderGenerator> {
    const manifest = readArtifactsManifest(dir);
    const g = manifest.graphs.decode;
    if (!g) throw new RangeError(`${dir} has no decode graph`);
    const worker = options.worker ?? new SessionWorker();
    const carry: Record<string, string> = {};
    for (let l = 0; l < manifest.config.numHiddenLayers; l++) {
      carry[presentKeyName(l)] = pastKeyName(l);
      carry[presentValueName(l)] = pastValueName(l);
    }
    const session = await worker.load(join(dir, g.file), {
      device: options.device ?? 'cpu',
      carry,
      ...(options.intraOpThreads !== undefined && { intraOpThreads: options.intraOpThreads }),
    });
    return new DecoderGenerator({
      manifest,
      backend: workerBackend(session, manifest.config, options.worker ? undefined : worker),
    });
  }

  get config(): DecoderConfig {
    return this.manifest.config;
  }

  /**
   * Use these LoRA matrices (PEFT names) in later generations; undefined = the base model.
   * Generations already running finish with the adapter they started with.
   */
  setLora(params: LoraParams | undefined): void {
    this.lora = params;
    this.#loraVersion++;
  }

  /** Feeds for the LoRA inputs of a graph that has them (zeros + scale 0 without an adapter). */
  loraFeeds(inputs: readonly ValueSpec[] = this.#backend.inputs): Record<string, ort.Tensor> {
    const feeds: Record<string, ort.Tensor> = {};
    if (!this.manifest.lora) return feeds;
    for (const spec of inputs) {
      if (spec.name === LORA_SCALE)
        feeds[spec.name] = new ort.Tensor(
          'float32',
          new Float32Array([this.lora ? this.loraScale : 0]),
          [],
        );
      else if (spec.name.includes('.lora_')) {
        const dims = (spec.shape ?? []) as number[];
        const data = this.lora?.get(spec.name) ?? new Float32Array(dims.reduce((a, b) => a * b, 1));
        feeds[spec.name] = new ort.Tensor('float32', data, dims);
      }
    }
    return feeds;
  }

  /** Releases the worker session (and the worker it made); local sessions belong to the artifacts. */
  async release(): Promise<void> {
    await (await this.#fused)?.close();
    await this.#backend.release();
  }

  /**
   * Generates from every prompt with the same options: row i samples from
   * `createRng(seed).fork('row:<i>')`.
   */
  async generate(
    prompts: readonly ArrayLike<number>[],
    options: DecoderGenerateOptions,
  ): Promise<GenerationOutput[]> {
    const root = createRng(options.seed ?? randomBytes(8).readBigUInt64LE());
    return allOrFirstError(
      await this.#queued(
        prompts.map((prompt, i) => ({ ...options, prompt, rng: root.fork(`row:${i}`) })),
        options,
      ),
    );
  }

  /**
   * Generates one batch from requests with their own options (sampling, length, stops, seed).
   * A request's tokens do not depend on the others in the batch: it samples from
   * `createRng(seed).fork('row:0')`, exactly as `generate([prompt], { seed })` would.
   */
  async generateEach(
    requests: readonly GenerationRequest[],
    shared: Pick<DecoderGenerateOptions, 'decode' | 'padTokenId'> = {},
  ): Promise<GenerationOutput[]> {
    return allOrFirstError(await this.generateSettled(requests, shared));
  }

  /**
   * generateEach, with each request's own outcome: a request that is invalid, or whose decode or
   * sampling throws, is rejected alone, and the others get the tokens they would have had
   * without it. (A failed graph run fails the requests it was running.)
   */
  generateSettled(
    requests: readonly GenerationRequest[],
    shared: Pick<DecoderGenerateOptions, 'decode' | 'padTokenId'> = {},
  ): Promise<PromiseSettledResult<GenerationOutput>[]> {
    return this.#queued(
      requests.map((r) => ({
        ...r,
        rng: createRng(r.seed ?? randomBytes(8).readBigUInt64LE()).fork('row:0'),
      })),
      shared,
    );
  }

  async #queued(
    rows: RowRequest[],
    shared: Pick<DecoderGenerateOptions, 'decode' | 'padTokenId'>,
  ): Promise<PromiseSettledResult<GenerationOutput>[]> {
    const fused = await this.#fusedBatcher();
    if (fused) return this.#generateFused(fused, rows, shared);
    // The standard path steps with the decode graph: artifacts opened with the generate graph
    // alone (a trainer's choice on a device where the fused loop does not run) open it now.
    if (this.#artifacts) {
      const art = this.#artifacts;
      this.#decode ??= art.openSession('decode').catch((e: unknown) => {
        this.#decode = undefined;
        throw e;
      });
      await this.#decode;
    }
    if (!this.#backend.exclusive) return this.#generate(rows, shared);
    const run = this.#queue.then(() => this.#generate(rows, shared));
    this.#queue = run.catch(() => undefined);
    return run;
  }

  /** The fused path: rows join the continuous batch; results in request order. */
  #generateFused(
    fused: BatcherPool,
    requests: readonly RowRequest[],
    shared: Pick<DecoderGenerateOptions, 'decode' | 'padTokenId'>,
  ): Promise<PromiseSettledResult<GenerationOutput>[]> {
    const { config, maxPositions } = this.manifest;
    const lora = this.#fusedLoraFeeds(fused);
    const decode = shared.decode;
    // One submit for all the rows: they start together, and the pool counts them together when
    // it decides whether to open its worker batchers.
    const rows: BatchRow[] = [];
    const outputs = Promise.allSettled(
      requests.map(
        (q, i) =>
          new Promise<GenerationOutput>((resolve, reject) => {
            // An invalid request is rejected alone; the others are submitted.
            const prepared = validateRequest(q, i, config.vocabSize, maxPositions, decode);
            const prompt = prepared.prompt;
            rows.push({
              ...(q.temperature !== undefined && { temperature: q.temperature }),
              ...(q.topK !== undefined && { topK: q.topK }),
              ...(q.topP !== undefined && { topP: q.topP }),
              prompt,
              maxNewTokens: q.maxNewTokens,
              stopIds: new Set(q.stopTokenIds ?? []),
              stopStrings: prepared.stopStrings,
              rng: q.rng,
              decode,
              lora,
              fail: reject,
              done: (r) => {
                const out: GenerationOutput = {
                  promptTokens: Int32Array.from(prompt),
                  tokens: Int32Array.from(r.tokens),
                  logprobs: Float32Array.from(r.logprobs),
                  finishReason: r.finish,
                };
                if (r.stopTokenId !== undefined) out.stopTokenId = r.stopTokenId;
                if (r.stopString !== undefined) out.stopString = r.stopString;
                if (decode) {
                  out.text =
                    r.text ??
                    decode(r.stopTokenId === undefined ? r.tokens : r.tokens.slice(0, -1));
                }
                resolve(out);
              },
            });
          }),
      ),
    );
    fused.submit(rows);
    return outputs;
  }

  /** LoRA feeds of the generate graph for the current adapter (one object per adapter version). */
  #fusedLoraFeeds(fused: BatcherPool): BatchRow['lora'] {
    if (this.#fusedLora?.version !== this.#loraVersion)
      this.#fusedLora = { version: this.#loraVersion, feeds: this.loraFeeds(fused.inputs) };
    return this.#fusedLora;
  }

  async #generate(
    requests: readonly RowRequest[],
    shared: Pick<DecoderGenerateOptions, 'decode' | 'padTokenId'>,
  ): Promise<PromiseSettledResult<GenerationOutput>[]> {
    const backend = this.#backend;
    const { config, maxPositions } = this.manifest;
    const V = config.vocabSize;
    const L = config.numHiddenLayers;
    const settled: PromiseSettledResult<GenerationOutput>[] = [];
    // An invalid request is rejected alone; the valid ones make the batch.
    const rows: Row[] = [];
    requests.forEach((q, i) => {
      let v: ReturnType<typeof validateRequest>;
      try {
        v = validateRequest(q, i, V, maxPositions, shared.decode);
      } catch (reason) {
        settled[i] = { status: 'rejected', reason };
        return;
      }
      rows.push({
        index: i,
        request: q,
        stopIds: new Set(q.stopTokenIds ?? []),
        stopStrings: v.stopStrings,
        prompt: v.prompt,
        tokens: [],
        logprobs: [],
        rng: q.rng,
        done: q.maxNewTokens === 0,
        finish: 'length',
        nextPos: v.prompt.length,
      });
    });
    const B0 = rows.length;
    if (B0 === 0) return settled;

    // Prefill: left padding to the longest prompt.
    const T = Math.max(...rows.map((r) => r.prompt.length));
    const pad = shared.padTokenId ?? 0;
    const ids: number[] = [];
    const mask: number[] = [];
    const pos: number[] = [];
    for (const r of rows) {
      const n = T - r.prompt.length;
      for (let j = 0; j < T; j++) {
        ids.push(j < n ? pad : r.prompt[j - n]!);
        mask.push(j < n ? 0 : 1);
        pos.push(j < n ? 0 : j - n);
      }
    }
    // `live` are the rows still in the batch, in batch order; `attention` is their [B, S] mask.
    let live = rows.map((_, i) => i);
    let attention = mask;
    let S = T;
    const lora = this.loraFeeds();
    /** The decode graph's past inputs from the last run's cache (local backends carry it here). */
    const pastOf = (logits: CachedLogits): Record<string, ort.Tensor> => {
      const feeds: Record<string, ort.Tensor> = {};
      const cache = logits.cache;
      if (cache)
        for (let l = 0; l < L; l++) {
          feeds[pastKeyName(l)] = cache[presentKeyName(l)]!;
          feeds[pastValueName(l)] = cache[presentValueName(l)]!;
        }
      return feeds;
    };
    // The prompt columns, whole or in pieces (prefill-pieces.ts); each piece extends the cache
    // of the one before, and the last one's logits are the first sample's.
    const width = prefillWidth(B0, T, this.#fusedOptions);
    const piece = (from: number, to: number) => {
      const take = (a: number[]) =>
        Array.from({ length: B0 }, (_, b) => a.slice(b * T + from, b * T + to)).flat();
      return {
        [INPUT_IDS]: int64(take(ids), [B0, to - from]),
        [ATTENTION_MASK]: int64(
          Array.from({ length: B0 }, (_, b) => mask.slice(b * T, b * T + to)).flat(),
          [B0, to],
        ),
        [POSITION_IDS]: int64(take(pos), [B0, to - from]),
        ...lora,
      };
    };
    let logits: CachedLogits = await backend.start(piece(0, Math.min(T, width)), B0);
    for (let from = width; from < T; from += width)
      logits = await backend.step({ ...piece(from, Math.min(T, from + width)), ...pastOf(logits) });

    for (;;) {
      const next: number[] = [];
      live.forEach((ri, b) => {
        const r = rows[ri]!;
        if (r.done) {
          next.push(pad);
          return;
        }
        try {
          const s = sampleToken(logits, r.request, r.rng, b * V, V);
          r.tokens.push(s.token);
          r.logprobs.push(s.logprob);
          next.push(s.token);
          if (r.stopIds.has(s.token)) {
            r.done = true;
            r.finish = 'stop';
            r.stopTokenId = s.token;
          } else if (r.stopStrings.length > 0) {
            const text = shared.decode!(r.tokens);
            const hit = firstStop(text, r.stopStrings);
            if (hit) {
              r.done = true;
              r.finish = 'stop';
              r.stopString = hit.stop;
              r.text = text.slice(0, hit.index);
            }
          }
        } catch (e) {
          // This row's own sampling or stop-string decode threw: it fails, the batch goes on.
          r.error = e;
          r.done = true;
          if (next.length === b) next.push(pad);
        }
        if (r.tokens.length >= r.request.maxNewTokens) r.done = true;
      });
      if (live.every((ri) => rows[ri]!.done)) break;

      // Finished rows leave the batch when the backend can shrink its cache; otherwise they
      // feed padding (masked out) until the batch ends.
      let keep = live.map((_, b) => b);
      if (backend.compact && live.some((ri) => rows[ri]!.done)) {
        keep = keep.filter((b) => !rows[live[b]!]!.done);
        logits = backend.compact(logits, keep);
      }
      const kept = keep.map((b) => live[b]!);
      const stepMask: number[] = [];
      for (const b of keep) {
        for (let j = 0; j < S; j++) stepMask.push(attention[b * S + j]!);
        stepMask.push(rows[live[b]!]!.done ? 0 : 1);
      }
      const nextIds = keep.map((b) => next[b]!);
      live = kept;
      attention = stepMask;
      S += 1;
      const Bn = live.length;
      logits = await backend.step({
        [INPUT_IDS]: int64(nextIds, [Bn, 1]),
        [ATTENTION_MASK]: int64(attention, [Bn, S]),
        [POSITION_IDS]: int64(
          live.map((ri) => (rows[ri]!.done ? 0 : rows[ri]!.nextPos++)),
          [Bn, 1],
        ),
        ...lora,
        ...pastOf(logits),
      });
    }

    for (const r of rows) {
      if (r.error !== undefined) {
        settled[r.index] = { status: 'rejected', reason: r.error };
        continue;
      }
      try {
        const out: GenerationOutput = {
          promptTokens: Int32Array.from(r.prompt),
          tokens: Int32Array.from(r.tokens),
          logprobs: Float32Array.from(r.logprobs),
          finishReason: r.finish,
        };
        if (r.stopTokenId !== undefined) out.stopTokenId = r.stopTokenId;
        if (r.stopString !== undefined) out.stopString = r.stopString;
        if (shared.decode) {
          out.text =
            r.text ?? shared.decode(r.stopTokenId === undefined ? r.tokens : r.tokens.slice(0, -1));
        }
        settled[r.index] = { status: 'fulfilled', value: out };
      } catch (reason) {
        settled[r.index] = { status: 'rejected', reason };
      }
    }
    return settled;
  }
}

/**
 * Weights up to this size run the generate graph on one thread unless told otherwise: a small
 * model's decode is bound by per-kernel overhead, which more threads only add to (stories260K at
 * batch 32: one thread 2× faster than two); a large one's by memory bandwidth, which two threads
 * double (Qwen2.5-0.5B shape: 7.1 → 12.9 tok/s). docs/performance.md has the measurements.
 */
export const ONE_THREAD_MAX_WEIGHT_BYTES = 64 * 2 ** 20;

/** Worker batchers by default: small models on a machine with cores to spare (see generateWorkers). */
function defaultGenerateWorkers(art: DecoderArtifacts): number {
  if (art.options.intraOpThreads !== undefined) return 0;
  if (art.manifest.weights.bytes > ONE_THREAD_MAX_WEIGHT_BYTES) return 0;
  const cores = availableParallelism();
  return cores > 1 ? Math.min(cores, 4) : 0;
}

/** The generate session's thread count: the artifacts' own, else by model size. */
function generateThreads(art: DecoderArtifacts): { intraOpThreads?: number } {
  if (art.options.intraOpThreads !== undefined) return {};
  return art.manifest.weights.bytes <= ONE_THREAD_MAX_WEIGHT_BYTES ? { intraOpThreads: 1 } : {};
}

/** Checks a request like the graphs need it; returns its prompt ids and non-empty stop strings. */
function validateRequest(
  q: Pick<
    GenerationRequest,
    'prompt' | 'maxNewTokens' | 'stopTokenIds' | 'stopStrings' | 'temperature' | 'topP'
  >,
  i: number,
  V: number,
  maxPositions: number,
  decode: ((ids: ArrayLike<number>) => string) | undefined,
): { prompt: number[]; stopStrings: string[] } {
  const { maxNewTokens } = q;
  if (!Number.isInteger(maxNewTokens) || maxNewTokens < 0)
    throw new RangeError(`maxNewTokens must be a non-negative integer, got ${maxNewTokens}`);
  const t = q.temperature ?? 1;
  if (t < 0 || !Number.isFinite(t)) throw new RangeError(`temperature must be >= 0, got ${t}`);
  const topP = q.topP ?? 1;
  if (!(topP > 0 && topP <= 1)) throw new RangeError(`top_p must be in (0, 1], got ${topP}`);
  const stopStrings = (q.stopStrings ?? []).filter((x) => x.length > 0);
  if (stopStrings.length > 0 && !decode)
    throw new RangeError('stop strings need a decode function (a tokenizer)');
  const prompt = Array.from(q.prompt);
  if (prompt.length === 0) throw new RangeError(`prompt ${i} is empty (add BOS)`);
  for (const t of prompt)
    if (!Number.isInteger(t) || t < 0 || t >= V)
      throw new TokenOutOfVocabularyError({ what: `prompt ${i}`, tokenId: t, vocabSize: V });
  // A stop id outside the vocabulary can never be sampled: it means the tokenizer and the model
  // disagree (the generate graph would also fail on it mid-batch), so it is refused here.
  for (const t of q.stopTokenIds ?? [])
    if (!Number.isInteger(t) || t < 0 || t >= V)
      throw new TokenOutOfVocabularyError({
        what: `request ${i}'s stop tokens`,
        tokenId: t,
        vocabSize: V,
      });
  if (prompt.length + maxNewTokens > maxPositions)
    throw new ContextLengthExceededError({
      what: `prompt ${i}`,
      promptTokens: prompt.length,
      newTokens: maxNewTokens,
      maxPositions,
    });
  return { prompt, stopStrings };
}

/** The outputs in order, or the first request's error (generate / generateEach: all or nothing). */
function allOrFirstError(settled: PromiseSettledResult<GenerationOutput>[]): GenerationOutput[] {
  const failed = settled.find((x): x is PromiseRejectedResult => x.status === 'rejected');
  if (failed) throw failed.reason;
  return settled.map((x) => (x as PromiseFulfilledResult<GenerationOutput>).value);
}

function checkBatchSize(n: number): void {
  if (!Number.isInteger(n) || n < 1)
    throw new RangeError(`maxBatchSize must be a positive integer, got ${n}`);
}
