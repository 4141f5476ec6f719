import type { DecoderConfig } from '../config.js';
import type { ModelWeights } from '../weights/model-weights.js';
import { weightAsFloat32 } from '../weights/model-weights.js';
import { EMBED_TOKENS, FINAL_NORM, LM_HEAD, layerTensorNames } from '../weights/tensor-names.js';

// A plain TypeScript forward pass of the Llama / Qwen2 / Qwen3 decoder, one token at a time with
// a KV cache, written to be read top to bottom like llama2.c's run.c. It is the independent
// reference the generated ONNX graphs are checked against, so it favours clarity over speed:
// float32 storage, double-precision accumulation, no batching.
//
// Layout and conventions are HF transformers': Linear weights [out, in]; RoPE rotates the halves
// (j, j + d/2) of each head (checkpoints in interleaved-pair layout are permuted on load);
// query head h reads key/value head floor(h / (heads / kvHeads)) (GQA, = repeat_kv).

interface LayerF32 {
  inputNorm: Float32Array;
  qProj: Float32Array;
  qBias: Float32Array | undefined;
  kProj: Float32Array;
  kBias: Float32Array | undefined;
  vProj: Float32Array;
  vBias: Float32Array | undefined;
  oProj: Float32Array;
  oBias: Float32Array | undefined;
  qNorm: Float32Array | undefined;
  kNorm: Float32Array | undefined;
  postAttentionNorm: Float32Array;
  gateProj: Float32Array;
  gateBias: Float32Array | undefined;
  upProj: Float32Array;
  upBias: Float32Array | undefined;
  downProj: Float32Array;
  downBias: Float32Array | undefined;
}

/** Keys and values of every past position, per layer: [capacity, kvHeads · headDim]. */
export interface KvCache {
  readonly capacity: number;
  readonly keys: Float32Array[];
  readonly values: Float32Array[];
}

/** out = W x (+ b), W row-major [rows, cols]. */
function matVec(
  out: Float32Array,
  w: Float32Array,
  x: Float32Array,
  rows: number,
  cols: number,
  bias?: Float32Array,
): void {
  for (let i = 0; i < rows; i++) {
    let s = 0;
    const base = i * cols;
    for (let j = 0; j < cols; j++) s += w[base + j]! * x[j]!;
    out[i] = bias === undefined ? s : s + bias[i]!;
  }
}

/** RMSNorm over `size` values from `offset`: x · rsqrt(mean(x²) + eps) · weight. */
function rmsNorm(
  out: Float32Array,
  x: Float32Array,
  weight: Float32Array,
  eps: number,
  offset = 0,
  size = weight.length,
): void {
  let ss = 0;
  for (let i = 0; i < size; i++) ss += x[offset + i]! * x[offset + i]!;
  const scale = 1 / Math.sqrt(ss / size + eps);
  for (let i = 0; i < size; i++) out[offset + i] = weight[i]! * (scale * x[offset + i]!);
}

/** HF rotate_half RoPE on each head of `v` (heads × headDim) at position `pos`. */
function applyRope(
  v: Float32Array,
  heads: number,
  headDim: number,
  pos: number,
  theta: number,
): void {
  const half = headDim / 2;
  for (let j = 0; j < half; j++) {
    const angle = pos / theta ** ((2 * j) / headDim);
    const cos = Math.cos(angle);
    const sin = Math.sin(angle);
    for (let h = 0; h < heads; h++) {
      const a = h * headDim + j;
      const b = a + half;
      const x1 = v[a]!;
      const x2 = v[b]!;
      v[a] = x1 * cos - x2 * sin;
      v[b] = x2 * cos + x1 * sin;
    }
  }
}

export class ReferenceDecoder {
  readonly config: DecoderConfig;
  private readonly embed: Float32Array;
  private readonly layers: LayerF32[];
  private readonly finalNorm: Float32Array;
  private readonly lmHead: Float32Array;

  constructor(weights: ModelWeights) {
    this.config = weights.config;
    const c = weights.config;
    const get = (name: string) => weightAsFloat32(weights, name);
    const opt = (use: boolean, name: string) => (use ? get(name) : undefined);
    this.embed = get(EMBED_TOKENS);
    this.layers = [];
    for (let l = 0; l < c.numHiddenLayers; l++) {
      const n = layerTensorNames(l);
      this.layers.push({
        inputNorm: get(n.inputNorm),
        qProj: get(n.qProj),
        qBias: opt(c.qkvBias, n.qBias),
        kProj: get(n.kProj),
        kBias: opt(c.qkvBias, n.kBias),
        vProj: get(n.vProj),
        vBias: opt(c.qkvBias, n.vBias),
        oProj: get(n.oProj),
        oBias: opt(c.oBias, n.oBias),
        qNorm: opt(c.qkNorm, n.qNorm),
        kNorm: opt(c.qkNorm, n.kNorm),
        postAttentionNorm: get(n.postAttentionNorm),
        gateProj: get(n.gateProj),
        gateBias: opt(c.mlpBias, n.gateBias),
        upProj: get(n.upProj),
        upBias: opt(c.mlpBias, n.upBias),
        downProj: get(n.downProj),
        downBias: opt(c.mlpBias, n.downBias),
      });
    }
    this.finalNorm = get(FINAL_NORM);
    this.lmHead = c.tieWordEmbeddings ? this.embed : get(LM_HEAD);
  }

  /** An empty cache for up to `capacity` positions (default: max_position_embeddings). */
  newCache(capacity = this.config.maxPositionEmbeddings): KvCache {
    const kvDim = this.config.numKeyValueHeads * this.config.headDim;
    const layers = this.config.numHiddenLayers;
    return {
      capacity,
      keys: Array.from({ length: layers }, () => new Float32Array(capacity * kvDim)),
      values: Array.from({ length: layers }, () => new Float32Array(capacity * kvDim)),
    };
  }

  /**
   * Runs `token` at position `pos`, reading positions 0..pos-1 from `cache` and writing this
   * position's keys and values into it. Returns the next-token logits [vocab].
   */
  forward(token: number, pos: number, cache: KvCache): Float32Array {
    const c = this.config;
    const dim = c.hiddenSize;
    const hd = c.headDim;
    const heads = c.numAttentionHeads;
    const kvHeads = c.numKeyValueHeads;
    const qDim = heads * hd;
    const kvDim = kvHeads * hd;
    const groupSize = heads / kvHeads;
    const ffn = c.intermediateSize;
    if (!Number.isInteger(token) || token < 0 || token >= c.vocabSize) {
      throw new RangeError(`token id ${token} outside [0, ${c.vocabSize})`);
    }
    if (pos < 0 || pos >= cache.capacity) {
      throw new RangeError(`position ${pos} outside the cache's [0, ${cache.capacity})`);
    }

    // Embedding row of the token: the residual stream.
    const x = this.embed.slice(token * dim, (token + 1) * dim);
    const xb = new Float32Array(dim);
    const q = new Float32Array(qDim);
    const k = new Float32Array(kvDim);
    const v = new Float32Array(kvDim);
    const att = new Float32Array(pos + 1);
    const attOut = new Float32Array(qDim);
    const gate = new Float32Array(ffn);
    const up = new Float32Array(ffn);
    const scale = 1 / Math.sqrt(hd);

    for (let l = 0; l < this.layers.length; l++) {
      const w = this.layers[l]!;

      // Attention block: pre-norm, projections, RoPE, cached causal attention, output projection.
      rmsNorm(xb, x, w.inputNorm, c.rmsNormEps);
      matVec(q, w.qProj, xb, qDim, dim, w.qBias);
      matVec(k, w.kProj, xb, kvDim, dim, w.kBias);
      matVec(v, w.vProj, xb, kvDim, dim, w.vBias);
      if (w.qNorm !== undefined && w.kNorm !== undefined) {
        for (let h = 0; h < heads; h++) rmsNorm(q, q, w.qNorm, c.rmsNormEps, h * hd, hd);
        for (let h = 0; h < kvHeads; h++) rmsNorm(k, k, w.kNorm, c.rmsNormEps, h * hd, hd);
      }
      applyRope(q, heads, hd, pos, c.ropeTheta);
      applyRope(k, kvHeads, hd, pos, c.ropeTheta);
      const keys = cache.keys[l]!;
      const values = cache.values[l]!;
      keys.set(k, pos * kvDim);
      values.set(v, pos * kvDim);

      for (let h = 0; h < heads; h++) {
        const qOff = h * hd;
        const kvOff = Math.floor(h / groupSize) * hd;
        // Scores against every position up to and including this one (the causal mask).
        let max = Number.NEGATIVE_INFINITY;
        for (let t = 0; t <= pos; t++) {
          let s = 0;
          const kBase = t * kvDim + kvOff;
          for (let i = 0; i < hd; i++) s += q[qOff + i]! * keys[kBase + i]!;
          att[t] = s * scale;
          if (att[t]! > max) max = att[t]!;
        }
        let sum = 0;
        for (let t = 0; t <= pos; t++) {
          att[t] = Math.exp(att[t]! - max);
          sum += att[t]!;
        }
        for (let i = 0; i < hd; i++) {
          let acc = 0;
          for (let t = 0; t <= pos; t++) acc += att[t]! * values[t * kvDim + kvOff + i]!;
          attOut[qOff + i] = acc / sum;
        }
      }
      matVec(xb, w.oProj, attOut, dim, qDim, w.oBias);
      for (let i = 0; i < dim; i++) x[i] = x[i]! + xb[i]!;

      // MLP block: pre-norm, SwiGLU (silu(gate) · up), down projection.
      rmsNorm(xb, x, w.postAttentionNorm, c.rmsNormEps);
      matVec(gate, w.gateProj, xb, ffn, dim, w.gateBias);
      matVec(up, w.upProj, xb, ffn, dim, w.upBias);
      for (let i = 0; i < ffn; i++) {
        const g = gate[i]!;
        gate[i] = (g / (1 + Math.exp(-g))) * up[i]!;
      }
      matVec(xb, w.downProj, gate, dim, ffn, w.downBias);
      for (let i = 0; i < dim; i++) x[i] = x[i]! + xb[i]!;
    }

    // Final norm and the classifier (the embedding matrix itself when tied).
    rmsNorm(x, x, this.finalNorm, c.rmsNormEps);
    const logits = new Float32Array(c.vocabSize);
    matVec(logits, this.lmHead, x, c.vocabSize, dim);
    return logits;
  }

  /** Teacher-forced logits of every position of `tokens` ([T][vocab]). */
  forwardSequence(tokens: ArrayLike<number>, cache = this.newCache(tokens.length)): Float32Array[] {
    const out: Float32Array[] = [];
    for (let pos = 0; pos < tokens.length; pos++) out.push(this.forward(tokens[pos]!, pos, cache));
    return out;
  }
}

/** Index of the largest value; the first one on ties (as run.c's argmax). */
export function argmax(values: ArrayLike<number>): number {
  let best = 0;
  for (let i = 1; i < values.length; i++) if (values[i]! > values[best]!) best = i;
  return best;
}

export interface GreedyOptions {
  /** Most tokens to generate after the prompt. */
  maxNewTokens: number;
  /** Generation stops, without appending it, when one of these is produced. */
  stopTokenIds?: readonly number[];
}

export interface GreedyResult {
  /** Prompt followed by the generated tokens (a stop token is not included). */
  ids: number[];
  /** The stop token that ended generation, or undefined when maxNewTokens was reached. */
  stopTokenId: number | undefined;
}

/**
 * Greedy decoding as run.c does it at temperature 0: feed the prompt one position at a time
 * (forcing its tokens), then append the argmax of each step's logits.
 */
export function generateGreedy(
  model: ReferenceDecoder,
  prompt: ArrayLike<number>,
  options: GreedyOptions,
): GreedyResult {
  if (prompt.length === 0) throw new RangeError('the prompt needs at least one token (e.g. BOS)');
  const ids = Array.from(prompt);
  const stop = new Set(options.stopTokenIds ?? []);
  const cache = model.newCache(prompt.length + options.maxNewTokens);
  let logits: Float32Array = new Float32Array(0);
  for (let pos = 0; pos < prompt.length; pos++) logits = model.forward(ids[pos]!, pos, cache);
  for (let n = 0; n < options.maxNewTokens; n++) {
    const next = argmax(logits);
    if (stop.has(next)) return { ids, stopTokenId: next };
    ids.push(next);
    if (n + 1 < options.maxNewTokens) logits = model.forward(next, ids.length - 1, cache);
  }
  return { ids, stopTokenId: undefined };
}

/** log softmax(logits / temperature)[token], in double precision. */
export function referenceTokenLogprob(
  logits: ArrayLike<number>,
  token: number,
  temperature = 1,
): number {
  if (!(temperature > 0)) throw new RangeError(`temperature must be > 0, got ${temperature}`);
  let max = Number.NEGATIVE_INFINITY;
  for (let i = 0; i < logits.length; i++) max = Math.max(max, logits[i]! / temperature);
  let sum = 0;
  for (let i = 0; i < logits.length; i++) sum += Math.exp(logits[i]! / temperature - max);
  return logits[token]! / temperature - max - Math.log(sum);
}

/**
 * Per-token log-probabilities of a sequence under the model (teacher forcing): entry t − 1 is
 * log p(ids[t] | ids[0..t−1]) at `temperature`, for t = 1..T−1 — what the `logprobs` graph
 * computes for the tokens of a rollout.
 */
export function referenceSequenceLogprobs(
  model: ReferenceDecoder,
  ids: ArrayLike<number>,
  options: { temperature?: number } = {},
): Float64Array {
  const out = new Float64Array(Math.max(0, ids.length - 1));
  const cache = model.newCache(ids.length);
  for (let t = 0; t + 1 < ids.length; t++) {
    out[t] = referenceTokenLogprob(
      model.forward(ids[t]!, t, cache),
      ids[t + 1]!,
      options.temperature,
    );
  }
  return out;
}
