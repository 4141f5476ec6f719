import type { Rng } from '@flowgrpo/core';
import type * as ort from 'onnxruntime-node';
import type { ValueSpec } from '../runtime/feeds.js';
import { ContextLengthExceededError, TokenOutOfVocabularyError } from './errors.js';
import type { SamplingParams } from './sampling.js';
import type { TokenListener } from './token-stream.js';

// What a caller asks a DecoderGenerator for and what it gets back, and the one interface both of
// its generators implement (fused-generator.ts: the `generate` graph, continuous batching;
// step-generator.ts: prefill then one decode run per token). Both give a request the same tokens
// for the same seed.

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

/** One request of a batch: its options and the random stream it samples from. */
export interface GenerationRequest extends SamplingParams {
  prompt: ArrayLike<number>;
  maxNewTokens: number;
  stopTokenIds?: readonly number[];
  stopStrings?: readonly string[];
  /** Same seed, prompt and options → same tokens, whatever else is in the batch. */
  seed?: number | bigint | string;
  /** Streaming: called with each token as it is sampled (token-stream.ts). */
  onToken?: TokenListener | undefined;
  /** Aborting it ends the request at its next token, rejected with the signal's reason. */
  signal?: AbortSignal | undefined;
}

/** A request with its random stream drawn: what a generator runs. */
export interface RowRequest extends Omit<GenerationRequest, 'seed'> {
  rng: Rng;
}

/** Options every request of one call shares. */
export type SharedGenerateOptions = Pick<DecoderGenerateOptions, 'decode' | 'padTokenId'>;

/** The adapter generation runs under, as a generator reads it when a call starts. */
export interface AdapterState {
  /** Changes whenever the adapter or its scale does. */
  version(): number;
  /** Feeds for the LoRA inputs of a graph that has them (zeros + scale 0 without an adapter). */
  feeds(inputs: readonly ValueSpec[]): Record<string, ort.Tensor>;
}

/** Runs one call's requests; each gets its own outcome, in request order. */
export interface BatchGenerator {
  run(
    requests: readonly RowRequest[],
    shared: SharedGenerateOptions,
  ): Promise<PromiseSettledResult<GenerationOutput>[]>;
}

/** What a row ended with, before it becomes a GenerationOutput. */
export interface RowOutcome {
  tokens: readonly number[];
  logprobs: readonly number[];
  finish: GenerationOutput['finishReason'];
  stopTokenId?: number;
  stopString?: string;
  /** The text cut before a stop string (the stop-string check decoded it already). */
  text?: string;
}

/**
 * The output of a row with prompt `prompt`. With `decode`, the text of the tokens before the stop
 * token (or the stop-string check's cut); `decode` may throw, which fails this row alone.
 */
export function generationOutput(
  prompt: readonly number[],
  r: RowOutcome,
  decode: SharedGenerateOptions['decode'],
): GenerationOutput {
  const out: GenerationOutput = {
    promptTokens: Int32Array.from(prompt),
    tokens: Int32Array.from(r.tokens),
    logprobs: Float32Array.from(r.logprobs),
    finishReason: r.finish,
  };
  if (r.stopTokenId !== undefined) out.stopTokenId = r.stopTokenId;
  if (r.stopString !== undefined) out.stopString = r.stopString;
  if (decode)
    out.text = r.text ?? decode(r.stopTokenId === undefined ? r.tokens : r.tokens.slice(0, -1));
  return out;
}

/** Checks a request like the graphs need it; returns its prompt ids and non-empty stop strings. */
export function validateRequest(
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
