import {
  DEFAULT_IR_VERSION,
  DEFAULT_OPSET,
  type OnnxGraph,
  type OnnxModel,
  type OnnxValueInfo,
} from '@flowgrpo/graph';
import { type LoraConfig, loraParamSpecs } from '../../lora/lora-config.js';
import type { DecoderConfig } from '../config.js';
import type { BaseWeights } from './base-weights.js';
import { type GraphIOSpec, LORA_SCALE } from './decoder-graph.js';
import {
  BOOL,
  D,
  F,
  type GenerateContext,
  generateContext,
  I32,
  I64,
  MASKED,
} from './generate-context.js';
import { layerStack } from './generate-layer.js';
import { type ChunkResult, decodeLoop, type LoopStart } from './generate-loop.js';
import { type SamplingInputs, sampleTokens, stopCheck, stopTable } from './generate-sampling.js';
import { type GenerateWeights, type LoraGraphInputs, packWeights } from './generate-weights.js';
import { MS_DOMAIN, OnnxEmitter } from './onnx-emitter.js';

// The generation graph, built for speed on ONNX Runtime's CPU EP. One run is one "chunk": it
// appends a batch's new tokens to the KV cache (the prompt chunk), samples a token, then samples
// up to `steps − 1` more inside an ONNX Loop (generate-loop.ts). The decode loop runs in C++: per
// token there is no session.run, no JS, and no KV tensor crossing the Node binding (which copies
// every output it returns, even into a preallocated buffer — docs/performance.md). Between chunks
// the generator drops finished rows and adds new ones (continuous batching).
//
// It reads top to bottom in buildGenerateGraph: the inputs; the weights, packed for the fused
// forward (generate-weights.ts); the prompt chunk through every layer (generate-layer.ts: run.c's
// forward with ORT's fused ops) and its first sample (generate-sampling.ts: in float64, as
// sampling.ts on the host, the logprob being the `logprobs` graph's number, tested to 1e-4); the
// decode loop; the outputs. The layers here do not reuse decoderForward (decoder-graph.ts): that
// one is differentiable standard ops for the train and logprob graphs, this one packs q|k|v with
// their rotate-half rows into one Gemm and runs com.microsoft fused kernels — the same math in
// other ops. Top-k / top-p are not in the graph: for those the generator runs one step per chunk
// and samples from the `logits` output on the host.
//
// Inside the loop the cache grows by one slot per token. Two forms (GenerateGraphOptions
// .attention): 'concat' carries the whole cache through the loop and Concat appends to it (a
// memcpy of the cache per token and layer, in C++); 'split' leaves the chunk's start cache where
// the prompt chunk put it (an outer-scope value of the loop body) and carries only the chunk's own
// slots — no per-token copy of the cache, for 5 more nodes per layer. On the CPU EP the node count
// costs more than the copy at small batches, so 'concat' is the default; 'auto' holds both and
// picks per run. (GroupQueryAttention copies and zero-fills the cache per token too, and ran
// slower than either: docs/performance.md.)
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
   * 'concat': measured faster on the CPU EP for a small model at the batch sizes of a rollout
   * phase (docs/performance.md, "The KV cache"), and the graph stays half the size.
   */
  attention?: 'concat' | 'split' | 'auto';
}

export interface GenerateGraph {
  model: OnnxModel;
  inputs: GraphIOSpec[];
  outputs: GraphIOSpec[];
}

/** The graph's inputs, in the order the graph declares them. */
interface GenerateInputs {
  ids: string;
  positionIds: string;
  mask: string;
  past: { key: string; value: string }[];
  uniforms: string;
  stopIds: string;
  sampling: SamplingInputs;
  lora: LoraGraphInputs | undefined;
  /** With attention 'auto': which loop runs. */
  splitCache: string | undefined;
}

/** Builds the `generate` graph of a decoder over the shared weights.data. */
export function buildGenerateGraph(
  base: BaseWeights,
  options: GenerateGraphOptions = {},
): GenerateGraph {
  const g = new OnnxEmitter();
  const mode = options.attention ?? 'concat';
  const inputs = generateInputs(g, base.config, options.lora, mode === 'auto');
  const ctx = generateContext(g, base.config);
  const w = packWeights(ctx, base, inputs.lora);
  const table = stopTable(ctx, inputs.stopIds);
  const start = promptChunk(ctx, w, inputs, table);
  const result =
    inputs.splitCache === undefined
      ? decodeLoop(g, ctx, w, start, mode === 'split')
      : eitherLoop(ctx, w, start, inputs.splitCache);

  // Outputs (logits last: fetched only when the host samples).
  const { nkv, d, V } = ctx;
  g.output(result.tokens, I32, ['steps_run', 'batch'], GENERATE_OUTPUTS.tokens);
  g.output(result.logprobs, F, ['steps_run', 'batch'], GENERATE_OUTPUTS.logprobs);
  result.present.forEach((p, l) => {
    g.output(p.key, F, ['batch', nkv, 'present_seq', d], genPresentKey(l));
    g.output(p.value, F, ['batch', nkv, 'present_seq', d], genPresentValue(l));
  });
  g.output(result.logits, F, ['batch', V], GENERATE_OUTPUTS.logits);
  return generateModel(g, w, base.config);
}

function generateInputs(
  g: OnnxEmitter,
  c: DecoderConfig,
  lora: LoraConfig | undefined,
  auto: boolean,
): GenerateInputs {
  const nkv = c.numKeyValueHeads;
  const d = c.headDim;
  const ids = g.input(GENERATE_INPUTS.ids, I32, ['batch', 'seq']);
  const positionIds = g.input(GENERATE_INPUTS.positions, I32, ['batch', 'seq']);
  const mask = g.input(GENERATE_INPUTS.mask, BOOL, ['batch', 'total_seq']);
  const past = Array.from({ length: c.numHiddenLayers }, (_, l) => ({
    key: g.input(genPastKey(l), F, ['batch', nkv, 'past_seq', d]),
    value: g.input(genPastValue(l), F, ['batch', nkv, 'past_seq', d]),
  }));
  const temperature = g.input(GENERATE_INPUTS.temperature, D, ['batch']);
  const uniforms = g.input(GENERATE_INPUTS.uniforms, D, ['batch', 'steps']);
  const stopIds = g.input(GENERATE_INPUTS.stopIds, I32, ['batch', 'stops']);
  let loraInputs: LoraGraphInputs | undefined;
  if (lora) {
    const scale = g.input(LORA_SCALE, F, []);
    const specs = loraParamSpecs(c, lora);
    const values = new Map(specs.map((s) => [s.name, g.input(s.name, F, s.shape)] as const));
    loraInputs = { config: lora, scale, specs, values };
  }
  const anySampled = g.input(GENERATE_INPUTS.sampling, BOOL, []);
  const splitCache = auto ? g.input(GENERATE_INPUTS.splitCache, BOOL, []) : undefined;
  return {
    ids,
    positionIds,
    mask,
    past,
    uniforms,
    stopIds,
    sampling: { temperature, anySampled },
    lora: loraInputs,
    splitCache,
  };
}

/**
 * The new tokens [B, T] through every layer, causal among themselves after the cached slots,
 * appended to the cache; and the first sample, from each row's last position.
 */
function promptChunk(
  ctx: GenerateContext,
  w: GenerateWeights,
  inputs: GenerateInputs,
  table: string,
): LoopStart {
  const { g, nh, nkv, d, H, axis1 } = ctx;
  const { ids, positionIds, mask, past, uniforms } = inputs;
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
  const present: { key: string; value: string }[] = [];
  const hidden = layerStack(
    g,
    ctx,
    w,
    g.op1('Gather', [w.embed, flatIds], { axis: 0 }),
    w.ropeFactors(g, flatPos),
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
      present.push({ key: K!, value: Vv! });
      return g.op1('Reshape', [
        g.op1('Transpose', [o!], { perm: [0, 2, 1, 3] }),
        g.i64([-1, nh * d]),
      ]);
    },
  );
  // Rows are left-padded: every row's last token is at t = T − 1.
  const lastT = g.op1('Sub', [Tsz, g.i64([1])]);
  const last = g.op1('Squeeze', [
    g.op1('Gather', [g.op1('Reshape', [hidden, BT([H])]), lastT], { axis: 1 }),
    axis1,
  ]);
  const logits = g.op1('Gemm', [last, w.head], { transB: 1 });
  const uniformsByStep = g.op1('Transpose', [uniforms], { perm: [1, 0] }); // [K, B]
  const first = sampleTokens(
    g,
    ctx,
    inputs.sampling,
    logits,
    g.op1('Gather', [uniformsByStep, g.i64([0], [])], { axis: 0 }),
  );
  const firstStop = stopCheck(g, ctx, table, first.index);
  const nextPos = g.op1('Add', [
    g.op1('Squeeze', [g.op1('Gather', [positionIds, lastT], { axis: 1 }), axis1]),
    g.i32([1], []),
  ]);

  // What the loop needs besides: the start cache's length, an empty chunk cache, its trips.
  const startLen = g.op1('Add', [Psz, Tsz]);
  const empty = g.op1('Expand', [
    g.f32([0], []),
    g.op1('Concat', [Bsz, g.i64([nkv, 0, d])], { axis: 0 }),
  ]);
  const trips = g.op1('Sub', [
    g.op1('Gather', [g.op1('Shape', [uniforms]), g.i64([1], [])], { axis: 0 }),
    g.i64([1], []),
  ]);
  return {
    present,
    rowBias,
    first,
    firstStop,
    nextPos,
    logits,
    uniformsByStep,
    sampling: inputs.sampling,
    stopTable: table,
    startLen,
    empty,
    trips,
  };
}

/**
 * Attention 'auto': both loops, chosen per run by the host (`split_cache`): the cache is copied
 * per token only when that is cheaper than the split attention's extra nodes (small batches).
 */
function eitherLoop(
  ctx: GenerateContext,
  w: GenerateWeights,
  start: LoopStart,
  splitCache: string,
): ChunkResult {
  const { g, L, nkv, d, V } = ctx;
  const branch = (split: boolean) => {
    const e = g.body(split ? 'if_split/' : 'if_concat/');
    const r = decodeLoop(e, ctx, w, start, split);
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
  return {
    tokens: outs[0]!,
    logprobs: outs[1]!,
    present: start.present.map((_, l) => ({ key: outs[2 + 2 * l]!, value: outs[3 + 2 * l]! })),
    logits: outs[2 + 2 * L]!,
  };
}

/** The model around the main graph, with the weights as external initializers. */
function generateModel(g: OnnxEmitter, w: GenerateWeights, c: DecoderConfig): GenerateGraph {
  const graph: OnnxGraph = {
    ...g.graph('generate'),
    initializers: [...w.external, ...g.initializers],
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
  return { model, inputs: graph.inputs.map(ioSpec), outputs: graph.outputs.map(ioSpec) };
}

const DTYPE_NAME: Record<number, GraphIOSpec['dtype']> = {
  [F]: 'float32',
  [D]: 'float64',
  [I32]: 'int32',
  [I64]: 'int64',
  [BOOL]: 'bool',
};

function ioSpec(v: OnnxValueInfo): GraphIOSpec {
  return { name: v.name, dtype: DTYPE_NAME[v.elemType]!, shape: v.shape ?? [] };
}
