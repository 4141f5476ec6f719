import {
  DEFAULT_IR_VERSION,
  DEFAULT_OPSET,
  type OnnxGraph,
  type OnnxModel,
  type OnnxTensor,
  onnxTensor,
} from '@flowgrpo/graph';
import {
  type LoraConfig,
  type LoraTargetModule,
  loraParamSpecs,
  loraScaling,
  moduleFeatures,
} from '../../lora/lora-config.js';
import { EMBED_TOKENS, FINAL_NORM, LM_HEAD, layerTensorNames } from '../weights/tensor-names.js';
import { type BaseWeights, ROPE_COS, ROPE_SIN } from './base-weights.js';
import { type GraphIOSpec, LORA_SCALE } from './decoder-graph.js';
import { MS_DOMAIN, OnnxDataType, OnnxEmitter } from './onnx-emitter.js';

// The generation graph, built for speed on ONNX Runtime's CPU EP. One run is one "chunk": it
// appends a batch's new tokens to the KV cache (phase A), samples a token, then samples up to
// `steps − 1` more inside an ONNX Loop. The decode loop runs in C++: per token there is no
// session.run, no JS, and no KV tensor crossing the Node binding (which copies every output it
// returns, even into a preallocated buffer — docs/performance.md has the measurements). Between
// chunks the generator drops finished rows and adds new ones (continuous batching).
//
// Inside the loop the cache grows by one slot per token. Two forms (GenerateGraphOptions
// .attention): 'concat' carries the whole cache through the loop and Concat appends to it (a
// memcpy of the cache per token and layer, in C++); 'split' leaves the chunk's start cache where
// phase A put it (an outer-scope value of the loop body) and carries only the chunk's own slots,
// attending to both with one softmax over the concatenated scores — no per-token copy of the
// cache, for 5 more nodes per layer. On the CPU EP the node count costs more than the copy up to
// batch 32 for stories260K, so 'concat' is the default; 'auto' holds both and picks per run.
// (GroupQueryAttention copies and zero-fills the cache per token too, and ran slower than
// either: docs/performance.md.)
//
// The forward reads like run.c, with the fused forms:
//   SimplifiedLayerNormalization / SkipSimplifiedLayerNormalization  RMSNorm (+ the residual add)
//   one Gemm for q|k|v and their rotate-half copies, one for gate|up (weights packed by nodes
//     over initializers, which ORT folds at load; 1/√d folded into q), heads ordered per kv
//     group (its g query heads, its key head, its value head) so attention needs no head
//     Split/Concat and GQA no repeat_kv
//   FusedMatMul(q, K, transB) for the scores: no transposed copy of the cache
//   RoPE as x·cos + rotate_half(x)·sin with rotate_half(x) = x·(R·W)ᵀ computed by the same Gemm
//     (R permutes and negates rows: exact), so RoPE is one Mul and one ReduceSum per layer
//   QuickGelu(alpha = 1) · up                                         SwiGLU
// Sampling is in the graph, in float64, as sampling.ts does it on the host: greedy = ArgMax
// (first on ties) with the logprob at T = 1; otherwise the inverse CDF of softmax(logits / T) at
// a uniform the host draws from the row's own RNG. The logprob is log softmax(logits / T) of the
// chosen token over the full vocabulary — the `logprobs` graph's number (tested to 1e-4). Top-k /
// top-p are not in the graph: for those the generator runs one step per chunk and samples from
// the `logits` output on the host.
//
// Inputs                                              Outputs
//   input_ids       [B, T] int32  new tokens, left-     tokens    [K', B] int32   sampled ids
//                   padded (a row's tokens at the end)  logprobs  [K', B] float32
//   position_ids    [B, T] int32  their positions       present.{l}.key/value [B, kv, S+T+K'−1, d]
//   attention_mask  [B, S+T] bool  cached + new slots   logits    [B, V] float32  of the last
//                                  that hold tokens                               sample
//   past.{l}.key/value [B, kv, S, d]
//   temperature     [B] float64  (0 = greedy)
//   uniforms        [B, K] float64  one u per step (K = steps; the loop stops early once every
//                                   row is done)
//   stop_ids        [B, N] int32  per-row stop tokens (−1 = none)
//   sampling        [] bool  some row samples (false: every row is greedy, a shorter branch)
//   split_cache     [] bool  which decode loop runs (see GenerateGraphOptions.attention)
//   (+ lora_scale and the PEFT-named adapter matrices when built with LoRA)
// The present cache holds every slot of past and new, plus the K' − 1 sampled tokens fed back in
// the loop (all real); the last sampled token is the next chunk's input.

export const GENERATE_INPUTS = {
  ids: 'input_ids',
  positions: 'position_ids',
  mask: 'attention_mask',
  temperature: 'temperature',
  uniforms: 'uniforms',
  stopIds: 'stop_ids',
  sampling: 'sampling',
  splitCache: 'split_cache',
} as const;
export const GENERATE_OUTPUTS = {
  tokens: 'tokens',
  logprobs: 'logprobs',
  logits: 'logits',
} as const;
export const genPastKey = (l: number) => `past.${l}.key`;
export const genPastValue = (l: number) => `past.${l}.value`;
export const genPresentKey = (l: number) => `present.${l}.key`;
export const genPresentValue = (l: number) => `present.${l}.value`;

export interface GenerateGraphOptions {
  lora?: LoraConfig;
  /**
   * How the loop attends to the cache. 'concat': the cache is loop-carried and grows by one slot
   * per token (Concat copies it: cheap at small batch, fewest nodes). 'split': the chunk's start
   * cache stays put and only the chunk's slots grow (no per-token copy of the cache: large
   * batches). 'auto': both loops in one graph, chosen per run by the `split_cache` input (from
   * the batch size): the two loops round differently in the last bits, so with 'auto' a row's
   * samples can depend on the size of the batch it ran in — near-ties may flip. Default
   * 'concat': measured faster on the CPU EP for stories260K up to batch 32 (docs/performance.md),
   * and the graph stays half the size.
   */
  attention?: 'concat' | 'split' | 'auto';
}

export interface GenerateGraph {
  model: OnnxModel;
  inputs: GraphIOSpec[];
  outputs: GraphIOSpec[];
}

const F = OnnxDataType.FLOAT;
const D = OnnxDataType.DOUBLE;
const I32 = OnnxDataType.INT32;
const I64 = OnnxDataType.INT64;
const BOOL = OnnxDataType.BOOL;
const DTYPE_NAME: Record<number, GraphIOSpec['dtype']> = {
  [F]: 'float32',
  [D]: 'float64',
  [I32]: 'int32',
  [I64]: 'int64',
  [BOOL]: 'bool',
};

/** Added to the scores of empty slots: exp underflows to exactly 0. */
const MASKED = -1e9;

type Group = 'qkv' | 'o' | 'gateUp' | 'down';
const GROUPS: Record<Group, LoraTargetModule[]> = {
  qkv: ['q_proj', 'k_proj', 'v_proj'],
  o: ['o_proj'],
  gateUp: ['gate_proj', 'up_proj'],
  down: ['down_proj'],
};

/** One layer's packed weights (names of folded values) and low-rank updates. */
interface LayerWeights {
  /**
   * [kv·(g + 2)·2d, H]: per kv head, its g query heads, its key head and its value head, each as
   * d rows then d rotate-half rows (zeros for the value head). g = nh / kv.
   */
  qkv: string;
  qkvBias?: string;
  o: string; // [H, nh·d]
  oBias?: string;
  gateUp: string; // [2F, H]
  gateUpBias?: string;
  down: string; // [H, F]
  downBias?: string;
  inputNorm: string;
  postNorm: string;
  qNorm?: string;
  kNorm?: string;
  /** x·Aᵀ then ·Bᵀ: A stacked over a group's modules, B block-diagonal and scaled (Gemm layout). */
  lora: Partial<Record<Group, { a: string; b: string }>>;
}

/** Builds the `generate` graph of a decoder over the shared weights.data. */
export function buildGenerateGraph(
  base: BaseWeights,
  options: GenerateGraphOptions = {},
): GenerateGraph {
  const c = base.config;
  const g = new OnnxEmitter();
  const external: OnnxTensor[] = [];
  const weight = (name: string): string => {
    const ref = base.refs.get(name);
    if (!ref) throw new RangeError(`weights.data has no tensor '${name}'`);
    if (!external.some((t) => t.name === name))
      external.push({ name, dataType: F, dims: ref.shape, external: ref.external });
    return name;
  };
  const H = c.hiddenSize;
  const nh = c.numAttentionHeads;
  const nkv = c.numKeyValueHeads;
  const grp = nh / nkv;
  const d = c.headDim;
  const half = d / 2;
  const L = c.numHiddenLayers;
  const V = c.vocabSize;

  // ---- inputs ---------------------------------------------------------------------------------
  const ids = g.input(GENERATE_INPUTS.ids, I32, ['batch', 'seq']);
  const positionIds = g.input(GENERATE_INPUTS.positions, I32, ['batch', 'seq']);
  const mask = g.input(GENERATE_INPUTS.mask, BOOL, ['batch', 'total_seq']);
  const past = Array.from({ length: L }, (_, l) => ({
    key: g.input(genPastKey(l), F, ['batch', nkv, 'past_seq', d]),
    value: g.input(genPastValue(l), F, ['batch', nkv, 'past_seq', d]),
  }));
  const temperature = g.input(GENERATE_INPUTS.temperature, D, ['batch']);
  const uniforms = g.input(GENERATE_INPUTS.uniforms, D, ['batch', 'steps']);
  const stopIds = g.input(GENERATE_INPUTS.stopIds, I32, ['batch', 'stops']);
  const lora = options.lora;
  const loraScale = lora ? g.input(LORA_SCALE, F, []) : undefined;
  const specs = lora ? loraParamSpecs(c, lora) : [];
  const loraIn = new Map(specs.map((s) => [s.name, g.input(s.name, F, s.shape)] as const));

  const axis0 = g.i64([0]);
  const axis1 = g.i64([1]);
  const axisLast = g.i64([-1]);
  const concat = (e: OnnxEmitter, xs: string[], axis: number) =>
    xs.length === 1 ? xs[0]! : e.op1('Concat', xs, { axis });

  // ---- packed weights (nodes over initializers only: ORT folds them at load) -------------------
  const qScale = 1 / Math.sqrt(d);
  // With q/k RMSNorm (Qwen3) the norm runs between projection and RoPE, so 1/√d goes into the
  // q norm's weight instead of the projection.
  const foldScale = !c.qkNorm;
  /**
   * Rows [heads·d, cols] of a projection (or of a LoRA B, or a bias with cols = 1) in the packed
   * head layout: [heads, 2, d, cols] = each head's rows then their rotate-half rows (−x₂, x₁), or
   * zeros for value heads.
   */
  const pairsOf = (w: string, heads: number, cols: number, value: boolean) => {
    const blocks = g.op1('Reshape', [w, g.i64([heads, 1, d, cols])]);
    let rot: string;
    if (value) rot = g.op1('Mul', [blocks, g.f32([0], [])]);
    else {
      const [w1, w2] = g.op('Split', [blocks, g.i64([half, half])], { axis: 2 }, { outputs: 2 });
      rot = g.op1('Concat', [g.op1('Neg', [w2!]), w1!], { axis: 2 });
    }
    return g.op1('Concat', [blocks, rot], { axis: 1 });
  };
  /** q, k, v rows → [(nh + 2kv)·2d, cols]: the q heads, the k heads, the v heads. */
  const packQkv = (q: string, k: string, v: string, cols: number) => {
    const all = g.op1(
      'Concat',
      [pairsOf(q, nh, cols, false), pairsOf(k, nkv, cols, false), pairsOf(v, nkv, cols, true)],
      { axis: 0 },
    );
    return g.op1('Reshape', [all, g.i64([-1, cols])]);
  };
  const scaled = (x: string) => (foldScale ? g.op1('Mul', [x, g.f32([qScale], [])]) : x);
  const layers: LayerWeights[] = [];
  for (let l = 0; l < L; l++) {
    const n = layerTensorNames(l);
    const lw: LayerWeights = {
      qkv: packQkv(scaled(weight(n.qProj)), weight(n.kProj), weight(n.vProj), H),
      o: weight(n.oProj),
      gateUp: g.op1('Concat', [weight(n.gateProj), weight(n.upProj)], { axis: 0 }),
      down: weight(n.downProj),
      inputNorm: weight(n.inputNorm),
      postNorm: weight(n.postAttentionNorm),
      lora: {},
    };
    if (c.qkvBias)
      lw.qkvBias = g.op1('Reshape', [
        packQkv(scaled(weight(n.qBias)), weight(n.kBias), weight(n.vBias), 1),
        g.i64([-1]),
      ]);
    if (c.oBias) lw.oBias = weight(n.oBias);
    if (c.mlpBias) {
      lw.gateUpBias = g.op1('Concat', [weight(n.gateBias), weight(n.upBias)], { axis: 0 });
      lw.downBias = weight(n.downBias);
    }
    if (c.qkNorm) {
      lw.qNorm = g.op1('Mul', [weight(n.qNorm), g.f32([qScale], [])]);
      lw.kNorm = weight(n.kNorm);
    }
    layers.push(lw);
  }

  // LoRA, computed once per run outside the loop: per packed group, A stacked ([r·m, in]) and B
  // block-diagonal over the group's output rows ([out, r·m]) times lora_scale · scaling, its
  // q/k/v rows arranged like the base rows.
  if (lora && loraScale) {
    const r = lora.r;
    const scale = g.op1('Mul', [loraScale, g.f32([loraScaling(lora)], [])]);
    for (let l = 0; l < L; l++) {
      for (const [group, modules] of Object.entries(GROUPS) as [Group, LoraTargetModule[]][]) {
        const mine = specs.filter((s) => s.layer === l && modules.includes(s.module));
        if (mine.length === 0) continue;
        const targeted = modules.filter((m) => mine.some((s) => s.module === m));
        const width = targeted.length * r;
        // B of module m, scaled, as the columns [at·r, (at+1)·r) of [out_m, width]; zeros if m
        // has no adapter.
        const bOf = (m: LoraTargetModule): string => {
          const at = targeted.indexOf(m);
          const out = moduleFeatures(c, m)[1];
          if (at < 0) return g.op1('ConstantOfShape', [g.i64([out, width])]);
          const b = mine.find((s) => s.module === m && s.which === 'B')!;
          const sb = g.op1('Mul', [loraIn.get(b.name)!, scale]);
          return g.op1('Pad', [sb, g.i64([0, at * r, 0, width - (at + 1) * r])]);
        };
        const aRows = targeted.map(
          (m) => loraIn.get(mine.find((s) => s.module === m && s.which === 'A')!.name)!,
        );
        const b =
          group === 'qkv'
            ? packQkv(scaled(bOf('q_proj')), bOf('k_proj'), bOf('v_proj'), width)
            : concat(g, modules.map(bOf), 0);
        layers[l]!.lora[group] = { a: concat(g, aRows, 0), b };
      }
    }
  }
  const finalNorm = weight(FINAL_NORM);
  const embed = weight(EMBED_TOKENS);
  const head = weight(c.tieWordEmbeddings ? EMBED_TOKENS : LM_HEAD);
  // Per position [1, 2, d] = [[cos, cos], [sin, sin]] (both halves of a head), and the value
  // heads' (1, 0): RoPE is then one Mul, one Split and one Add over every head.
  const twice = (t: string) => g.op1('Concat', [t, t], { axis: 1 });
  const csTable = g.op1('Reshape', [
    g.op1('Concat', [twice(weight(ROPE_COS)), twice(weight(ROPE_SIN))], { axis: 1 }),
    g.i64([-1, 1, 2, d]),
  ]);
  const heads = nh + 2 * nkv;
  const isValue = g.constant(
    'is_value',
    Float32Array.from({ length: heads }, (_, i) => (i >= nh + nkv ? 1 : 0)),
    [1, heads, 1, 1],
  );
  const valueCs = g.f32([...Array(d).fill(1), ...Array(d).fill(0)], [1, 1, 2, d]);
  const isValueB = g.op1('Cast', [isValue], { to: BOOL });
  /** [N, nh + 2kv, 2, d] cos/sin factors of the packed heads at positions [N]. */
  const ropeFactors = (e: OnnxEmitter, pos: string) =>
    e.op1('Where', [isValueB, valueCs, e.op1('Gather', [csTable, pos], { axis: 0 })]);

  const rmsAttrs = { axis: -1, epsilon: { float: c.rmsNormEps }, stash_type: 1 };

  /**
   * The layer stack over rows x [N, H]; `attention(l, q, k, v)` gets q [N, nh, 1, d] and k, v
   * [N, kv, 1, d] after RoPE and returns [N, nh·d]. Returns the final-normed hidden rows.
   */
  const stack = (
    e: OnnxEmitter,
    x0: string,
    cs: string,
    attention: (l: number, q: string, k: string, v: string) => string,
  ): string => {
    let x = x0;
    let pending: string | undefined;
    const norm = (w: string): string => {
      if (pending === undefined) return e.op1('SimplifiedLayerNormalization', [x, w], rmsAttrs);
      // Outputs: the normed rows and the residual sum; mean and inv_std_var left out ('').
      const out = e.name('skip_norm');
      const sum = e.name('residual');
      e.op(
        'SkipSimplifiedLayerNormalization',
        [pending, x, w],
        { epsilon: { float: c.rmsNormEps } },
        { outputs: [out, '', '', sum], domain: MS_DOMAIN },
      );
      x = sum;
      pending = undefined;
      return out;
    };
    const linear = (h: string, w: string, bias?: string, ad?: { a: string; b: string }) => {
      const y = e.op1('Gemm', [h, w, bias], { transB: 1 });
      if (!ad) return y;
      return e.op1('Gemm', [e.op1('Gemm', [h, ad.a], { transB: 1 }), ad.b, y], { transB: 1 });
    };
    for (let l = 0; l < L; l++) {
      const lw = layers[l]!;
      const h = norm(lw.inputNorm);
      const qkv = linear(h, lw.qkv, lw.qkvBias, lw.lora.qkv);
      let pairs = e.op1('Reshape', [qkv, e.i64([0, heads, 2, d])]);
      if (lw.qNorm && lw.kNorm) {
        // Per-head RMSNorm of q and k and of their rotate-half copies (same RMS, the weight's
        // halves swapped); the value head passes through.
        const swap = (w: string) => {
          const [w1, w2] = e.op('Split', [w, e.i64([half, half])], { axis: 0 }, { outputs: 2 });
          return e.op1('Concat', [w2!, w1!], { axis: 0 });
        };
        const both = (t: string, w: string) => {
          const [a, b] = e.op('Split', [t, e.i64([1, 1])], { axis: 2 }, { outputs: 2 });
          return e.op1(
            'Concat',
            [
              e.op1('SimplifiedLayerNormalization', [a!, w], rmsAttrs),
              e.op1('SimplifiedLayerNormalization', [b!, swap(w)], rmsAttrs),
            ],
            { axis: 2 },
          );
        };
        const [qp, kp, vp] = e.op(
          'Split',
          [pairs, e.i64([nh, nkv, nkv])],
          { axis: 1 },
          { outputs: 3 },
        );
        pairs = e.op1('Concat', [both(qp!, lw.qNorm), both(kp!, lw.kNorm), vp!], { axis: 1 });
      }
      // RoPE: x·cos + rotate_half(x)·sin. (A Split and an Add, not ReduceSum over the pair
      // axis: that reduction takes ORT's slow generic path, 13× slower at batch 32.)
      const [xc, rs] = e.op(
        'Split',
        [e.op1('Mul', [pairs, cs]), e.i64([1, 1])],
        { axis: 2 },
        {
          outputs: 2,
        },
      );
      const rot = e.op1('Add', [xc!, rs!]); // [N, nh + 2kv, 1, d]
      const [q, k, v] = e.op('Split', [rot, e.i64([nh, nkv, nkv])], { axis: 1 }, { outputs: 3 });
      pending = linear(attention(l, q!, k!, v!), lw.o, lw.oBias, lw.lora.o);
      const h2 = norm(lw.postNorm);
      const gu = linear(h2, lw.gateUp, lw.gateUpBias, lw.lora.gateUp);
      const F2 = c.intermediateSize;
      const [gate, up] = e.op('Split', [gu, e.i64([F2, F2])], { axis: 1 }, { outputs: 2 });
      const act = e.op1('Mul', [
        e.op1('QuickGelu', [gate!], { alpha: { float: 1 } }, MS_DOMAIN),
        up!,
      ]);
      pending = linear(act, lw.down, lw.downBias, lw.lora.down);
    }
    return norm(finalNorm);
  };

  // ---- sampling -------------------------------------------------------------------------------
  // Greedy-only runs (the host knows) take the short branch: the most likely token and a float32
  // log-softmax.
  const anySampled = g.input(GENERATE_INPUTS.sampling, BOOL, []);
  /**
   * token [B] int32 and logprob [B] float32 from logits [B, V] and this step's uniforms u [B].
   */
  const sample = (e: OnnxEmitter, logits: string, u: string) => {
    // The most likely token, [B, 1] int64: TopK with k = 1 (the first on ties, as ArgMax; twice
    // as fast as ArgMax at batch 32).
    const best = (b: OnnxEmitter) =>
      b.op('TopK', [logits, b.i64([1])], { axis: 1 }, { outputs: 2 })[1]!;
    const at = (b: OnnxEmitter, logp: string, idx: string) =>
      b.op1('Squeeze', [b.op1('GatherElements', [logp, idx], { axis: 1 }), axisLast]);
    const greedy = e.body(`${e.name('greedy')}/`);
    {
      const idx = best(greedy);
      const lp = at(greedy, greedy.op1('LogSoftmax', [logits], { axis: 1 }), idx);
      greedy.output(
        greedy.op1('Cast', [greedy.op1('Squeeze', [idx, axisLast])], { to: I32 }),
        I32,
        ['batch'],
      );
      greedy.output(lp, F, ['batch']);
      greedy.output(idx, I64, ['batch', 1]);
    }
    const sampled = e.body(`${e.name('sampled')}/`);
    {
      const b = sampled;
      const isGreedy = b.op1('Equal', [temperature, b.f64([0], [])]);
      const t = b.op1('Where', [isGreedy, b.f64([1], []), temperature]);
      const x = b.op1('Div', [
        b.op1('Cast', [logits], { to: D }),
        b.op1('Unsqueeze', [t, axisLast]),
      ]);
      const logp = b.op1('LogSoftmax', [x], { axis: 1 }); // float64 [B, V]
      const cdf = b.op1('CumSum', [b.op1('Exp', [logp]), b.i32([1], [])]);
      const below = b.op1('LessOrEqual', [cdf, b.op1('Unsqueeze', [u, axisLast])]);
      const drawn = b.op1('Min', [
        b.op1('ReduceSum', [b.op1('Cast', [below], { to: I64 }), axis1], { keepdims: 1 }),
        b.i64([V - 1], []),
      ]); // [B, 1]
      const idx = b.op1('Where', [b.op1('Unsqueeze', [isGreedy, axisLast]), best(b), drawn]);
      const lp = b.op1('Cast', [at(b, logp, idx)], { to: F });
      b.output(b.op1('Cast', [b.op1('Squeeze', [idx, axisLast])], { to: I32 }), I32, ['batch']);
      b.output(lp, F, ['batch']);
      b.output(idx, I64, ['batch', 1]);
    }
    const [token, logprob, index] = e.op(
      'If',
      [anySampled],
      {
        then_branch: { graph: sampled.graph('sample') },
        else_branch: { graph: greedy.graph('argmax') },
      },
      { outputs: 3 },
    );
    return { token: token!, logprob: logprob!, index: index! };
  };
  /** Rows that drew a stop token (int32 0/1), or-ed with `before`; and "some row is not done". */
  // Per row, 1 at its stop tokens: [B, V + 1] int32, built once per run (the −1 padding of
  // stop_ids lands in the extra column V, which no token reads).
  const stopIdx = g.op1(
    'Cast',
    [g.op1('Where', [g.op1('Less', [stopIds, g.i32([0], [])]), g.i32([V], []), stopIds])],
    { to: I64 },
  );
  const stopTable = g.op1(
    'ScatterElements',
    [
      g.op1(
        'ConstantOfShape',
        [
          g.op1(
            'Concat',
            [g.op1('Gather', [g.op1('Shape', [stopIds]), g.i64([0])], { axis: 0 }), g.i64([V + 1])],
            {
              axis: 0,
            },
          ),
        ],
        { value: { tensor: onnxTensor('', Int32Array.of(0), [1]) } },
      ),
      stopIdx,
      g.op1('Expand', [g.i32([1], []), g.op1('Shape', [stopIdx])]),
    ],
    { axis: 1 },
  );
  /** Rows that drew a stop token ([B, 1] int32), or-ed with `before`; and "some row is not done". */
  const stopCheck = (e: OnnxEmitter, index: string, before?: string) => {
    const hit = e.op1('GatherElements', [stopTable, index], { axis: 1 });
    const done = before ? e.op1('Max', [hit, before]) : hit;
    const more = e.op1('Equal', [e.op1('ReduceMin', [done], { keepdims: 0 }), g.i32([0], [])]);
    return { done, more };
  };
  const logitsOf = (e: OnnxEmitter, rows: string) => e.op1('Gemm', [rows, head], { transB: 1 });

  // ---- phase A: the new tokens, causal among themselves, after the cached slots ----------------
  const idsShape = g.op1('Shape', [ids]);
  const Bsz = g.op1('Gather', [idsShape, g.i64([0])], { axis: 0 }); // [1]
  const Tsz = g.op1('Gather', [idsShape, g.i64([1])], { axis: 0 }); // [1]
  const Psz = g.op1('Gather', [g.op1('Shape', [past[0]!.key]), g.i64([2])], { axis: 0 }); // [1]
  const rowBias = g.op1('Unsqueeze', [
    g.op1('Where', [mask, g.f32([0], []), g.f32([MASKED], [])]),
    g.i64([1, 2]),
  ]); // [B, 1, 1, S+T]
  // Causal part [T, S+T]: query t sees every cached slot and new slots t' ≤ t.
  const onesTT = g.op1('Expand', [g.f32([1], []), g.op1('Concat', [Tsz, Tsz], { axis: 0 })]);
  const causalNew = g.op1('Where', [
    g.op1('Cast', [g.op1('Trilu', [onesTT], { upper: 0 })], { to: BOOL }),
    g.f32([0], []),
    g.f32([MASKED], []),
  ]);
  const causal = g.op1('Pad', [
    causalNew,
    g.op1('Concat', [g.i64([0]), Psz, g.i64([0, 0])], { axis: 0 }),
  ]);
  const biasA = g.op1('Add', [rowBias, causal]); // [B, 1, T, S+T]

  const flatIds = g.op1('Reshape', [ids, g.i64([-1])]);
  const flatPos = g.op1('Reshape', [positionIds, g.i64([-1])]);
  const BT = (tail: number[]) => g.op1('Concat', [Bsz, Tsz, g.i64(tail)], { axis: 0 });
  const presentA: { key: string; value: string }[] = [];
  const hiddenA = stack(
    g,
    g.op1('Gather', [embed, flatIds], { axis: 0 }),
    ropeFactors(g, flatPos),
    (l, q, k, v) => {
      // [B·T, heads, 1, d] → [B, heads, T, d]; the new keys/values are appended to the cache
      // (the present outputs), queries attend with the row + causal bias.
      const bhtd = (t: string, n: number) =>
        g.op1('Transpose', [g.op1('Reshape', [t, BT([n, d])])], { perm: [0, 2, 1, 3] });
      const [o, K, Vv] = g.op(
        'Attention',
        [bhtd(q, nh), bhtd(k, nkv), bhtd(v, nkv), biasA, past[l]!.key, past[l]!.value],
        { q_num_heads: nh, kv_num_heads: nkv, scale: { float: 1 } },
        { outputs: 3 },
      );
      presentA.push({ key: K!, value: Vv! });
      return g.op1('Reshape', [
        g.op1('Transpose', [o!], { perm: [0, 2, 1, 3] }),
        g.i64([-1, nh * d]),
      ]);
    },
  );
  // Rows are left-padded: every row's last token is at t = T − 1.
  const lastT = g.op1('Sub', [Tsz, g.i64([1])]);
  const lastA = g.op1('Squeeze', [
    g.op1('Gather', [g.op1('Reshape', [hiddenA, BT([H])]), lastT], { axis: 1 }),
    axis1,
  ]);
  const logitsA = logitsOf(g, lastA);
  const uT = g.op1('Transpose', [uniforms], { perm: [1, 0] }); // [K, B]
  const s0 = sample(g, logitsA, g.op1('Gather', [uT, g.i64([0], [])], { axis: 0 }));
  const stop0 = stopCheck(g, s0.index);
  const nextPos = g.op1('Add', [
    g.op1('Squeeze', [g.op1('Gather', [positionIds, lastT], { axis: 1 }), axis1]),
    g.i32([1], []),
  ]);

  // ---- the decode loop ------------------------------------------------------------------------
  const startLen = g.op1('Add', [Psz, Tsz]);
  const empty = g.op1('Expand', [
    g.f32([0], []),
    g.op1('Concat', [Bsz, g.i64([nkv, 0, d])], { axis: 0 }),
  ]);
  const trips = g.op1('Sub', [
    g.op1('Gather', [g.op1('Shape', [uniforms]), g.i64([1], [])], { axis: 0 }),
    g.i64([1], []),
  ]);

  /** Emits the loop into `e` (the main graph or an If branch); returns the run's results. */
  const decodeLoop = (e: OnnxEmitter, split: boolean) => {
    const body = e.body(split ? 'split/' : 'concat/');
    const iter = body.input(body.name('iter'), I64, []);
    body.input(body.name('cond'), BOOL, []);
    const tokIn = body.input(body.name('token'), I32, ['batch']);
    const doneIn = body.input(body.name('done'), I32, ['batch', 1]);
    const posIn = body.input(body.name('pos'), I32, ['batch']);
    body.input(body.name('logits'), F, ['batch', V]);
    const slots = split ? 'chunk' : 'total';
    const kvIn = Array.from({ length: L }, () => ({
      key: body.input(body.name('k'), F, ['batch', nkv, slots, d]),
      value: body.input(body.name('v'), F, ['batch', nkv, slots, d]),
    }));
    // 'concat': the row bias grows with the cache (one 0 column per token).
    const biasIn = split ? undefined : body.input(body.name('bias'), F, ['batch', 1, grp, slots]);
    const biasOut = biasIn
      ? body.op1('Pad', [biasIn, body.i64([0, 0, 0, 0, 0, 0, 0, 1])])
      : undefined;
    const kvOut: { key: string; value: string }[] = [];
    const xs = body.op1('Gather', [embed, tokIn], { axis: 0 });
    const hidden = stack(body, xs, ropeFactors(body, posIn), (l, q, k, v) => {
      // q [B, nh, 1, d], k, v [B, kv, 1, d]: the batch's one new token per row.
      let o: string;
      if (!split) {
        // ai.onnx Attention: appends k, v to the carried cache and attends. GQA as attention
        // over the kv heads: the g query heads sharing a kv head are its g query "positions"
        // (no causal mask, so each sees the whole cache). ORT then runs one scores GEMM per row
        // and kv head instead of one per query head: with two threads, B=32 1.34× faster
        // (docs/performance.md).
        const qg = body.op1('Reshape', [q, body.i64([0, nkv, grp, d])]); // [B, kv, g, d]
        const [y, K, Vv] = body.op(
          'Attention',
          [qg, k, v, biasOut!, kvIn[l]!.key, kvIn[l]!.value],
          { q_num_heads: nkv, kv_num_heads: nkv, scale: { float: 1 } },
          { outputs: 3 },
        );
        kvOut.push({ key: K!, value: Vv! });
        o = y!;
      } else {
        const K = body.op1('Concat', [kvIn[l]!.key, k], { axis: 2 });
        const Vv = body.op1('Concat', [kvIn[l]!.value, v], { axis: 2 });
        kvOut.push({ key: K, value: Vv });
        const qg = body.op1('Reshape', [q, body.i64([0, nkv, grp, d])]); // GQA: [B, kv, g, d]
        // One softmax over [start cache | chunk], two weighted sums.
        const sStart = body.op1('Add', [
          body.op1('FusedMatMul', [qg, presentA[l]!.key], { transB: 1 }, MS_DOMAIN),
          rowBias,
        ]);
        const sChunk = body.op1('FusedMatMul', [qg, K], { transB: 1 }, MS_DOMAIN);
        const p = body.op1('Softmax', [body.op1('Concat', [sStart, sChunk], { axis: 3 })], {
          axis: -1,
        });
        const pStart = body.op1('Slice', [p, g.i64([0]), startLen, g.i64([3])]);
        const pChunk = body.op1('Slice', [p, startLen, g.i64([2 ** 62]), g.i64([3])]);
        o = body.op1('Add', [
          body.op1('MatMul', [pStart, presentA[l]!.value]),
          body.op1('MatMul', [pChunk, Vv]),
        ]);
      }
      return body.op1('Reshape', [o, body.i64([0, nh * d])]);
    });
    const logits = logitsOf(body, hidden);
    const u = body.op1('Gather', [uT, body.op1('Add', [iter, body.i64([1], [])])], { axis: 0 });
    const s = sample(body, logits, u);
    const stop = stopCheck(body, s.index, doneIn);
    body.output(stop.more, BOOL, []);
    body.output(s.token, I32, ['batch']);
    body.output(stop.done, I32, ['batch', 1]);
    body.output(body.op1('Add', [posIn, g.i32([1], [])]), I32, ['batch']);
    body.output(logits, F, ['batch', V]);
    for (const kv of kvOut) {
      body.output(kv.key, F, ['batch', nkv, `${slots}_out`, d]);
      body.output(kv.value, F, ['batch', nkv, `${slots}_out`, d]);
    }
    if (biasOut) body.output(biasOut, F, ['batch', 1, grp, `${slots}_out`]);
    body.output(body.op1('Identity', [s.token]), I32, ['batch']);
    body.output(s.logprob, F, ['batch']);

    const carried = presentA.flatMap((p) => (split ? [empty, empty] : [p.key, p.value]));
    const outs = e.op(
      'Loop',
      [
        trips,
        stop0.more,
        s0.token,
        stop0.done,
        nextPos,
        logitsA,
        ...carried,
        // GQA as attention over the kv heads: a row's g query heads of one kv head are the g
        // "query positions" of that head, so the row bias repeats over them.
        ...(split ? [] : [e.op1('Expand', [rowBias, e.i64([1, 1, grp, 1])])]),
      ],
      { body: { graph: body.graph(split ? 'generate_step_split' : 'generate_step') } },
      { outputs: 4 + 2 * L + (split ? 0 : 1) + 2 },
    );
    const scanAt = 4 + 2 * L + (split ? 0 : 1);
    const present = presentA.map((p, l) => {
      const key = outs[4 + 2 * l]!;
      const value = outs[5 + 2 * l]!;
      return split
        ? {
            key: e.op1('Concat', [p.key, key], { axis: 2 }),
            value: e.op1('Concat', [p.value, value], { axis: 2 }),
          }
        : { key, value };
    });
    return {
      tokens: e.op1('Concat', [e.op1('Unsqueeze', [s0.token, axis0]), outs[scanAt]!], { axis: 0 }),
      logprobs: e.op1('Concat', [e.op1('Unsqueeze', [s0.logprob, axis0]), outs[scanAt + 1]!], {
        axis: 0,
      }),
      present,
      logits: outs[3]!,
    };
  };

  let result: ReturnType<typeof decodeLoop>;
  const mode = options.attention ?? 'concat';
  if (mode !== 'auto') result = decodeLoop(g, mode === 'split');
  else {
    // Chosen per run by the host (`split_cache`): the cache is copied per token only when that
    // is cheaper than the split attention's extra nodes (small batches).
    const splitCache = g.input(GENERATE_INPUTS.splitCache, BOOL, []);
    const branch = (split: boolean) => {
      const e = g.body(split ? 'if_split/' : 'if_concat/');
      const r = decodeLoop(e, split);
      e.output(r.tokens, I32, ['steps_run', 'batch']);
      e.output(r.logprobs, F, ['steps_run', 'batch']);
      for (const p of r.present) {
        e.output(p.key, F, ['batch', nkv, 'present_seq', d]);
        e.output(p.value, F, ['batch', nkv, 'present_seq', d]);
      }
      e.output(r.logits, F, ['batch', V]);
      return e.graph(split ? 'split_cache' : 'concat_cache');
    };
    const outs = g.op(
      'If',
      [splitCache],
      { then_branch: { graph: branch(true) }, else_branch: { graph: branch(false) } },
      { outputs: 3 + 2 * L },
    );
    result = {
      tokens: outs[0]!,
      logprobs: outs[1]!,
      present: presentA.map((_, l) => ({ key: outs[2 + 2 * l]!, value: outs[3 + 2 * l]! })),
      logits: outs[2 + 2 * L]!,
    };
  }

  // ---- outputs (logits last: fetched only when the host samples) -------------------------------
  g.output(result.tokens, I32, ['steps_run', 'batch'], GENERATE_OUTPUTS.tokens);
  g.output(result.logprobs, F, ['steps_run', 'batch'], GENERATE_OUTPUTS.logprobs);
  result.present.forEach((p, l) => {
    g.output(p.key, F, ['batch', nkv, 'present_seq', d], genPresentKey(l));
    g.output(p.value, F, ['batch', nkv, 'present_seq', d], genPresentValue(l));
  });
  g.output(result.logits, F, ['batch', V], GENERATE_OUTPUTS.logits);

  const graph: OnnxGraph = {
    ...g.graph('generate'),
    initializers: [...external, ...g.initializers],
  };
  const model: OnnxModel = {
    irVersion: DEFAULT_IR_VERSION,
    opsetImports: [
      // ai.onnx Attention is opset 23 (onnxruntime-node 1.30 loads up to 26).
      { domain: '', version: Math.max(DEFAULT_OPSET, 23) },
      { domain: MS_DOMAIN, version: 1 },
    ],
    producerName: 'flowgrpo',
    producerVersion: '0.1.0',
    graph,
    docString: `flowgrpo generate graph of a ${c.modelType} decoder`,
  };
  const spec = (v: {
    name: string;
    elemType: number;
    shape?: (number | string)[];
  }): GraphIOSpec => ({
    name: v.name,
    dtype: DTYPE_NAME[v.elemType]!,
    shape: v.shape ?? [],
  });
  return { model, inputs: graph.inputs.map(spec), outputs: graph.outputs.map(spec) };
}
