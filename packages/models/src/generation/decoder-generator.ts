import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { createRng } from '@flowgrpo/core';
import * as ort from 'onnxruntime-node';
import {
  type ArtifactsManifest,
  type DecoderArtifacts,
  readArtifactsManifest,
} from '../artifacts/decoder-artifacts.js';
import type { LoraParams } from '../lora/lora-weights.js';
import type { DecoderConfig } from '../models/config.js';
import {
  LORA_SCALE,
  pastKeyName,
  pastValueName,
  presentKeyName,
  presentValueName,
} from '../models/graph/decoder-graph.js';
import type { DeviceRequest } from '../runtime/devices.js';
import type { ValueSpec } from '../runtime/feeds.js';
import type { Session } from '../runtime/session.js';
import { SessionWorker } from '../runtime/session-worker.js';
import type { FusedBatcher } from './fused-batcher.js';
import { type FusedGenerationOptions, FusedGenerator } from './fused-generator.js';
import { type GenerationBackend, localBackend, workerBackend } from './generation-backend.js';
import type {
  AdapterState,
  BatchGenerator,
  DecoderGenerateOptions,
  GenerationOutput,
  GenerationRequest,
  RowRequest,
  SharedGenerateOptions,
} from './generation-request.js';
import { checkPrefillLimits } from './prefill-pieces.js';
import { StepGenerator } from './step-generator.js';

// Batched generation, the one entry point callers use. Two generators run a call (both
// BatchGenerator): with a `generate` graph in the artifacts (and the CPU EP), the fused one —
// continuous batching, the decode loop inside the graph (fused-generator.ts); otherwise — a
// worker-thread or GPU session — the step-by-step one over the standard prefill and decode graphs
// (step-generator.ts). Both give a request the same tokens for the same seed. This class holds
// what they share: the adapter, the seeds, and the choice between them.
//
// A request that fails on its own (invalid, or its decode or sampling throws) fails alone:
// generateSettled gives each request its own result, and its batch-mates the tokens they would
// have had without it.

export interface WorkerGeneratorOptions {
  /** Default 'cpu'; passed through to the worker's session. */
  device?: DeviceRequest;
  /** Host the session in this worker (default: a new one, terminated by release()). */
  worker?: SessionWorker;
  intraOpThreads?: number;
}

export class DecoderGenerator {
  readonly manifest: ArtifactsManifest;
  readonly #backend: GenerationBackend;
  readonly #artifacts: DecoderArtifacts | undefined;
  #fused: Promise<FusedGenerator | undefined> | undefined;
  readonly #steps: StepGenerator;
  /** The decode session of the standard path, opened on first use when it was not. */
  #decode: Promise<Session> | undefined;
  readonly #fusedOptions: FusedGenerationOptions;
  private lora: LoraParams | undefined;
  #loraScale = 1;
  #loraVersion = 0;
  /** The adapter as both generators read it. */
  readonly #adapter: AdapterState;

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
    this.#adapter = {
      version: () => this.#loraVersion,
      feeds: (inputs) => this.loraFeeds(inputs),
    };
    this.#steps = new StepGenerator({
      backend: this.#backend,
      config: this.manifest.config,
      maxPositions: this.manifest.maxPositions,
      adapter: this.#adapter,
      prefill: this.#fusedOptions,
    });
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
        if (f) f.pool.maxBatchSize = n;
      },
      () => {},
    );
  }

  /** The fused generator, when the artifacts can run it; opened on first use. */
  #fusedGenerator(): Promise<FusedGenerator | undefined> {
    const art = this.#artifacts;
    this.#fused ??= art
      ? FusedGenerator.open(art, this.#fusedOptions, this.#adapter)
      : Promise.resolve(undefined);
    return this.#fused;
  }

  /**
   * The continuous batcher's counters (chunks run, rows admitted, joins into a running batch,
   * steps, row-steps), or undefined on the standard path.
   */
  async batchStats(): Promise<FusedBatcher['stats'] | undefined> {
    return (await this.#fusedGenerator())?.pool.stats;
  }

  /**
   * The worker batchers (generateWorkers): how many are open now (0 until enough rows were in
   * flight), and why they could not open, if they could not (generation then stays here).
   */
  async batchWorkers(): Promise<{ open: number; openError?: unknown }> {
    const pool = (await this.#fusedGenerator())?.pool;
    return {
      open: pool?.workerCount ?? 0,
      ...(pool?.openError !== undefined && { openError: pool.openError }),
    };
  }

  /** Whether generation runs the fused `generate` graph (continuous batching). */
  async usesFusedGraph(): Promise<boolean> {
    return (await this.#fusedGenerator()) !== undefined;
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
    await (await this.#fused)?.pool.close();
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
      await this.#run(
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
    shared: SharedGenerateOptions = {},
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
    shared: SharedGenerateOptions = {},
  ): Promise<PromiseSettledResult<GenerationOutput>[]> {
    return this.#run(
      requests.map((r) => ({
        ...r,
        rng: createRng(r.seed ?? randomBytes(8).readBigUInt64LE()).fork('row:0'),
      })),
      shared,
    );
  }

  async #run(
    rows: RowRequest[],
    shared: SharedGenerateOptions,
  ): Promise<PromiseSettledResult<GenerationOutput>[]> {
    return (await this.#generator()).run(rows, shared);
  }

  /** The fused generator when the artifacts can run it, else the step-by-step one. */
  async #generator(): Promise<BatchGenerator> {
    const fused = await this.#fusedGenerator();
    if (fused) return fused;
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
    return this.#steps;
  }
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
