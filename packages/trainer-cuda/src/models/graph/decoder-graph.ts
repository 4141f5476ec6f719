import type { ElemType, Graph, Shape, Value } from '@flowgrpo/graph';
import { GraphBuilder, tensor } from '@flowgrpo/graph';
import {
  type LoraConfig,
  type LoraTargetModule,
  loraParamSpecs,
  loraScaling,
} from '../../lora/lora-config.js';
import { EMBED_TOKENS, FINAL_NORM, LM_HEAD, layerTensorNames } from '../weights/tensor-names.js';
import { type BaseWeights, ROPE_COS, ROPE_SIN } from './base-weights.js';

// The decoder forward as ONNX graphs, built with the IR and meant to be read top to bottom like
// llama2.c's run.c: embedding, then per layer RMSNorm → q/k/v → RoPE → (KV cache) → causal
// attention with GQA → o_proj → residual → RMSNorm → SwiGLU MLP → residual, then the final norm
// and the LM head. One function builds all four variants:
//
//   prefill     input_ids, attention_mask, position_ids → logits of the last position, present KV
//   decode      the same plus past KV per layer (attention_mask covers past + new positions)
//   logprobs    log p(target | prefix) at requested positions only (hidden states are gathered
//               first, then the LM head; never a full [B, T, V] logits tensor)
//   train_step  logprobs with LoRA + a test loss (SFT: −mean logprob over loss_mask) and the
//               gradients of that loss w.r.t. every LoRA matrix (appended by autodiff)
//
// Conventions: activations of the residual stream are 2-D [B·T, hidden] so every linear layer is
// one Gemm with transB against the HF-layout weight [out, in]; base weights are external
// initializers in the shared weights.data; LoRA matrices and `lora_scale` are graph inputs.
// GQA: query heads h = kv·g + j share kv head kv; rather than copying K/V g times (repeat_kv),
// the queries of a group are stacked ([B, kvHeads, g·T, d]) so one MatMul per kv head serves the
// whole group — the same products, no copy. Left padding: attention_mask (1 = token, 0 = pad)
// masks keys; position ids are inputs (the caller counts real tokens only).

export type DecoderGraphKind = 'prefill' | 'decode' | 'logprobs' | 'train_step';

export interface DecoderGraphOptions {
  kind: DecoderGraphKind;
  /** LoRA adapters as inputs (with `lora_scale`); required for train_step. */
  lora?: LoraConfig;
  /** prefill/decode: logits of the last position only (default) or of every position. */
  logits?: 'last' | 'all';
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
export const LORA_SCALE = 'lora_scale';
export const TARGET_POSITIONS = 'target_positions';
export const TARGET_IDS = 'target_ids';
export const TEMPERATURE = 'temperature';
export const LOSS_MASK = 'loss_mask';
export const pastKeyName = (layer: number) => `past_key_values.${layer}.key`;
export const pastValueName = (layer: number) => `past_key_values.${layer}.value`;
export const presentKeyName = (layer: number) => `present.${layer}.key`;
export const presentValueName = (layer: number) => `present.${layer}.value`;

/** Added to the scores of masked keys: exp underflows to 0, and a fully masked row stays finite. */
const MASKED = -1e9;

export function buildDecoderGraph(base: BaseWeights, options: DecoderGraphOptions): DecoderGraph {
  const c = base.config;
  const { kind } = options;
  if (kind === 'train_step' && !options.lora)
    throw new RangeError('train_step needs a LoRA config');
  const b = new GraphBuilder(kind);
  const H = c.hiddenSize;
  const hd = c.headDim;
  const nh = c.numAttentionHeads;
  const nkv = c.numKeyValueHeads;
  const group = nh / nkv;

  const weight = new Map<string, Value>();
  const w = (name: string): Value => {
    let v = weight.get(name);
    if (!v) {
      const ref = base.refs.get(name);
      if (!ref) throw new RangeError(`weights.data has no tensor '${name}'`);
      v = b.externalInitializer(name, 'float32', ref.shape, ref.external);
      weight.set(name, v);
    }
    return v;
  };

  // ---- inputs ------------------------------------------------------------------------------
  const inputIds = b.input(INPUT_IDS, 'int64', ['batch', 'seq']);
  const attentionMask = b.input(ATTENTION_MASK, 'int64', [
    'batch',
    kind === 'decode' ? 'total_seq' : 'seq',
  ]);
  const positionIds = b.input(POSITION_IDS, 'int64', ['batch', 'seq']);
  const past: { key: Value; value: Value }[] = [];
  if (kind === 'decode') {
    for (let l = 0; l < c.numHiddenLayers; l++) {
      past.push({
        key: b.input(pastKeyName(l), 'float32', ['batch', nkv, 'past_seq', hd]),
        value: b.input(pastValueName(l), 'float32', ['batch', nkv, 'past_seq', hd]),
      });
    }
  }
  const scored = kind === 'logprobs' || kind === 'train_step';
  const targetPositions = scored
    ? b.input(TARGET_POSITIONS, 'int64', ['batch', 'targets'])
    : undefined;
  const targetIds = scored ? b.input(TARGET_IDS, 'int64', ['batch', 'targets']) : undefined;
  const temperature = scored ? b.input(TEMPERATURE, 'float32', []) : undefined;
  const lossMask =
    kind === 'train_step' ? b.input(LOSS_MASK, 'float32', ['batch', 'targets']) : undefined;

  const loraSpecs = options.lora ? loraParamSpecs(c, options.lora) : [];
  const loraInputs = new Map<string, Value>();
  let loraMul: Value | undefined;
  if (options.lora) {
    const scale = b.input(LORA_SCALE, 'float32', []);
    loraMul = b.mul(scale, loraScaling(options.lora));
    for (const s of loraSpecs) loraInputs.set(s.name, b.input(s.name, 'float32', s.shape));
  }
  const loraOf = (layer: number, module: LoraTargetModule) => {
    const a = loraSpecs.find((s) => s.layer === layer && s.module === module && s.which === 'A');
    const bb = loraSpecs.find((s) => s.layer === layer && s.module === module && s.which === 'B');
    return a && bb ? { a: loraInputs.get(a.name)!, b: loraInputs.get(bb.name)! } : undefined;
  };

  // ---- helpers -----------------------------------------------------------------------------
  /** y = x·Wᵀ (+ bias) (+ lora_scale · scaling · (x·Aᵀ)·Bᵀ), x 2-D. */
  const linear = (
    x: Value,
    name: string,
    bias: string | undefined,
    adapter?: { a: Value; b: Value },
  ): Value => {
    let y = b.gemm(x, w(name), bias === undefined ? undefined : w(bias), { transB: true });
    if (adapter && loraMul) {
      const down = b.gemm(x, adapter.a, undefined, { transB: true });
      const up = b.gemm(down, adapter.b, undefined, { transB: true });
      y = b.add(y, b.mul(up, loraMul));
    }
    return y;
  };
  /** RMSNorm over the last axis: x / √(mean(x²) + eps) · weight. */
  const rmsNorm = (x: Value, name: string): Value => {
    const ms = b.reduceMean(b.mul(x, x), [-1], true);
    return b.mul(b.div(x, b.sqrt(b.add(ms, c.rmsNormEps))), w(name));
  };

  // WebGPU has no int64 kernels besides Gather/GatherElements indices (not even Shape of an int64
  // tensor), so nothing below does arithmetic on int64 values or shapes: run-time sizes come from
  // Shape of float tensors, positions and masks are compared as floats (exact below 2^24), and the
  // int64 inputs are only ever Gather indices (docs/decoder.md, "WebGPU strict mode").
  const ones = (shape: Value | readonly number[]) => b.expand(b.scalar(1, 'float32'), shape);

  // Token embeddings [B, T, hidden]; their Shape stands in for the int64 input's.
  const emb = b.gather(w(EMBED_TOKENS), inputIds, 0);
  /** The run-time shape [B, T, ...tail]: Shape of an EMPTY [B, T, ...tail, 0] tensor (no Concat). */
  const btShape = (tail: readonly number[]): Value => {
    const col = b.slice(emb, [0], [1], [2]); // [B, T, 1]
    const unit = b.reshape(col, [0, 0, ...tail.map(() => 1), 1]);
    return b.shape(b.expand(unit, [1, 1, ...tail, 0]), 0, 2 + tail.length);
  };

  // RoPE rows for these positions, [B, T, 1, d/2] (broadcast over heads).
  const cos = b.unsqueeze(b.gather(w(ROPE_COS), positionIds, 0), [2]);
  const sin = b.unsqueeze(b.gather(w(ROPE_SIN), positionIds, 0), [2]);
  const rope = (x: Value): Value => {
    const [x1, x2] = b.split(x, 2, 3) as [Value, Value];
    return b.concat(
      [b.sub(b.mul(x1, cos), b.mul(x2, sin)), b.add(b.mul(x2, cos), b.mul(x1, sin))],
      3,
    );
  };

  // Attention bias [B, 1, g·T, S] in the stacked-query layout (row j·T + i is query i of group
  // member j): query i (absolute position S − T + i) sees key j when j ≤ S − T + i, i.e. when
  // S − 1 − j ≥ T − 1 − i, and key j is not padding. Both sides count from the end (reverse
  // exclusive CumSum of ones), so neither S − T nor any int64 Range is needed. The mask is read
  // through Gather([0, 1], mask): 0/1 are its only valid values.
  const maskF = b.gather(b.constant(tensor('float32', [2], [0, 1])), attentionMask, 0); // [B, S]
  const fromEnd = (v: Value) =>
    b.cumsum(ones(b.shape(v, 1, 2)), 0, { exclusive: true, reverse: true });
  const keyFromEnd = fromEnd(maskF); // [S]: S − 1 − j
  const queryFromEnd = fromEnd(emb); // [T]: T − 1 − i
  const stacked = group > 1 ? b.concat(Array(group).fill(queryFromEnd), 0) : queryFromEnd;
  const causal = b.greaterOrEqual(b.unsqueeze(keyFromEnd, [0]), b.unsqueeze(stacked, [1]));
  const notPad = b.greater(b.unsqueeze(maskF, [1, 2]), 0);
  const attnBias = b.where(b.and(causal, notPad), 0, MASKED);

  const heads4 = (x: Value, n: number) => b.reshape(x, btShape([n, hd]));

  // ---- the forward ---------------------------------------------------------------------------
  // Token embeddings: the residual stream, [B·T, hidden].
  let x = b.reshape(emb, [-1, H]);
  const present: { key: Value; value: Value }[] = [];

  for (let l = 0; l < c.numHiddenLayers; l++) {
    const n = layerTensorNames(l);
    x = b.withScope(`layer${l}`, () => {
      // Attention block.
      const h = rmsNorm(x, n.inputNorm);
      let q = heads4(linear(h, n.qProj, c.qkvBias ? n.qBias : undefined, loraOf(l, 'q_proj')), nh);
      let k = heads4(linear(h, n.kProj, c.qkvBias ? n.kBias : undefined, loraOf(l, 'k_proj')), nkv);
      const v0 = heads4(
        linear(h, n.vProj, c.qkvBias ? n.vBias : undefined, loraOf(l, 'v_proj')),
        nkv,
      );
      if (c.qkNorm) {
        q = rmsNorm(q, n.qNorm);
        k = rmsNorm(k, n.kNorm);
      }
      q = b.transpose(rope(q), [0, 2, 1, 3]); // [B, nh, T, d]
      k = b.transpose(rope(k), [0, 2, 1, 3]); // [B, nkv, T, d]
      let v = b.transpose(v0, [0, 2, 1, 3]);
      if (kind === 'decode') {
        k = b.concat([past[l]!.key, k], 2);
        v = b.concat([past[l]!.value, v], 2);
      }
      if (kind === 'prefill' || kind === 'decode') present.push({ key: k, value: v }); // [B, nkv, S, d]

      // Scores of each kv head's query group, [B, nkv, g·T, S], + the stacked bias [B, 1, g·T, S].
      const qg = b.reshape(b.mul(q, 1 / Math.sqrt(hd)), [0, nkv, -1, hd]);
      const scores = b.matmul(qg, b.transpose(k, [0, 1, 3, 2]));
      const probs = b.softmax(b.add(scores, attnBias), -1);
      const att = b.matmul(probs, v); // [B, nkv, g·T, d]
      // Heads side by side, [B·T, nh·d] (column h·d + e): Split over heads + Concat on the last
      // axis rather than Transpose + Reshape. The same copy, but with a Transpose there, ORT
      // rewrites the backward's Shape(Transpose(·)) into an int64 Gather that WebGPU lacks.
      const perHead = b.reshape(att, [0, nh, -1, 0]); // [B, nh, T, d]
      const sideBySide = nh > 1 ? b.concat(b.split(perHead, nh, 1), 3) : perHead; // [B, 1, T, nh·d]
      const merged = b.reshape(sideBySide, [-1, nh * hd]);
      const attnOut = linear(merged, n.oProj, c.oBias ? n.oBias : undefined, loraOf(l, 'o_proj'));
      const x1 = b.add(x, attnOut);

      // MLP block: SwiGLU.
      const h2 = rmsNorm(x1, n.postAttentionNorm);
      const gate = linear(
        h2,
        n.gateProj,
        c.mlpBias ? n.gateBias : undefined,
        loraOf(l, 'gate_proj'),
      );
      const up = linear(h2, n.upProj, c.mlpBias ? n.upBias : undefined, loraOf(l, 'up_proj'));
      const act = b.mul(b.mul(gate, b.sigmoid(gate)), up);
      const mlpOut = linear(
        act,
        n.downProj,
        c.mlpBias ? n.downBias : undefined,
        loraOf(l, 'down_proj'),
      );
      return b.add(x1, mlpOut);
    });
  }

  // ---- heads ---------------------------------------------------------------------------------
  const lmHead = w(c.tieWordEmbeddings ? EMBED_TOKENS : LM_HEAD);
  if (kind === 'prefill' || kind === 'decode') {
    let logits: Value;
    if ((options.logits ?? 'last') === 'last') {
      // With left padding the last position of every row is a real token.
      const x3 = b.reshape(x, b.shape(emb));
      const last = b.reshape(b.slice(x3, [-1], [2 ** 62], [1]), [-1, H]);
      logits = b.gemm(rmsNorm(last, FINAL_NORM), lmHead, undefined, { transB: true });
    } else {
      const all = b.gemm(rmsNorm(x, FINAL_NORM), lmHead, undefined, { transB: true });
      logits = b.reshape(all, btShape([c.vocabSize]));
    }
    b.output(logits, 'logits');
    present.forEach((p, l) => {
      b.output(p.key, presentKeyName(l));
      b.output(p.value, presentValueName(l));
    });
  } else {
    // Pick the hidden states of the requested positions first, then the LM head on those rows
    // only; log-softmax as z − ReduceLogSumExp(z). Both picks are one-hot products (a 1 and exact
    // zeros, so the picked values are bit-identical to a Gather) built from float compares: the
    // Gather/GatherElements they replace would need int64 Reshape/Unsqueeze/Add (and their
    // backward int64 Reshape/Expand), which WebGPU runs only on the CPU.
    const posT = b.cumsum(ones(b.shape(emb, 1, 2)), 0, { exclusive: true }); // [T]: 0 … T−1
    const posK = b.gather(posT, targetPositions!, 0); // [B, K], float
    const select = b.cast(b.equal(b.unsqueeze(posK, [2]), posT), 'float32'); // [B, K, T]
    const picked3 = b.matmul(select, b.reshape(x, b.shape(emb))); // [B, K, hidden]
    const hidden = rmsNorm(b.reshape(picked3, [-1, H]), FINAL_NORM); // [B·K, hidden]
    const z = b.div(b.gemm(hidden, lmHead, undefined, { transB: true }), temperature!);
    // The vocabulary index of every logit, built from z's run-time shape: a [V] arange from
    // static dims would be folded into a constant stored next to the weights.
    const vocabIdx = b.cumsum(ones(b.shape(z)), 1, { exclusive: true }); // [B·K, V]: 0 … V−1
    const vocab = b.reshape(b.slice(vocabIdx, [0], [1], [0]), [-1]);
    const idsF = b.gather(vocab, targetIds!, 0); // [B, K], float
    const oneHot = b.cast(b.equal(vocabIdx, b.reshape(idsF, [-1, 1])), 'float32'); // [B·K, V]
    const picked = b.reduceSum(b.mul(z, oneHot), [1], true);
    const logp = b.sub(picked, b.reduceLogSumExp(z, [1], true)); // [B·K, 1]
    const logprobs = b.reshape(logp, b.shape(idsF));
    b.output(logprobs, 'logprobs');
    if (kind === 'train_step') {
      // Test loss (SFT): −Σ mask·logp / max(Σ mask, 1). The GRPO loss replaces it later.
      const count = b.max(b.reduceSum(lossMask!), 1);
      const loss = b.neg(b.div(b.reduceSum(b.mul(logprobs, lossMask!)), count));
      b.output(loss, 'loss');
      b.grad(
        loss,
        loraSpecs.map((s) => loraInputs.get(s.name)!),
      );
    }
  }

  const spec = (v: Value): GraphIOSpec => ({ name: v.name, dtype: v.dtype, shape: v.shape ?? [] });
  return {
    kind,
    graph: b.graph,
    inputs: b.graph.inputs.map(spec),
    outputs: b.graph.outputs.map(spec),
  };
}
