import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import type { DecoderArtifacts } from '../artifacts/decoder-artifacts.js';
import { projectionNames } from '../models/graph/base-weights.js';
import { expectedTensorShapes } from '../models/weights/tensor-names.js';
import type { Session } from '../runtime/session.js';
import { SessionWorker } from '../runtime/session-worker.js';
import { BatcherPool } from './batcher-pool.js';
import { type BatchRow, FusedBatcher } from './fused-batcher.js';
import { type GenerateRunner, localRunner, workerRunner } from './generate-runner.js';
import {
  type AdapterState,
  type BatchGenerator,
  type GenerationOutput,
  generationOutput,
  type RowRequest,
  type SharedGenerateOptions,
  validateRequest,
} from './generation-request.js';
import type { PrefillLimits } from './prefill-pieces.js';

// Generation over the artifacts' `generate` graph, the decode loop inside the graph
// (models/graph/inference-graph.ts): requests join a continuous batch (fused-batcher.ts), run on
// this thread or, with many rows in flight, in worker threads beside it (batcher-pool.ts). The
// graph's loop is a CPU Loop, so this path runs on the CPU EP only; elsewhere a DecoderGenerator
// steps with the decode graph (step-generator.ts).

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
 * Rows in flight from which generation moves to worker threads: from there on, for a small model,
 * one-thread batchers of part of the rows each ran faster together than one batcher of all
 * (docs/performance.md, "Figures behind the defaults"); a lone request would only wait for the
 * workers to start.
 */
export const WORKERS_FROM = 16;

export class FusedGenerator implements BatchGenerator {
  readonly pool: BatcherPool;
  readonly #art: DecoderArtifacts;
  readonly #adapter: AdapterState;
  /** The generate graph's LoRA feeds for the current adapter (one object per adapter version). */
  #lora: BatchRow['lora'] | undefined;

  private constructor(art: DecoderArtifacts, pool: BatcherPool, adapter: AdapterState) {
    this.#art = art;
    this.pool = pool;
    this.#adapter = adapter;
  }

  /**
   * The fused path of `art` when it has one — a `generate` graph, on the CPU EP, not turned off
   * by `useGenerateGraph` — else undefined.
   */
  static async open(
    art: DecoderArtifacts,
    options: FusedGenerationOptions,
    adapter: AdapterState,
  ): Promise<FusedGenerator | undefined> {
    // The device the generate session landed on when it is open ('auto' may have picked the
    // CPU), else the one asked for.
    const device = art.sessions.generate?.device ?? art.options.device ?? 'cpu';
    const wanted = options.useGenerateGraph ?? true;
    if (!art.manifest.graphs.generate || device !== 'cpu' || !wanted) return undefined;
    const session = await art.openSession('generate', generateThreads(art));
    return new FusedGenerator(art, openPool(art, session, options), adapter);
  }

  /** Rows join the continuous batch; results in request order. */
  run(
    requests: readonly RowRequest[],
    shared: SharedGenerateOptions,
  ): Promise<PromiseSettledResult<GenerationOutput>[]> {
    const { config, maxPositions } = this.#art.manifest;
    const lora = this.#loraFeeds();
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
              ...(q.onToken && { onToken: q.onToken }),
              ...(q.signal && { signal: q.signal }),
              fail: reject,
              done: (r) => resolve(generationOutput(prompt, r, decode)),
            });
          }),
      ),
    );
    this.pool.submit(rows);
    return outputs;
  }

  #loraFeeds(): BatchRow['lora'] {
    const version = this.#adapter.version();
    if (this.#lora?.version !== version)
      this.#lora = { version, feeds: this.#adapter.feeds(this.pool.inputs) };
    return this.#lora;
  }
}

/** The batcher on this thread over `session`, and the worker batchers it may open. */
function openPool(art: DecoderArtifacts, session: Session, o: FusedGenerationOptions): BatcherPool {
  const batcher = (runner: GenerateRunner) =>
    new FusedBatcher({
      runner,
      config: art.manifest.config,
      maxPositions: art.manifest.maxPositions,
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
 * Weights up to this size run the generate graph on one thread unless told otherwise: a small
 * model's decode is bound by per-kernel overhead, which more threads only add to; a large one's
 * by memory bandwidth, which more threads raise (docs/performance.md, "Threads" and "Figures
 * behind the defaults").
 */
export const ONE_THREAD_MAX_WEIGHT_BYTES = 64 * 2 ** 20;

/**
 * The weights as the generate session holds them: float32, whatever weights.data stores (half
 * precision projections are cast at load: base_weights_dtype), so twice their stored bytes.
 */
function float32WeightBytes(art: DecoderArtifacts): number {
  const m = art.manifest;
  if (!m.baseWeightsDtype) return m.weights.bytes;
  const shapes = expectedTensorShapes(m.config);
  let half = 0;
  for (const name of projectionNames(m.config))
    half += 2 * (shapes.get(name) ?? []).reduce((a, b) => a * b, 1);
  return m.weights.bytes + half;
}

/** Worker batchers by default: small models on a machine with cores to spare (see generateWorkers). */
function defaultGenerateWorkers(art: DecoderArtifacts): number {
  if (art.options.intraOpThreads !== undefined) return 0;
  if (float32WeightBytes(art) > ONE_THREAD_MAX_WEIGHT_BYTES) return 0;
  const cores = availableParallelism();
  return cores > 1 ? Math.min(cores, 4) : 0;
}

/** The generate session's thread count: the artifacts' own, else by model size. */
function generateThreads(art: DecoderArtifacts): { intraOpThreads?: number } {
  if (art.options.intraOpThreads !== undefined) return {};
  return float32WeightBytes(art) <= ONE_THREAD_MAX_WEIGHT_BYTES ? { intraOpThreads: 1 } : {};
}
