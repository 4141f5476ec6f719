import { randomBytes } from 'node:crypto';
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
import { SessionWorker, type WorkerSession } from '../runtime/session-worker.js';
import { type SamplingParams, sampleToken } from './sampling.js';

// Batched generation over the prefill and decode graphs: prompts are left-padded to one length
// (attention_mask 0 on padding, position ids counting real tokens only), prefill runs once, then
// one decode run per new token with the KV cache carried from `present.*` to `past_key_values.*`.
// Sampling happens on the host from each step's last-position logits (see sampling.ts for the
// temperature / logprob convention).

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
  const decode = artifacts.session('decode');
  // Without a prefill session the decode graph prefills from an empty (length-0) cache: the
  // same numbers, and one copy of the weights in ORT instead of two.
  const prefill = artifacts.sessions.prefill;
  // Per generate call: a closure over that call's cache (calls may interleave).
  return {
    inputs: decode.inputs,
    exclusive: false,
    async start(feeds, batch) {
      const r = prefill
        ? await prefill.run(feeds)
        : await decode.run({ ...emptyPast(artifacts.config, batch), ...feeds });
      return Object.assign(r.outputs.logits!.data as Float32Array, { cache: r.outputs });
    },
    async step(feeds) {
      const r = await decode.run(feeds);
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

export class DecoderGenerator {
  readonly manifest: ArtifactsManifest;
  #backend: GenerationBackend;
  #queue: Promise<unknown> = Promise.resolve();
  private lora: LoraParams | undefined;
  /** Multiplies the adapter's update (1: the policy; 0: the base / reference model). */
  loraScale = 1;

  /**
   * Over the sessions of opened artifacts (prefill if opened, else decode from an empty cache),
   * or over a backend (see inWorker).
   */
  constructor(
    source: DecoderArtifacts | { manifest: ArtifactsManifest; backend: GenerationBackend },
  ) {
    if ('backend' in source) {
      this.manifest = source.manifest;
      this.#backend = source.backend;
    } else {
      this.manifest = source.manifest;
      this.#backend = localBackend(source);
    }
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

  /** Use these LoRA matrices (PEFT names) in later generations; undefined = the base model. */
  setLora(params: LoraParams | undefined): void {
    this.lora = params;
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
    await this.#backend.release();
  }

  /**
   * Generates from every prompt with the same options: row i samples from
   * `createRng(seed).fork('row:<i>')`.
   */
  generate(
    prompts: readonly ArrayLike<number>[],
    options: DecoderGenerateOptions,
  ): Promise<GenerationOutput[]> {
    const root = createRng(options.seed ?? randomBytes(8).readBigUInt64LE());
    return this.#queued(
      prompts.map((prompt, i) => ({ ...options, prompt, rng: root.fork(`row:${i}`) })),
      options,
    );
  }

  /**
   * Generates one batch from requests with their own options (sampling, length, stops, seed).
   * A request's tokens do not depend on the others in the batch: it samples from
   * `createRng(seed).fork('row:0')`, exactly as `generate([prompt], { seed })` would.
   */
  generateEach(
    requests: readonly GenerationRequest[],
    shared: Pick<DecoderGenerateOptions, 'decode' | 'padTokenId'> = {},
  ): Promise<GenerationOutput[]> {
    return this.#queued(
      requests.map((r) => ({
        ...r,
        rng: createRng(r.seed ?? randomBytes(8).readBigUInt64LE()).fork('row:0'),
      })),
      shared,
    );
  }

  #queued(rows: RowRequest[], shared: Pick<DecoderGenerateOptions, 'decode' | 'padTokenId'>) {
    if (!this.#backend.exclusive) return this.#generate(rows, shared);
    const run = this.#queue.then(() => this.#generate(rows, shared));
    this.#queue = run.catch(() => undefined);
    return run;
  }

  async #generate(
    requests: readonly RowRequest[],
    shared: Pick<DecoderGenerateOptions, 'decode' | 'padTokenId'>,
  ): Promise<GenerationOutput[]> {
    const B0 = requests.length;
    if (B0 === 0) return [];
    const backend = this.#backend;
    const { config, maxPositions } = this.manifest;
    const V = config.vocabSize;
    const L = config.numHiddenLayers;
    const rows: Row[] = requests.map((q, i) => {
      const { maxNewTokens } = q;
      if (!Number.isInteger(maxNewTokens) || maxNewTokens < 0)
        throw new RangeError(`maxNewTokens must be a non-negative integer, got ${maxNewTokens}`);
      const stopStrings = (q.stopStrings ?? []).filter((x) => x.length > 0);
      if (stopStrings.length > 0 && !shared.decode)
        throw new RangeError('stop strings need a decode function (a tokenizer)');
      const prompt = Array.from(q.prompt);
      if (prompt.length === 0) throw new RangeError(`prompt ${i} is empty (add BOS)`);
      for (const t of prompt)
        if (!Number.isInteger(t) || t < 0 || t >= V)
          throw new RangeError(`prompt ${i} has token id ${t} outside [0, ${V})`);
      if (prompt.length + maxNewTokens > maxPositions)
        throw new RangeError(
          `prompt ${i} (${prompt.length} tokens) + ${maxNewTokens} new tokens exceeds the ${maxPositions} positions the graphs support`,
        );
      return {
        request: q,
        stopIds: new Set(q.stopTokenIds ?? []),
        stopStrings,
        prompt,
        tokens: [],
        logprobs: [],
        rng: q.rng,
        done: maxNewTokens === 0,
        finish: 'length',
        nextPos: prompt.length,
      };
    });

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
    let logits: CachedLogits = await backend.start(
      {
        [INPUT_IDS]: int64(ids, [B0, T]),
        [ATTENTION_MASK]: int64(mask, [B0, T]),
        [POSITION_IDS]: int64(pos, [B0, T]),
        ...lora,
      },
      B0,
    );

    for (;;) {
      const next: number[] = [];
      live.forEach((ri, b) => {
        const r = rows[ri]!;
        if (r.done) {
          next.push(pad);
          return;
        }
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
      const feeds: Record<string, ort.Tensor> = {
        [INPUT_IDS]: int64(nextIds, [Bn, 1]),
        [ATTENTION_MASK]: int64(attention, [Bn, S]),
        [POSITION_IDS]: int64(
          live.map((ri) => (rows[ri]!.done ? 0 : rows[ri]!.nextPos++)),
          [Bn, 1],
        ),
        ...lora,
      };
      const cache = logits.cache;
      if (cache)
        for (let l = 0; l < L; l++) {
          feeds[pastKeyName(l)] = cache[presentKeyName(l)]!;
          feeds[pastValueName(l)] = cache[presentValueName(l)]!;
        }
      logits = await backend.step(feeds);
    }

    return rows.map((r) => {
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
      return out;
    });
  }
}

function firstStop(
  text: string,
  stops: readonly string[],
): { stop: string; index: number } | undefined {
  let best: { stop: string; index: number } | undefined;
  for (const stop of stops) {
    const index = text.indexOf(stop);
    if (index >= 0 && (!best || index < best.index)) best = { stop, index };
  }
  return best;
}
