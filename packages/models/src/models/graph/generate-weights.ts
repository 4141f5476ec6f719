import { OnnxDataType, type OnnxTensor } from '@flowgrpo/graph';
import {
  type LoraConfig,
  type LoraParamSpec,
  type LoraTargetModule,
  loraScaling,
  moduleFeatures,
} from '../../lora/lora-config.js';
import { EMBED_TOKENS, FINAL_NORM, LM_HEAD, layerTensorNames } from '../weights/tensor-names.js';
import { type BaseWeights, ROPE_COS, ROPE_SIN } from './base-weights.js';
import { BOOL, concat, F, type GenerateContext } from './generate-context.js';
import type { OnnxEmitter } from './onnx-emitter.js';

// The `generate` graph's weights, packed for its fused forward (inference-graph.ts): one Gemm for
// q|k|v and their rotate-half copies, one for gate|up, 1/√d folded into q. The packing is nodes
// over initializers only, which ORT folds at load. LoRA updates are packed the same way, once per
// run outside the decode loop. RoPE's cos/sin come as one table of per-position factors.

const HALF = { bfloat16: OnnxDataType.BFLOAT16, float16: OnnxDataType.FLOAT16 } as const;

type Group = 'qkv' | 'o' | 'gateUp' | 'down';
const GROUPS: Record<Group, LoraTargetModule[]> = {
  qkv: ['q_proj', 'k_proj', 'v_proj'],
  o: ['o_proj'],
  gateUp: ['gate_proj', 'up_proj'],
  down: ['down_proj'],
};

/** One layer's packed weights (names of folded values) and low-rank updates. */
export interface LayerWeights {
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

/** The adapter's graph inputs: lora_scale and the PEFT-named matrices. */
export interface LoraGraphInputs {
  config: LoraConfig;
  scale: string;
  specs: LoraParamSpec[];
  values: Map<string, string>;
}

export interface GenerateWeights {
  layers: LayerWeights[];
  finalNorm: string;
  embed: string;
  head: string;
  /** [N, nh + 2kv, 2, d] cos/sin factors of the packed heads at positions [N]. */
  ropeFactors(e: OnnxEmitter, positions: string): string;
  /** The weights.data tensors the graph reads, as external initializers. */
  external: OnnxTensor[];
}

/** Packs every layer, then their adapters, then the head and the RoPE table. */
export function packWeights(
  ctx: GenerateContext,
  base: BaseWeights,
  lora: LoraGraphInputs | undefined,
): GenerateWeights {
  const external: OnnxTensor[] = [];
  const cast = new Map<string, string>();
  const weight = (name: string): string => {
    const ref = base.refs.get(name);
    if (!ref) throw new RangeError(`weights.data has no tensor '${name}'`);
    if (!external.some((t) => t.name === name))
      external.push({
        name,
        dataType: ref.half ? HALF[ref.half] : F,
        dims: ref.shape,
        external: ref.external,
      });
    if (!ref.half) return name;
    // Sampling reads every weight for each token: a half-precision one is cast once, at load
    // (ORT folds the Cast with the packing), not per token.
    let f = cast.get(name);
    if (!f) {
      f = ctx.g.op1('Cast', [name], { to: F });
      cast.set(name, f);
    }
    return f;
  };
  const layers = Array.from({ length: ctx.L }, (_, l) => packLayer(ctx, weight, l));
  if (lora) {
    const scale = ctx.g.op1('Mul', [lora.scale, ctx.g.f32([loraScaling(lora.config)], [])]);
    for (let l = 0; l < ctx.L; l++) packLayerLora(ctx, lora, scale, l, layers[l]!);
  }
  const finalNorm = weight(FINAL_NORM);
  const embed = weight(EMBED_TOKENS);
  const head = weight(ctx.c.tieWordEmbeddings ? EMBED_TOKENS : LM_HEAD);
  const ropeFactors = ropeTable(ctx, weight);
  return { layers, finalNorm, embed, head, ropeFactors, external };
}

/** Layer l's projections, biases and norms in the packed layout. */
function packLayer(
  ctx: GenerateContext,
  weight: (name: string) => string,
  l: number,
): LayerWeights {
  const { g, c, H } = ctx;
  const n = layerTensorNames(l);
  const lw: LayerWeights = {
    qkv: packQkv(ctx, scaled(ctx, weight(n.qProj)), weight(n.kProj), weight(n.vProj), H),
    o: weight(n.oProj),
    gateUp: g.op1('Concat', [weight(n.gateProj), weight(n.upProj)], { axis: 0 }),
    down: weight(n.downProj),
    inputNorm: weight(n.inputNorm),
    postNorm: weight(n.postAttentionNorm),
    lora: {},
  };
  if (c.qkvBias)
    lw.qkvBias = g.op1('Reshape', [
      packQkv(ctx, scaled(ctx, weight(n.qBias)), weight(n.kBias), weight(n.vBias), 1),
      g.i64([-1]),
    ]);
  if (c.oBias) lw.oBias = weight(n.oBias);
  if (c.mlpBias) {
    lw.gateUpBias = g.op1('Concat', [weight(n.gateBias), weight(n.upBias)], { axis: 0 });
    lw.downBias = weight(n.downBias);
  }
  if (c.qkNorm) {
    lw.qNorm = g.op1('Mul', [weight(n.qNorm), g.f32([1 / Math.sqrt(ctx.d)], [])]);
    lw.kNorm = weight(n.kNorm);
  }
  return lw;
}

/**
 * Layer l's adapters, per packed group: A stacked ([r·m, in]) and B block-diagonal over the
 * group's output rows ([out, r·m]) times `scale` (lora_scale · scaling), its q/k/v rows arranged
 * like the base rows.
 */
function packLayerLora(
  ctx: GenerateContext,
  lora: LoraGraphInputs,
  scale: string,
  l: number,
  lw: LayerWeights,
): void {
  const { g, c } = ctx;
  const r = lora.config.r;
  for (const [group, modules] of Object.entries(GROUPS) as [Group, LoraTargetModule[]][]) {
    const mine = lora.specs.filter((s) => s.layer === l && modules.includes(s.module));
    if (mine.length === 0) continue;
    const targeted = modules.filter((m) => mine.some((s) => s.module === m));
    const width = targeted.length * r;
    // B of module m, scaled, as the columns [at·r, (at+1)·r) of [out_m, width]; zeros if m has
    // no adapter.
    const bOf = (m: LoraTargetModule): string => {
      const at = targeted.indexOf(m);
      const out = moduleFeatures(c, m)[1];
      if (at < 0) return g.op1('ConstantOfShape', [g.i64([out, width])]);
      const b = mine.find((s) => s.module === m && s.which === 'B')!;
      const sb = g.op1('Mul', [lora.values.get(b.name)!, scale]);
      return g.op1('Pad', [sb, g.i64([0, at * r, 0, width - (at + 1) * r])]);
    };
    const aRows = targeted.map(
      (m) => lora.values.get(mine.find((s) => s.module === m && s.which === 'A')!.name)!,
    );
    const b =
      group === 'qkv'
        ? packQkv(ctx, scaled(ctx, bOf('q_proj')), bOf('k_proj'), bOf('v_proj'), width)
        : concat(g, modules.map(bOf), 0);
    lw.lora[group] = { a: concat(g, aRows, 0), b };
  }
}

/**
 * q's rows times 1/√d — unless the model has q/k RMSNorm (Qwen3): the norm runs between the
 * projection and RoPE, so 1/√d goes into the q norm's weight instead (packLayer).
 */
function scaled(ctx: GenerateContext, x: string): string {
  return ctx.c.qkNorm ? x : ctx.g.op1('Mul', [x, ctx.g.f32([1 / Math.sqrt(ctx.d)], [])]);
}

/** q, k, v rows → [(nh + 2kv)·2d, cols]: the q heads, the k heads, the v heads. */
function packQkv(ctx: GenerateContext, q: string, k: string, v: string, cols: number): string {
  const { g, nh, nkv } = ctx;
  const all = g.op1(
    'Concat',
    [
      pairsOf(ctx, q, nh, cols, false),
      pairsOf(ctx, k, nkv, cols, false),
      pairsOf(ctx, v, nkv, cols, true),
    ],
    { axis: 0 },
  );
  return g.op1('Reshape', [all, g.i64([-1, cols])]);
}

/**
 * Rows [heads·d, cols] of a projection (or of a LoRA B, or a bias with cols = 1) in the packed
 * head layout: [heads, 2, d, cols] = each head's rows then their rotate-half rows (−x₂, x₁), or
 * zeros for value heads.
 */
function pairsOf(
  ctx: GenerateContext,
  w: string,
  heads: number,
  cols: number,
  value: boolean,
): string {
  const { g, d, half } = ctx;
  const blocks = g.op1('Reshape', [w, g.i64([heads, 1, d, cols])]);
  let rot: string;
  if (value) rot = g.op1('Mul', [blocks, g.f32([0], [])]);
  else {
    const [w1, w2] = g.op('Split', [blocks, g.i64([half, half])], { axis: 2 }, { outputs: 2 });
    rot = g.op1('Concat', [g.op1('Neg', [w2!]), w1!], { axis: 2 });
  }
  return g.op1('Concat', [blocks, rot], { axis: 1 });
}

/**
 * Per position [1, 2, d] = [[cos, cos], [sin, sin]] (both halves of a head), and the value heads'
 * (1, 0): RoPE is then one Mul, one Split and one Add over every head. Returns the lookup of the
 * factors at given positions.
 */
function ropeTable(
  ctx: GenerateContext,
  weight: (name: string) => string,
): GenerateWeights['ropeFactors'] {
  const { g, d, nh, nkv, heads } = ctx;
  const twice = (t: string) => g.op1('Concat', [t, t], { axis: 1 });
  const csTable = g.op1('Reshape', [
    g.op1('Concat', [twice(weight(ROPE_COS)), twice(weight(ROPE_SIN))], { axis: 1 }),
    g.i64([-1, 1, 2, d]),
  ]);
  const isValue = g.constant(
    'is_value',
    Float32Array.from({ length: heads }, (_, i) => (i >= nh + nkv ? 1 : 0)),
    [1, heads, 1, 1],
  );
  const valueCs = g.f32([...Array(d).fill(1), ...Array(d).fill(0)], [1, 1, 2, d]);
  const isValueB = g.op1('Cast', [isValue], { to: BOOL });
  return (e, pos) =>
    e.op1('Where', [isValueB, valueCs, e.op1('Gather', [csTable, pos], { axis: 0 })]);
}
