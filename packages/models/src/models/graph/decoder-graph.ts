import { type ElemType, type Graph, GraphBuilder, type Shape, type Value } from '@flowgrpo/graph';
import {
  type LoraConfig,
  type LoraTargetModule,
  loraParamSpecs,
  loraScaling,
} from '../../lora/lora-config.js';
import { EMBED_TOKENS, FINAL_NORM, LM_HEAD, layerTensorNames } from '../weights/tensor-names.js';
import { type BaseWeights, ROPE_COS, ROPE_SIN } from './base-weights.js';
import { castAfter, frozenLinear } from './half-weights.js';
import { chunkedTargetLogprobs, vocabChunks } from './vocab-chunks.js';
import {
  causalPaddingBias,
  maskAsFloat,
  mergeHeads,
  pickLogprobs,
  runtimeShape,
  segmentsAsFloat,
  selectRows,
} from './webgpu-safe.js';

// The decoder forward as ONNX graphs, meant to be read top to bottom like llama2.c's run.c:
// embedding, then per layer RMSNorm → q/k/v → RoPE → (KV cache) → causal attention with GQA →
// o_proj → residual → RMSNorm → SwiGLU MLP → residual, then the final norm and the LM head.
// Three variants share it:
//
//   prefill   input_ids, attention_mask, position_ids → logits of the last position, present KV
//   decode    the same plus past KV per layer (attention_mask covers past + new positions)
//   logprobs  log p(target | prefix) at requested positions only: hidden states are gathered
//             first, then the LM head — never a full [B, T, V] logits tensor, and over a large
//             vocabulary not even [B·K, V]: the head runs in vocabulary chunks (vocab-chunks.ts)
//
// Losses and gradients live with the trainer (src/graphs/train-step-graph.ts), which builds on
// `decoderForward` and `targetLogprobs` below.
//
// Conventions: the residual stream is 2-D [B·T, hidden] so every linear layer is one Gemm with
// transB against the HF-layout weight [out, in]; base weights are external initializers in the
// shared weights.data; LoRA matrices and `lora_scale` are graph inputs. GQA: query heads
// h = kv·g + j share kv head kv; rather than copying K/V g times (repeat_kv), the queries of a
// group are stacked ([B, kvHeads, g·T, d]) so one MatMul per kv head serves the whole group.
// Left padding: attention_mask (1 = token, 0 = pad) masks keys; position ids are inputs (the
// caller counts real tokens only). Packed rows (train_step only): segment_ids names the example
// each token belongs to, and attention is causal within an example only (block-diagonal), with
// position ids restarting at 0 per example — padding-free packing, as flash-attention's varlen
// kernels compute it. The WebGPU-safe idioms are in webgpu-safe.ts.

export type DecoderGraphKind = 'prefill' | 'decode' | 'logprobs' | 'train_step';

export interface DecoderGraphOptions {
  kind: 'prefill' | 'decode' | 'logprobs';
  /** LoRA adapters as inputs (with `lora_scale`). */
  lora?: LoraConfig;
  /** prefill/decode: logits of the last position only (default) or of every position. */
  logits?: 'last' | 'all';
  /** logprobs: the most vocabulary columns one LM-head chunk holds (vocabChunks). */
  vocabChunkSize?: number | undefined;
  /**
   * prefill/decode: half-precision projections cast to float32 at each product, as logprobs does
   * (half-weights.ts), instead of once at load: held once, in half — with the session's
   * prepacking off, the sampling session keeps no copy of its own — at the cost of a cast per
   * product per token (share_sampling_weights).
   */
  castPerUse?: boolean;
}

/** One graph input or output as artifacts.json records it. */
export interface GraphIOSpec {
  name: string;
  dtype: ElemType;
  shape: Shape;
}

export interface DecoderGraph {
  kind: DecoderGraphKind;
  graph: Graph;
  inputs: GraphIOSpec[];
  outputs: GraphIOSpec[];
}

export const INPUT_IDS = 'input_ids';
export const ATTENTION_MASK = 'attention_mask';
export const POSITION_IDS = 'position_ids';
/** train_step: [B, T] int64, the packed example of each token (0 … T−1; one example: all 0). */
export const SEGMENT_IDS = 'segment_ids';
export const LORA_SCALE = 'lora_scale';
export const TARGET_POSITIONS = 'target_positions';
export const TARGET_IDS = 'target_ids';
export const TEMPERATURE = 'temperature';
export const pastKeyName = (layer: number) => `past_key_values.${layer}.key`;
export const pastValueName = (layer: number) => `past_key_values.${layer}.value`;
export const presentKeyName = (layer: number) => `present.${layer}.key`;
export const presentValueName = (layer: number) => `present.${layer}.value`;

/** The token inputs of every variant. */
export interface DecoderInputs {
  inputIds: Value; // [B, T] int64
  attentionMask: Value; // [B, S] int64 0/1 (S = past + T)
  positionIds: Value; // [B, T] int64
  segmentIds?: Value; // train_step: [B, T] int64, the packed example of each token
  past?: { key: Value; value: Value }[]; // decode: [B, kvHeads, past, d] per layer
}

/** LoRA adapter matrices as graph inputs, and the factor lora_scale · alpha / r. */
export interface LoraInputs {
  params: Map<string, Value>;
  scale: Value;
  of(layer: number, module: LoraTargetModule): { a: Value; b: Value } | undefined;
}

const loadedWeights = new WeakMap<GraphBuilder, Map<string, Value>>();
const weightsAsInputs = new WeakSet<GraphBuilder>();

/**
 * Makes the model's weights graph inputs (float32, HF names) instead of initializers in
 * weights.data: the graph of full fine-tuning, where every weight is a trained parameter. The
 * RoPE tables stay initializers. Call before building the forward.
 */
export function useWeightInputs(b: GraphBuilder): void {
  weightsAsInputs.add(b);
}

/** A base tensor: an external initializer of weights.data (or an input), added to the graph once. */
export function baseWeight(b: GraphBuilder, base: BaseWeights, name: string): Value {
  let loaded = loadedWeights.get(b);
  if (!loaded) {
    loaded = new Map();
    loadedWeights.set(b, loaded);
  }
  let v = loaded.get(name);
  if (!v) {
    const stored = storedWeight(b, base, name);
    // A half-precision projection read whole: ORT folds the Cast at load (a float32 copy, as
    // before). The graphs that read it per use call storedWeight and cast it there.
    v = stored.dtype === 'float32' ? stored : b.cast(stored, 'float32');
    loaded.set(name, v);
  }
  return v;
}

const storedWeights = new WeakMap<GraphBuilder, Map<string, Value>>();

/** A base tensor in its stored dtype (half-weights.ts for the half-precision projections). */
export function storedWeight(b: GraphBuilder, base: BaseWeights, name: string): Value {
  let stored = storedWeights.get(b);
  if (!stored) {
    stored = new Map();
    storedWeights.set(b, stored);
  }
  let v = stored.get(name);
  if (!v) {
    const ref = base.refs.get(name);
    if (!ref) throw new RangeError(`weights.data has no tensor '${name}'`);
    if (weightsAsInputs.has(b) && ref.half)
      throw new RangeError(
        `'${name}' is stored in ${ref.half}: full fine-tuning trains every weight in float32`,
      );
    v =
      weightsAsInputs.has(b) && name !== ROPE_COS && name !== ROPE_SIN
        ? b.input(name, 'float32', ref.shape)
        : b.externalInitializer(name, ref.half ?? 'float32', ref.shape, ref.external);
    stored.set(name, v);
  }
  return v;
}

/** Adds `lora_scale` and one input per adapter matrix (PEFT names) to the graph. */
export function addLoraInputs(b: GraphBuilder, base: BaseWeights, lora: LoraConfig): LoraInputs {
  const specs = loraParamSpecs(base.config, lora);
  const scale = b.mul(b.input(LORA_SCALE, 'float32', []), loraScaling(lora));
  const params = new Map(specs.map((s) => [s.name, b.input(s.name, 'float32', s.shape)] as const));
  return {
    params,
    scale,
    of(layer, module) {
      const pick = (which: 'A' | 'B') =>
        specs.find((s) => s.layer === layer && s.module === module && s.which === which);
      const a = pick('A');
      const bb = pick('B');
      return a && bb ? { a: params.get(a.name)!, b: params.get(bb.name)! } : undefined;
    },
  };
}

export interface DecoderForward {
  /** Final hidden states before the last norm, [B·T, hidden]. */
  hidden: Value;
  /** Token embeddings [B, T, hidden]: their run-time shape stands in for the int64 input's. */
  embeddings: Value;
  /** K/V per layer after this step, [B, kvHeads, S, d]. */
  present: { key: Value; value: Value }[];
}

export interface DecoderForwardOptions {
  /**
   * Activation recomputation per layer (HF's `gradient_checkpointing`): the backward keeps only
   * each layer's input and runs the layer's forward again, just before its gradient, instead of
   * keeping every layer's activations from the forward to the backward. Only graphs that are
   * differentiated (train_step) are changed by it; the gradients are the same values.
   */
  recompute?: boolean;
  /**
   * Half-precision projection matrices are cast to float32 at each product (half-weights.ts),
   * so that they are held once, in half: the graphs that multiply many rows (logprobs,
   * train_step), and prefill/decode when asked (DecoderGraphOptions.castPerUse). Otherwise ORT
   * casts them once at load.
   */
  castPerUse?: boolean;
}

/**
 * The weights one layer reads: a base tensor by name, the LoRA adapter of a module. The layer's
 * recomputation (DecoderForwardOptions.recompute) hands it copies of the trained ones.
 */
interface LayerWeights {
  weight(name: string): Value;
  adapter(module: LoraTargetModule): { a: Value; b: Value } | undefined;
}

/** The transformer body: embeddings → layers → hidden states (final norm not applied). */
export function decoderForward(
  b: GraphBuilder,
  base: BaseWeights,
  inputs: DecoderInputs,
  lora?: LoraInputs,
  options: DecoderForwardOptions = {},
): DecoderForward {
  const c = base.config;
  const H = c.hiddenSize;
  const hd = c.headDim;
  const nh = c.numAttentionHeads;
  const nkv = c.numKeyValueHeads;
  const group = nh / nkv;

  const w = (name: string) => baseWeight(b, base, name);

  /**
   * RMSNorm over the last axis: x / √(mean(x²) + eps) · weight. The weight is looked up last, so
   * that the graph is built value for value (names included) as before layers were recomputable.
   */
  const rmsNorm = (x: Value, weight: () => Value): Value => {
    const ms = b.reduceMean(b.mul(x, x), [-1], true);
    return b.mul(b.div(x, b.sqrt(b.add(ms, c.rmsNormEps))), weight());
  };

  // Token embeddings, [B, T, hidden].
  const emb = b.gather(w(EMBED_TOKENS), inputs.inputIds, 0);

  // RoPE rows for these positions, [B, T, 1, d/2] (broadcast over heads); rotate-half layout.
  const cos = b.unsqueeze(b.gather(w(ROPE_COS), inputs.positionIds, 0), [2]);
  const sin = b.unsqueeze(b.gather(w(ROPE_SIN), inputs.positionIds, 0), [2]);
  const rope = (x: Value): Value => {
    const [x1, x2] = b.split(x, 2, 3) as [Value, Value];
    return b.concat(
      [b.sub(b.mul(x1, cos), b.mul(x2, sin)), b.add(b.mul(x2, cos), b.mul(x1, sin))],
      3,
    );
  };
  const segments = inputs.segmentIds && segmentsAsFloat(b, inputs.segmentIds, emb);
  const attnBias = causalPaddingBias(b, maskAsFloat(b, inputs.attentionMask), emb, group, segments);
  const heads = (x: Value, n: number) => b.reshape(x, runtimeShape(b, emb, [n, hd])); // [B, T, n, d]

  /**
   * x·Wᵀ (+ bias) for a half-precision W cast where it is used. A recomputed layer's gradient
   * already reads the recomputation's own cast; otherwise frozenLinear casts again for it.
   */
  const halfLinear = (x: Value, w: Value, bias: Value | undefined, name: string) => {
    const y = options.recompute
      ? b.gemm(x, castAfter(b, w, x), undefined, { transB: true })
      : frozenLinear(b, x, w, name);
    return bias ? b.add(y, bias) : y;
  };

  /** Layer l on the residual stream x [B·T, hidden] → its output and K/V [B, nkv, S, d]. */
  const layer = (l: number, x: Value, p: LayerWeights) => {
    const n = layerTensorNames(l);
    /** y = x·Wᵀ (+ bias) (+ lora_scale · scaling · (x·Aᵀ)·Bᵀ), x 2-D [rows, in]. */
    const linear = (x: Value, weight: string, bias: string | undefined, m: LoraTargetModule) => {
      const half = options.castPerUse && base.refs.get(weight)?.half;
      // The weight before the bias, as before layers were recomputable: the same graph inputs
      // in the same order (full fine-tuning's parameters) and the same value names.
      const y = half
        ? halfLinear(
            x,
            storedWeight(b, base, weight),
            bias === undefined ? undefined : p.weight(bias),
            `${weight}.frozen`,
          )
        : b.gemm(x, p.weight(weight), bias === undefined ? undefined : p.weight(bias), {
            transB: true,
          });
      const adapter = p.adapter(m);
      if (!adapter || !lora) return y;
      const down = b.gemm(x, adapter.a, undefined, { transB: true });
      const up = b.gemm(down, adapter.b, undefined, { transB: true });
      return b.add(y, b.mul(up, lora.scale));
    };

    // Attention: q, k, v projections, RoPE, the KV cache.
    const h = rmsNorm(x, () => p.weight(n.inputNorm));
    let q = heads(linear(h, n.qProj, c.qkvBias ? n.qBias : undefined, 'q_proj'), nh);
    let k = heads(linear(h, n.kProj, c.qkvBias ? n.kBias : undefined, 'k_proj'), nkv);
    const v0 = heads(linear(h, n.vProj, c.qkvBias ? n.vBias : undefined, 'v_proj'), nkv);
    if (c.qkNorm) {
      q = rmsNorm(q, () => p.weight(n.qNorm));
      k = rmsNorm(k, () => p.weight(n.kNorm));
    }
    q = b.transpose(rope(q), [0, 2, 1, 3]); // [B, nh, T, d]
    k = b.transpose(rope(k), [0, 2, 1, 3]); // [B, nkv, T, d]
    let v = b.transpose(v0, [0, 2, 1, 3]);
    const past = inputs.past?.[l];
    if (past) {
      k = b.concat([past.key, k], 2);
      v = b.concat([past.value, v], 2);
    }

    // Scores of each kv head's query group [B, nkv, g·T, S] + bias, softmax, weighted values.
    const qg = b.reshape(b.mul(q, 1 / Math.sqrt(hd)), [0, nkv, -1, hd]);
    const scores = b.matmul(qg, b.transpose(k, [0, 1, 3, 2]));
    const probs = b.softmax(b.add(scores, attnBias), -1);
    const att = b.matmul(probs, v); // [B, nkv, g·T, d]
    const merged = mergeHeads(b, b.reshape(att, [0, nh, -1, 0]), nh, hd); // [B·T, nh·d]
    const x1 = b.add(x, linear(merged, n.oProj, c.oBias ? n.oBias : undefined, 'o_proj'));

    // MLP: SwiGLU, down(silu(gate(h)) · up(h)).
    const h2 = rmsNorm(x1, () => p.weight(n.postAttentionNorm));
    const gate = linear(h2, n.gateProj, c.mlpBias ? n.gateBias : undefined, 'gate_proj');
    const up = linear(h2, n.upProj, c.mlpBias ? n.upBias : undefined, 'up_proj');
    const act = b.mul(b.mul(gate, b.sigmoid(gate)), up);
    const down = linear(act, n.downProj, c.mlpBias ? n.downBias : undefined, 'down_proj');
    return { y: b.add(x1, down), key: k, value: v };
  };

  // The residual stream, [B·T, hidden].
  let x = b.reshape(emb, [-1, H]);
  const present: { key: Value; value: Value }[] = [];

  for (let l = 0; l < c.numHiddenLayers; l++) {
    // The trained tensors the layer reads (LoRA matrices; every weight under full fine-tuning):
    // graph inputs, the inputs of its recomputation's gradient.
    const trained = new Set<Value>();
    const seen = (v: Value) => {
      if (options.recompute && b.graph.inputs.includes(v)) trained.add(v);
      return v;
    };
    const weights: LayerWeights = {
      weight: (name) => seen(w(name)),
      adapter: (m) => {
        const a = lora?.of(l, m);
        return a && { a: seen(a.a), b: seen(a.b) };
      },
    };
    const input = x;
    const out = b.withScope(`layer${l}`, () => layer(l, input, weights));
    present.push({ key: out.key, value: out.value });
    x = out.y;
    if (options.recompute) {
      const params = [...trained];
      b.customVjp({
        name: `layer${l}.recompute`,
        inputs: [input, ...params],
        outputs: [out.y],
        vjp: ({ b, gy, needs }) => {
          const g = gy[0]!;
          // Zeros shaped like the incoming gradient added to the layer's input: no value changes
          // (−0 becomes +0, which no op here tells apart), and the data dependence makes ORT run the recomputation after the layers above have
          // been differentiated, not in the forward (where it would keep the activations alive).
          const xAgain = b.add(input, b.zerosLike(g));
          // Copies of the trained tensors: the inner gradient reaches only the recomputed nodes.
          const copies = new Map(params.map((v) => [v, b.identity(v)] as const));
          const again = layer(l, xAgain, {
            weight: (name) => {
              const v = w(name);
              return copies.get(v) ?? v;
            },
            adapter: (m) => {
              const a = lora?.of(l, m);
              return a && { a: copies.get(a.a) ?? a.a, b: copies.get(a.b) ?? a.b };
            },
          });
          const wrt = [xAgain, ...copies.values()];
          const wanted = wrt.filter((_, i) => needs[i]);
          const grads = b.grad(again.y, wanted, { seed: g, asOutputs: false });
          let k = 0;
          return wrt.map((_, i) => (needs[i] ? grads[k++] : undefined));
        },
      });
    }
  }
  return { hidden: x, embeddings: emb, present };
}

/** The final RMSNorm of the hidden states [rows, hidden]. */
export function finalNorm(b: GraphBuilder, base: BaseWeights, hidden: Value): Value {
  const ms = b.reduceMean(b.mul(hidden, hidden), [-1], true);
  return b.mul(
    b.div(hidden, b.sqrt(b.add(ms, base.config.rmsNormEps))),
    baseWeight(b, base, FINAL_NORM),
  );
}

/** The LM head's weight [V, hidden]: the embedding when tied, else lm_head.weight. */
export function headWeight(b: GraphBuilder, base: BaseWeights): Value {
  return baseWeight(b, base, base.config.tieWordEmbeddings ? EMBED_TOKENS : LM_HEAD);
}

/** Final RMSNorm then the LM head (tied to the embeddings or not): [rows, hidden] → [rows, V]. */
export function lmHead(b: GraphBuilder, base: BaseWeights, hidden: Value): Value {
  return b.gemm(finalNorm(b, base, hidden), headWeight(b, base), undefined, { transB: true });
}

/** The `logprobs` variant's extra inputs: which positions predict which ids, at what temperature. */
export interface TargetInputs {
  positions: Value; // [B, K] int64: the position whose output predicts the target
  ids: Value; // [B, K] int64
  temperature: Value; // [] float
}

export function addTargetInputs(b: GraphBuilder): TargetInputs {
  return {
    positions: b.input(TARGET_POSITIONS, 'int64', ['batch', 'targets']),
    ids: b.input(TARGET_IDS, 'int64', ['batch', 'targets']),
    temperature: b.input(TEMPERATURE, 'float32', []),
  };
}

export interface TargetLogprobsOptions {
  /** Also the entropy of softmax(logits / T) of each target row (a statistic: no gradient). */
  entropy?: boolean;
  /** The most vocabulary columns one LM-head chunk holds (default DEFAULT_VOCAB_CHUNK_SIZE). */
  vocabChunkSize?: number | undefined;
}

/**
 * log softmax(logits / T)[target] at the requested positions → [B, K], and with `entropy` a
 * function giving each row's entropy, [B, K] (the one-chunk head builds it where it is called,
 * so a train step that asks after its loss is built node for node as before chunking). Hidden
 * states are selected first, so the LM head runs on B·K rows only. A vocabulary wider than one
 * chunk (vocabChunks) never forms the [B·K, V] logits: the head runs chunk by chunk, forward and
 * backward (vocab-chunks.ts). One chunk is the plain graph: logits, a one-hot pick and
 * ReduceLogSumExp, differentiated by autodiff.
 */
export function targetLogprobs(
  b: GraphBuilder,
  base: BaseWeights,
  forward: DecoderForward,
  targets: TargetInputs,
  options: TargetLogprobsOptions = {},
): { logprobs: Value; entropy?: () => Value } {
  const x3 = b.reshape(forward.hidden, b.shape(forward.embeddings)); // [B, T, hidden]
  const picked = selectRows(b, x3, targets.positions); // [B, K, hidden]
  const rows = b.reshape(picked, [-1, base.config.hiddenSize]); // [B·K, hidden]
  const chunks = vocabChunks(base.config.vocabSize, options.vocabChunkSize);
  if (chunks.count > 1) {
    const head = chunkedTargetLogprobs(
      b,
      {
        normed: finalNorm(b, base, rows),
        head: headWeight(b, base),
        ids: targets.ids,
        temperature: targets.temperature,
      },
      chunks,
      { entropy: options.entropy ?? false },
    );
    const { entropy } = head;
    return { logprobs: head.logprobs, ...(entropy && { entropy: () => entropy }) };
  }
  const z = b.div(lmHead(b, base, rows), targets.temperature); // [B·K, V]
  const { logp, lse } = pickLogprobs(b, z, targets.ids);
  if (!options.entropy) return { logprobs: logp };
  // Entropy of softmax(z) per target row: lse − Σ p·z.
  const entropy = () => {
    const p = b.exp(b.sub(z, lse));
    return b.reshape(b.sub(lse, b.reduceSum(b.mul(p, z), [1], true)), b.shape(logp));
  };
  return { logprobs: logp, entropy };
}

/** Adds the token inputs (and past KV for decode) every variant takes. */
export function addDecoderInputs(
  b: GraphBuilder,
  base: BaseWeights,
  kind: DecoderGraphKind,
): DecoderInputs {
  const c = base.config;
  const inputs: DecoderInputs = {
    inputIds: b.input(INPUT_IDS, 'int64', ['batch', 'seq']),
    attentionMask: b.input(ATTENTION_MASK, 'int64', [
      'batch',
      kind === 'decode' ? 'total_seq' : 'seq',
    ]),
    positionIds: b.input(POSITION_IDS, 'int64', ['batch', 'seq']),
  };
  // Only the train step takes packed rows (the one graph serves packed and unpacked batches).
  if (kind === 'train_step') inputs.segmentIds = b.input(SEGMENT_IDS, 'int64', ['batch', 'seq']);
  if (kind === 'decode') {
    const shape = ['batch', c.numKeyValueHeads, 'past_seq', c.headDim];
    inputs.past = Array.from({ length: c.numHiddenLayers }, (_, l) => ({
      key: b.input(pastKeyName(l), 'float32', shape),
      value: b.input(pastValueName(l), 'float32', shape),
    }));
  }
  return inputs;
}

/** The graph's inputs and outputs as artifacts.json records them. */
export function decoderGraphOf(kind: DecoderGraphKind, b: GraphBuilder): DecoderGraph {
  const spec = (v: Value): GraphIOSpec => ({ name: v.name, dtype: v.dtype, shape: v.shape ?? [] });
  return {
    kind,
    graph: b.graph,
    inputs: b.graph.inputs.map(spec),
    outputs: b.graph.outputs.map(spec),
  };
}

/** Builds prefill, decode or logprobs (train_step: see buildTrainStepGraph). */
export function buildDecoderGraph(base: BaseWeights, options: DecoderGraphOptions): DecoderGraph {
  const { kind } = options;
  const b = new GraphBuilder(kind);
  const inputs = addDecoderInputs(b, base, kind);
  const targets = kind === 'logprobs' ? addTargetInputs(b) : undefined;
  const lora = options.lora ? addLoraInputs(b, base, options.lora) : undefined;
  const forward = decoderForward(b, base, inputs, lora, {
    castPerUse: kind === 'logprobs' || options.castPerUse === true,
  });

  if (targets) {
    const { vocabChunkSize } = options;
    b.output(targetLogprobs(b, base, forward, targets, { vocabChunkSize }).logprobs, 'logprobs');
  } else {
    const H = base.config.hiddenSize;
    let logits: Value;
    if ((options.logits ?? 'last') === 'last') {
      // With left padding the last position of every row is a real token.
      const x3 = b.reshape(forward.hidden, b.shape(forward.embeddings));
      const last = b.reshape(b.slice(x3, [-1], [2 ** 62], [1]), [-1, H]);
      logits = lmHead(b, base, last);
    } else {
      const all = lmHead(b, base, forward.hidden);
      logits = b.reshape(all, runtimeShape(b, forward.embeddings, [base.config.vocabSize]));
    }
    b.output(logits, 'logits');
    forward.present.forEach((p, l) => {
      b.output(p.key, presentKeyName(l));
      b.output(p.value, presentValueName(l));
    });
  }
  return decoderGraphOf(kind, b);
}
