import type { Rng } from '@flowgrpo/core';
import * as ort from 'onnxruntime-node';
import type { DecoderConfig } from '../models/config.js';
import {
  GENERATE_INPUTS,
  GENERATE_OUTPUTS,
  genPastKey,
  genPastValue,
  genPresentKey,
  genPresentValue,
} from '../models/graph/inference-graph.js';
import type { GenerateRunner } from './generate-runner.js';
import { checkPrefillLimits, type PrefillLimits, prefillWidth } from './prefill-pieces.js';
import { type SamplingParams, sampleToken } from './sampling.js';
import { firstStop } from './stop-strings.js';
import type { TokenListener } from './token-stream.js';

// Continuous batching over the `generate` graph (models/graph/inference-graph.ts). Requests wait
// in a queue; the batch runs in chunks — one session.run samples up to `chunkTokens` tokens per
// row inside the graph — and between chunks finished rows leave (their cache rows are dropped)
// and waiting requests join: their prompts run as one prefill chunk of their own, and their cache
// is merged into the running batch's (left-padded to a common length, the empty slots masked).
// So a GRPO rollout phase with G = 8 keeps the batch full while rollouts finish at different
// lengths and start new turns, as vLLM's scheduler does.
//
// A request's tokens depend only on its own logits and its own random stream (one uniform per
// sampled token, drawn from the row's RNG as sampling.ts draws it), never on its batch-mates.
// (Its logits can still move in the last bits with the batch it runs in, so a near-tie could
// flip; the log-probs it returns were seen to vary in the last bits between runs:
// docs/performance.md, "Continuous batching".)
// Rows with top-k / top-p sample on the host from the `logits` output: while one is in the batch,
// chunks are one token long.
//
// Many clients at once. A row that fails on its own — its temperature is invalid, its stop-string
// decode or its host sampling throws — leaves the batch with its own error; its batch-mates go on
// and finish with the tokens they would have had (their cache rows are untouched). Only a failure
// of the graph run itself fails the rows of that run. A long prompt batch is prefilled in pieces
// (prefill-pieces.ts): the pieces before the last go through #extend, which keeps no sample.

/** One queued request, validated, with its random stream and its finish callbacks. */
export interface BatchRow extends SamplingParams {
  prompt: number[];
  maxNewTokens: number;
  stopIds: Set<number>;
  stopStrings: string[];
  rng: Rng;
  decode: ((ids: ArrayLike<number>) => string) | undefined;
  /** Streaming: each token as it is sampled. */
  onToken?: TokenListener;
  /** Aborting it fails the row after the chunk it is in; its batch-mates go on. */
  signal?: AbortSignal;
  /** The adapter the row runs under (rows of one batch share it; a new one waits for a new batch). */
  lora: { version: number; feeds: Record<string, ort.Tensor> };
  done(result: RowResult): void;
  fail(error: unknown): void;
}

export interface RowResult {
  tokens: number[];
  logprobs: number[];
  finish: 'stop' | 'length';
  stopTokenId?: number;
  stopString?: string;
  text?: string;
}

interface Live {
  row: BatchRow;
  tokens: number[];
  logprobs: number[];
  /** The sampled token not yet in the cache (fed at the next chunk), and its position. */
  pending: number;
  pendingPos: number;
  hostSampled: boolean;
  result?: RowResult;
  /** Why the row failed on its own (it leaves the batch with this error). */
  error?: unknown;
}

/** The batch's cache: per layer [B, kv, S, d] key and value, and which slots hold tokens. */
interface Cache {
  keys: Float32Array[];
  values: Float32Array[];
  mask: Uint8Array; // [B, S]
  slots: number;
}

export interface FusedBatcherOptions extends PrefillLimits {
  /** The generate graph's session, on this thread or in a worker (generate-runner.ts). */
  runner: GenerateRunner;
  config: DecoderConfig;
  maxPositions: number;
  /** Rows in one batch (default 64). */
  maxBatchSize?: number;
  /**
   * Tokens sampled per row per session.run while requests keep coming (default 16). When no
   * request came during a chunk the next one is twice as long, up to `maxChunkTokens`: fewer runs
   * for a lone batch, and a newcomer waits at most one chunk.
   */
  chunkTokens?: number;
  /** Longest chunk (default 256). */
  maxChunkTokens?: number;
  /**
   * Batches of at least this many rows run the graph's split-cache loop (no per-token copy of
   * the cache), smaller ones the concat loop (fewer nodes). Default SPLIT_CACHE_FROM.
   */
  splitCacheFrom?: number;
}

/**
 * Batch size from which an 'auto' graph runs its split-cache loop. On the CPU EP the concat loop
 * measured faster for a small model at the batch sizes of a rollout phase (docs/performance.md,
 * "The KV cache"), so only larger batches (where the per-token copy of a long cache dominates)
 * take the split loop.
 */
export const SPLIT_CACHE_FROM = 48;

const needsHost = (r: SamplingParams) =>
  (r.temperature ?? 1) > 0 && ((r.topK !== undefined && r.topK > 0) || (r.topP ?? 1) < 1);

export class FusedBatcher {
  readonly #o: FusedBatcherOptions;
  readonly #waiting: BatchRow[] = [];
  #live: Live[] = [];
  #cache: Cache | undefined;
  #lora: BatchRow['lora'] | undefined;
  #running = false;
  maxBatchSize: number;
  chunkTokens: number;
  maxChunkTokens: number;
  /** The next chunk's length: doubles while no request comes, back to chunkTokens when one does. */
  #chunkLen: number;
  /** Requests submitted since the last chunk was sized. */
  #arrived = 0;
  /** Counters for metrics: chunks run, rows admitted, admissions into a running batch. */
  readonly stats = { chunks: 0, admitted: 0, joins: 0, stepsRun: 0, rowSteps: 0 };

  readonly #splitInput: boolean;

  constructor(o: FusedBatcherOptions) {
    checkPrefillLimits(o);
    this.#o = o;
    this.#splitInput = o.runner.inputNames.includes(GENERATE_INPUTS.splitCache);
    this.maxBatchSize = o.maxBatchSize ?? 64;
    this.chunkTokens = o.chunkTokens ?? 16;
    this.maxChunkTokens = Math.max(this.chunkTokens, o.maxChunkTokens ?? 256);
    this.#chunkLen = this.chunkTokens;
  }

  /** The generate graph's inputs (for the LoRA feeds). */
  get inputs() {
    return this.#o.runner.inputs;
  }

  /** Rows running or waiting: where a pool sends new requests (batcher-pool.ts). */
  get load(): number {
    return this.#live.length + this.#waiting.length;
  }

  submit(rows: BatchRow[]): void {
    this.#arrived += rows.length;
    for (const r of rows) {
      const t = r.temperature ?? 1;
      // A bad temperature fails its own row here, never the batch it would have run in.
      if (!(t >= 0) || !Number.isFinite(t))
        r.fail(new RangeError(`temperature must be >= 0, got ${t}`));
      else if (r.maxNewTokens === 0) settle(r, { tokens: [], logprobs: [], finish: 'length' });
      else this.#waiting.push(r);
    }
    if (!this.#running) {
      this.#running = true;
      // Start after the current tick so that requests made together join one batch.
      setImmediate(() => void this.#loop());
    }
  }

  async #loop(): Promise<void> {
    try {
      for (;;) {
        // A bad size (NaN, 0) would admit nothing and spin without awaiting: one row at least.
        const limit = this.maxBatchSize >= 1 ? Math.floor(this.maxBatchSize) : 1;
        if (this.#live.length === 0) {
          this.#cache = undefined;
          this.#chunkLen = this.chunkTokens;
          if (this.#waiting.length === 0) break;
          this.#lora = this.#waiting[0]!.lora;
        }
        // Admit waiting rows of the batch's adapter version, up to the batch size.
        const room = limit - this.#live.length;
        if (room > 0) {
          const admit: BatchRow[] = [];
          for (let i = 0; i < this.#waiting.length && admit.length < room; ) {
            if (this.#waiting[i]!.lora.version === this.#lora!.version)
              admit.push(...this.#waiting.splice(i, 1));
            else i++;
          }
          if (admit.length > 0) {
            try {
              await this.#admit(admit);
            } catch (e) {
              // The admitted rows fail; a running batch goes on without them.
              for (const r of admit) r.fail(e);
            }
          }
        }
        if (this.#live.length > 0) await this.#chunk();
      }
    } catch (e) {
      for (const l of this.#live) l.row.fail(e);
      for (const r of this.#waiting.splice(0)) r.fail(e);
      this.#live = [];
      this.#cache = undefined;
    } finally {
      this.#running = false;
      if (this.#waiting.length > 0) this.submit([]);
    }
  }

  /**
   * Prefills new rows (runs of their own: all but the last piece of a long prompt batch through
   * #extend), samples their first token, merges them into the batch.
   */
  async #admit(rows: BatchRow[]): Promise<void> {
    this.stats.admitted += rows.length;
    const fresh = this.#live.length === 0;
    if (!fresh) this.stats.joins++;
    const T = Math.max(...rows.map((r) => r.prompt.length));
    const B = rows.length;
    const ids = new Int32Array(B * T);
    const pos = new Int32Array(B * T);
    const mask = new Uint8Array(B * T);
    rows.forEach((r, b) => {
      const n = r.prompt.length;
      for (let j = 0; j < n; j++) {
        ids[b * T + T - n + j] = r.prompt[j]!;
        pos[b * T + T - n + j] = j;
        mask[b * T + T - n + j] = 1;
      }
    });
    const live: Live[] = rows.map((row) => ({
      row,
      tokens: [],
      logprobs: [],
      pending: 0,
      pendingPos: row.prompt.length,
      hostSampled: needsHost(row),
    }));
    // A fresh batch decodes right away; joiners sample one token and join the next chunk.
    const steps = fresh
      ? this.#steps(
          live,
          rows.map((r) => r.prompt.length - 1),
        )
      : 1;
    // Columns per prefill run; the last piece (at most `width` columns) samples.
    const width = prefillWidth(B, T, this.#o);
    let past = this.#emptyCache();
    let from = 0;
    for (; T - from > width; from += width)
      past = await this.#extend(
        columns(ids, B, T, from, from + width),
        columns(pos, B, T, from, from + width),
        width,
        past,
        columns(mask, B, T, 0, from + width),
      );
    const out = await this.#run(
      live,
      columns(ids, B, T, from, T),
      columns(pos, B, T, from, T),
      T - from,
      past,
      mask,
      steps,
    );
    if (fresh) {
      this.#live = live;
      this.#cache = out.cache;
    } else {
      this.#live.push(...live);
      this.#cache = mergeCaches(this.#cache!, out.cache, this.#o.config);
    }
    this.#finishRows();
  }

  /** One chunk of the running batch: each row feeds its pending token. */
  async #chunk(): Promise<void> {
    const live = this.#live;
    const cache = this.#cache!;
    const B = live.length;
    const ids = Int32Array.from(live, (l) => l.pending);
    const pos = Int32Array.from(live, (l) => l.pendingPos);
    const S = cache.slots;
    const mask = new Uint8Array(B * (S + 1));
    for (let b = 0; b < B; b++) {
      mask.set(cache.mask.subarray(b * S, (b + 1) * S), b * (S + 1));
      mask[b * (S + 1) + S] = 1;
    }
    const steps = this.#steps(
      live,
      live.map((l) => l.pendingPos),
    );
    const out = await this.#run(live, ids, pos, 1, cache, mask, steps);
    this.#cache = out.cache;
    this.#finishRows();
  }

  /** Tokens to sample this chunk: bounded by the chunk size, what rows still need, positions. */
  #steps(live: Live[], lastPos: number[]): number {
    if (live.some((l) => l.hostSampled)) return 1;
    let k = 1;
    for (const l of live) k = Math.max(k, l.row.maxNewTokens - l.tokens.length);
    // Requests arriving (rollouts starting their next turn) will want to join, and a streamed
    // row's client sees its tokens only when a chunk ends: keep chunks short.
    const streamed = live.some((l) => l.row.onToken);
    if (this.#arrived > 0 || this.#waiting.length > 0 || streamed)
      this.#chunkLen = this.chunkTokens;
    this.#arrived = 0;
    k = Math.min(k, Math.max(1, this.#chunkLen));
    this.#chunkLen = Math.min(this.maxChunkTokens, this.#chunkLen * 2);
    // The loop feeds tokens at positions lastPos + 1 … lastPos + k − 1.
    for (const p of lastPos) k = Math.min(k, this.#o.maxPositions - p);
    return Math.max(1, k);
  }

  #emptyCache(): Cache {
    const L = this.#o.config.numHiddenLayers;
    return {
      keys: Array.from({ length: L }, () => new Float32Array(0)),
      values: Array.from({ length: L }, () => new Float32Array(0)),
      mask: new Uint8Array(0),
      slots: 0,
    };
  }

  /**
   * Runs the graph: new tokens [B, T] after `past`, `steps` samples per row. Appends each row's
   * samples (stopping where the row is done) and returns the cache after the run.
   */
  async #run(
    live: Live[],
    ids: Int32Array,
    pos: Int32Array,
    T: number,
    past: Cache,
    mask: Uint8Array, // [B, S + T]
    steps: number,
  ): Promise<{ cache: Cache }> {
    const B = live.length;
    const stopsPerRow = Math.max(1, ...live.map((l) => l.row.stopIds.size));
    const stopIds = new Int32Array(B * stopsPerRow).fill(-1);
    const temperature = new Float64Array(B);
    const uniforms = new Float64Array(B * steps);
    let sampling = false;
    live.forEach((l, b) => {
      let j = 0;
      for (const s of l.row.stopIds) stopIds[b * stopsPerRow + j++] = s;
      const t = l.row.temperature ?? 1;
      temperature[b] = t;
      if (t > 0 && !l.hostSampled) {
        sampling = true;
        // One uniform per sampled token, as sampleToken draws it.
        for (let k = 0; k < steps; k++) uniforms[b * steps + k] = l.row.rng.next();
      }
    });
    const host = live.some((l) => l.hostSampled);
    const o = await this.#graph(
      { ids, pos, T, past, mask },
      { temperature, uniforms, steps, stopIds, stopsPerRow, sampling, logits: host },
    );
    const tokens = o[GENERATE_OUTPUTS.tokens]!;
    const K = tokens.dims[0]!;
    const tok = tokens.data as Int32Array;
    const lp = o[GENERATE_OUTPUTS.logprobs]!.data as Float32Array;
    const logits = host ? (o[GENERATE_OUTPUTS.logits]!.data as Float32Array) : undefined;
    this.stats.chunks++;
    this.stats.stepsRun += K;
    this.stats.rowSteps += K * B;
    const V = this.#o.config.vocabSize;
    live.forEach((l, b) => {
      if (l.result || l.error !== undefined) return;
      try {
        for (let k = 0; k < K && !l.result; k++) {
          let token = tok[k * B + b]!;
          let logprob = lp[k * B + b]!;
          if (l.hostSampled) {
            const s = sampleToken(logits!, l.row, l.row.rng, b * V, V);
            token = s.token;
            logprob = s.logprob;
          }
          this.#push(l, token, logprob);
        }
        if (!l.result && l.row.signal?.aborted) l.error = l.row.signal.reason;
      } catch (e) {
        // This row's own sampling or stop-string decode threw: it leaves with its error.
        l.error = e;
      }
      // The last sample is the next chunk's input, at the position after the fed tokens'.
      l.pending = l.tokens[l.tokens.length - 1] ?? 0;
    });
    live.forEach((l, b) => {
      l.pendingPos = pos[b * T + T - 1]! + K;
    });
    return { cache: this.#cacheAfter(o, past, mask, B, T, K) };
  }

  /**
   * Feeds prompt columns [B, T] into the cache without keeping a sample: the pieces of a long
   * prompt batch before its last. One greedy step (no row's random stream is drawn from), its
   * token dropped; the returned cache holds past + these T slots.
   */
  async #extend(
    ids: Int32Array,
    pos: Int32Array,
    T: number,
    past: Cache,
    mask: Uint8Array, // [B, S + T]
  ): Promise<Cache> {
    const B = ids.length / T;
    const o = await this.#graph(
      { ids, pos, T, past, mask },
      {
        temperature: new Float64Array(B),
        uniforms: new Float64Array(B),
        steps: 1,
        stopIds: new Int32Array(B).fill(-1),
        stopsPerRow: 1,
        sampling: false,
        logits: false,
      },
    );
    this.stats.chunks++;
    return this.#cacheAfter(o, past, mask, B, T, o[GENERATE_OUTPUTS.tokens]!.dims[0]!);
  }

  /** One run of the generate graph (see inference-graph.ts for its inputs and outputs). */
  #graph(
    input: { ids: Int32Array; pos: Int32Array; T: number; past: Cache; mask: Uint8Array },
    sample: {
      temperature: Float64Array;
      uniforms: Float64Array;
      steps: number;
      stopIds: Int32Array;
      stopsPerRow: number;
      sampling: boolean;
      /** Fetch the `logits` output (rows sampled on the host). */
      logits: boolean;
    },
  ): Promise<Record<string, ort.Tensor>> {
    const c = this.#o.config;
    const { ids, pos, T, past, mask } = input;
    const B = ids.length / T;
    const S = past.slots;
    const kv = c.numKeyValueHeads;
    const d = c.headDim;
    const L = c.numHiddenLayers;
    const feeds: Record<string, ort.Tensor> = {
      [GENERATE_INPUTS.ids]: new ort.Tensor('int32', ids, [B, T]),
      [GENERATE_INPUTS.positions]: new ort.Tensor('int32', pos, [B, T]),
      [GENERATE_INPUTS.mask]: new ort.Tensor('bool', mask, [B, S + T]),
      [GENERATE_INPUTS.temperature]: new ort.Tensor('float64', sample.temperature, [B]),
      [GENERATE_INPUTS.uniforms]: new ort.Tensor('float64', sample.uniforms, [B, sample.steps]),
      [GENERATE_INPUTS.stopIds]: new ort.Tensor('int32', sample.stopIds, [B, sample.stopsPerRow]),
      [GENERATE_INPUTS.sampling]: new ort.Tensor(
        'bool',
        Uint8Array.of(sample.sampling ? 1 : 0),
        [],
      ),
      ...(this.#splitInput && {
        [GENERATE_INPUTS.splitCache]: new ort.Tensor(
          'bool',
          Uint8Array.of(B >= (this.#o.splitCacheFrom ?? SPLIT_CACHE_FROM) ? 1 : 0),
          [],
        ),
      }),
      ...this.#lora!.feeds,
    };
    for (let l = 0; l < L; l++) {
      feeds[genPastKey(l)] = new ort.Tensor('float32', past.keys[l]!, [B, kv, S, d]);
      feeds[genPastValue(l)] = new ort.Tensor('float32', past.values[l]!, [B, kv, S, d]);
    }
    // The logits output is last, so leaving it out keeps the fetch list a prefix of the outputs.
    const fetches = sample.logits
      ? undefined
      : this.#o.runner.outputNames.filter((n) => n !== GENERATE_OUTPUTS.logits);
    // The past cache is not read again (the run returns the next one): a worker may take it.
    const pastNames = Array.from({ length: L }, (_, l) => [genPastKey(l), genPastValue(l)]).flat();
    return this.#o.runner.run(feeds, fetches, pastNames);
  }

  /** The cache a run returned: past + T fed slots + the K − 1 samples fed back in its loop. */
  #cacheAfter(
    o: Record<string, ort.Tensor>,
    past: Cache,
    mask: Uint8Array, // [B, S + T]
    B: number,
    T: number,
    K: number,
  ): Cache {
    const S = past.slots;
    const S2 = S + T + K - 1;
    const newMask = new Uint8Array(B * S2);
    for (let b = 0; b < B; b++) {
      newMask.set(mask.subarray(b * (S + T), (b + 1) * (S + T)), b * S2);
      newMask.fill(1, b * S2 + S + T, (b + 1) * S2);
    }
    const cache: Cache = { keys: [], values: [], mask: newMask, slots: S2 };
    for (let l = 0; l < this.#o.config.numHiddenLayers; l++) {
      cache.keys.push(o[genPresentKey(l)]!.data as Float32Array);
      cache.values.push(o[genPresentValue(l)]!.data as Float32Array);
    }
    return cache;
  }

  /** Appends one sample to a row and decides whether the row is finished. */
  #push(l: Live, token: number, logprob: number): void {
    const row = l.row;
    l.tokens.push(token);
    l.logprobs.push(logprob);
    row.onToken?.(token, logprob);
    let finish: RowResult | undefined;
    if (row.stopIds.has(token)) {
      finish = { tokens: l.tokens, logprobs: l.logprobs, finish: 'stop', stopTokenId: token };
    } else if (row.stopStrings.length > 0) {
      const text = row.decode!(l.tokens);
      const hit = firstStop(text, row.stopStrings);
      if (hit)
        finish = {
          tokens: l.tokens,
          logprobs: l.logprobs,
          finish: 'stop',
          stopString: hit.stop,
          text: text.slice(0, hit.index),
        };
    }
    if (!finish && l.tokens.length >= row.maxNewTokens)
      finish = { tokens: l.tokens, logprobs: l.logprobs, finish: 'length' };
    if (finish) l.result = finish;
  }

  /** Resolves finished rows, fails failed ones, and drops both (and their cache rows). */
  #finishRows(): void {
    const keep: number[] = [];
    this.#live.forEach((l, b) => {
      if (l.error !== undefined) l.row.fail(l.error);
      else if (l.result) settle(l.row, l.result);
      else keep.push(b);
    });
    if (keep.length === this.#live.length) return;
    this.#live = keep.map((b) => this.#live[b]!);
    this.#cache = keep.length > 0 ? keepRows(this.#cache!, keep, this.#o.config) : undefined;
  }
}

/** Columns [from, to) of a row-major [B, T] array. */
function columns<A extends Int32Array | Uint8Array>(
  a: A,
  B: number,
  T: number,
  from: number,
  to: number,
): A {
  if (from === 0 && to === T) return a;
  const w = to - from;
  const out = new (a.constructor as new (n: number) => A)(B * w);
  for (let b = 0; b < B; b++) out.set(a.subarray(b * T + from, b * T + to), b * w);
  return out;
}

/** Rows `keep` of a cache (each row's block is contiguous: one copy per row and tensor). */
function keepRows(cache: Cache, keep: readonly number[], c: DecoderConfig): Cache {
  const S = cache.slots;
  // Slots that are empty in every kept row (left padding of rows that left) are cut off.
  let lead = S;
  for (const b of keep) {
    const m = cache.mask.subarray(b * S, (b + 1) * S);
    const first = m.indexOf(1);
    lead = Math.min(lead, first < 0 ? S : first);
  }
  const trim = lead >= 64 && lead * 4 >= S ? lead : 0;
  const S2 = S - trim;
  const kv = c.numKeyValueHeads;
  const d = c.headDim;
  const rowSize = kv * S * d;
  const copy = (src: Float32Array): Float32Array => {
    const dst = new Float32Array(keep.length * kv * S2 * d);
    keep.forEach((b, i) => {
      if (trim === 0) dst.set(src.subarray(b * rowSize, (b + 1) * rowSize), i * rowSize);
      else
        for (let h = 0; h < kv; h++) {
          const from = (b * kv + h) * S * d + trim * d;
          dst.set(src.subarray(from, from + S2 * d), (i * kv + h) * S2 * d);
        }
    });
    return dst;
  };
  const mask = new Uint8Array(keep.length * S2);
  keep.forEach((b, i) => {
    mask.set(cache.mask.subarray(b * S + trim, (b + 1) * S), i * S2);
  });
  return { keys: cache.keys.map(copy), values: cache.values.map(copy), mask, slots: S2 };
}

/** Rows of `a` then rows of `b`, each left-padded to the longer slot count. */
function mergeCaches(a: Cache, b: Cache, c: DecoderConfig): Cache {
  const S = Math.max(a.slots, b.slots);
  const kv = c.numKeyValueHeads;
  const d = c.headDim;
  const rowsA = a.mask.length / Math.max(1, a.slots);
  const rowsB = b.mask.length / Math.max(1, b.slots);
  const B = rowsA + rowsB;
  const place = (
    dst: Float32Array,
    src: Float32Array,
    rows: number,
    from: number,
    slots: number,
  ) => {
    if (slots === S) {
      dst.set(src, from * kv * S * d);
      return;
    }
    for (let r = 0; r < rows; r++)
      for (let h = 0; h < kv; h++)
        dst.set(
          src.subarray((r * kv + h) * slots * d, (r * kv + h + 1) * slots * d),
          ((from + r) * kv + h) * S * d + (S - slots) * d,
        );
  };
  const merge = (x: Float32Array, y: Float32Array) => {
    const out = new Float32Array(B * kv * S * d);
    place(out, x, rowsA, 0, a.slots);
    place(out, y, rowsB, rowsA, b.slots);
    return out;
  };
  const mask = new Uint8Array(B * S);
  for (let r = 0; r < rowsA; r++)
    mask.set(a.mask.subarray(r * a.slots, (r + 1) * a.slots), r * S + S - a.slots);
  for (let r = 0; r < rowsB; r++)
    mask.set(b.mask.subarray(r * b.slots, (r + 1) * b.slots), (rowsA + r) * S + S - b.slots);
  return {
    keys: a.keys.map((k, l) => merge(k, b.keys[l]!)),
    values: a.values.map((v, l) => merge(v, b.values[l]!)),
    mask,
    slots: S,
  };
}

/**
 * Hands a row its result. The caller's `done` (its decode, say) may throw: that fails the row
 * alone, and neither the batch loop nor the rows after it.
 */
function settle(row: BatchRow, result: RowResult): void {
  try {
    row.done(result);
  } catch (e) {
    row.fail(e);
  }
}
