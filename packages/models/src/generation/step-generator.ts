import type { Rng } from '@flowgrpo/core';
import * as ort from 'onnxruntime-node';
import type { DecoderConfig } from '../models/config.js';
import { ATTENTION_MASK, INPUT_IDS, POSITION_IDS } from '../models/graph/decoder-graph.js';
import { type CachedLogits, type GenerationBackend, pastOf } from './generation-backend.js';
import {
  type AdapterState,
  type BatchGenerator,
  type GenerationOutput,
  generationOutput,
  type RowRequest,
  type SharedGenerateOptions,
  validateRequest,
} from './generation-request.js';
import { type PrefillLimits, prefillWidth } from './prefill-pieces.js';
import { sampleToken } from './sampling.js';
import { firstStop } from './stop-strings.js';

// Generation over the standard prefill and decode graphs, one graph run per token — the path of a
// worker-thread or GPU session, and of artifacts without a `generate` graph. Prompts are
// left-padded to one length (attention_mask 0 on padding, position ids counting real tokens
// only), prefill runs once (in pieces for a long batch: prefill-pieces.ts; the decode graph takes
// new tokens after a past cache, so the pieces extend one cache), then one decode run per new
// token with the KV cache carried from `present.*` to `past_key_values.*`, and sampling happens
// on the host from each step's last-position logits (sampling.ts has the temperature / logprob
// convention). A request that fails on its own (invalid, or its sampling or stop-string decode
// throws) fails alone; its batch-mates get the tokens they would have had without it.

const int64 = (values: readonly number[], dims: number[]) =>
  new ort.Tensor(
    'int64',
    BigInt64Array.from(values, (v) => BigInt(v)),
    dims,
  );

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

export interface StepGeneratorOptions {
  backend: GenerationBackend;
  config: DecoderConfig;
  maxPositions: number;
  /** The adapter the LoRA feeds come from, read when a call starts. */
  adapter: AdapterState;
  prefill: PrefillLimits;
}

export class StepGenerator implements BatchGenerator {
  readonly #o: StepGeneratorOptions;
  /** Calls of an exclusive backend (one carried cache) run one after another. */
  #queue: Promise<unknown> = Promise.resolve();

  constructor(options: StepGeneratorOptions) {
    this.#o = options;
  }

  run(
    requests: readonly RowRequest[],
    shared: SharedGenerateOptions,
  ): Promise<PromiseSettledResult<GenerationOutput>[]> {
    if (!this.#o.backend.exclusive) return this.#generate(requests, shared);
    const run = this.#queue.then(() => this.#generate(requests, shared));
    this.#queue = run.catch(() => undefined);
    return run;
  }

  async #generate(
    requests: readonly RowRequest[],
    shared: SharedGenerateOptions,
  ): Promise<PromiseSettledResult<GenerationOutput>[]> {
    const { backend, config, maxPositions } = this.#o;
    const V = config.vocabSize;
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
    const lora = this.#o.adapter.feeds(backend.inputs);
    // The prompt columns, whole or in pieces (prefill-pieces.ts); each piece extends the cache
    // of the one before, and the last one's logits are the first sample's.
    const width = prefillWidth(B0, T, this.#o.prefill);
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
      logits = await backend.step({
        ...piece(from, Math.min(T, from + width)),
        ...pastOf(logits, config),
      });

    for (;;) {
      const next = live.map((ri, b) => {
        const r = rows[ri]!;
        if (!r.done && r.request.signal?.aborted) {
          // Its client went away: the row fails and leaves, its batch-mates go on.
          r.error = r.request.signal.reason;
          r.done = true;
        }
        return r.done ? pad : sampleRow(r, logits, b * V, V, pad, shared.decode);
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
        ...pastOf(logits, config),
      });
    }

    for (const r of rows) settled[r.index] = outcome(r, shared.decode);
    return settled;
  }
}

/**
 * Samples row r's next token from the logits at `offset` and checks its stops; returns the id to
 * feed next (`pad` when the row failed before it had one). A throw of the row's own sampling or
 * stop-string decode fails the row, not the batch.
 */
function sampleRow(
  r: Row,
  logits: Float32Array,
  offset: number,
  V: number,
  pad: number,
  decode: SharedGenerateOptions['decode'],
): number {
  let fed = pad;
  try {
    const s = sampleToken(logits, r.request, r.rng, offset, V);
    r.tokens.push(s.token);
    r.logprobs.push(s.logprob);
    fed = s.token;
    r.request.onToken?.(s.token, s.logprob);
    if (r.stopIds.has(s.token)) {
      r.done = true;
      r.finish = 'stop';
      r.stopTokenId = s.token;
    } else if (r.stopStrings.length > 0) {
      const text = decode!(r.tokens);
      const hit = firstStop(text, r.stopStrings);
      if (hit) {
        r.done = true;
        r.finish = 'stop';
        r.stopString = hit.stop;
        r.text = text.slice(0, hit.index);
      }
    }
  } catch (e) {
    r.error = e;
    r.done = true;
  }
  if (r.tokens.length >= r.request.maxNewTokens) r.done = true;
  return fed;
}

/** A finished row's result: its own error, or its output (whose decode may throw too). */
function outcome(
  r: Row,
  decode: SharedGenerateOptions['decode'],
): PromiseSettledResult<GenerationOutput> {
  if (r.error !== undefined) return { status: 'rejected', reason: r.error };
  try {
    return { status: 'fulfilled', value: generationOutput(r.prompt, r, decode) };
  } catch (reason) {
    return { status: 'rejected', reason };
  }
}
