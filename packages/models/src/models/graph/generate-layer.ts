import type { GenerateContext } from './generate-context.js';
import type { GenerateWeights, LayerWeights } from './generate-weights.js';
import { MS_DOMAIN, type OnnxEmitter } from './onnx-emitter.js';

// The `generate` graph's decoder layer over rows x [N, H] — run.c's forward, with fused forms:
//   SimplifiedLayerNormalization / SkipSimplifiedLayerNormalization  RMSNorm (+ the residual add)
//   one Gemm for q|k|v and their rotate-half copies, one for gate|up (generate-weights.ts)
//   RoPE as x·cos + rotate_half(x)·sin, the rotate-half rows made by that same Gemm
//   QuickGelu(alpha = 1) · up                                         SwiGLU
// The attention itself differs between the prompt chunk and the decode loop, so each caller
// passes its own (inference-graph.ts, generate-loop.ts).

/** Layer l's attention: q [N, nh, 1, d] and k, v [N, kv, 1, d] after RoPE → [N, nh·d]. */
export type LayerAttention = (l: number, q: string, k: string, v: string) => string;

/**
 * The residual stream between norms: the rows, and the branch output not yet added to them (the
 * next norm adds it: SkipSimplifiedLayerNormalization).
 */
interface Residual {
  x: string;
  pending: string | undefined;
}

/**
 * Every layer over rows `x0` [N, H] with RoPE factors `cs` of their positions; returns the
 * final-normed hidden rows.
 */
export function layerStack(
  e: OnnxEmitter,
  ctx: GenerateContext,
  w: GenerateWeights,
  x0: string,
  cs: string,
  attention: LayerAttention,
): string {
  const r: Residual = { x: x0, pending: undefined };
  for (let l = 0; l < ctx.L; l++)
    decoderLayer(e, ctx, w.layers[l]!, r, cs, (q, k, v) => attention(l, q, k, v));
  return rmsNorm(e, ctx, r, w.finalNorm);
}

/** One layer: attention then MLP, each after its norm; leaves the MLP's output pending. */
function decoderLayer(
  e: OnnxEmitter,
  ctx: GenerateContext,
  lw: LayerWeights,
  r: Residual,
  cs: string,
  attention: (q: string, k: string, v: string) => string,
): void {
  const h = rmsNorm(e, ctx, r, lw.inputNorm);
  const { q, k, v } = qkvWithRope(e, ctx, lw, h, cs);
  r.pending = linear(e, attention(q, k, v), lw.o, lw.oBias, lw.lora.o);
  const h2 = rmsNorm(e, ctx, r, lw.postNorm);
  r.pending = swiglu(e, ctx, lw, h2);
}

/** RMSNorm of the stream, adding the pending branch first (then the stream is the sum). */
function rmsNorm(e: OnnxEmitter, ctx: GenerateContext, r: Residual, w: string): string {
  if (r.pending === undefined) return e.op1('SimplifiedLayerNormalization', [r.x, w], ctx.rmsAttrs);
  // Outputs: the normed rows and the residual sum; mean and inv_std_var left out ('').
  const out = e.name('skip_norm');
  const sum = e.name('residual');
  e.op(
    'SkipSimplifiedLayerNormalization',
    [r.pending, r.x, w],
    { epsilon: { float: ctx.c.rmsNormEps } },
    { outputs: [out, '', '', sum], domain: MS_DOMAIN },
  );
  r.x = sum;
  r.pending = undefined;
  return out;
}

/** h·Wᵀ + bias, plus the adapter's (h·Aᵀ)·Bᵀ. */
function linear(
  e: OnnxEmitter,
  h: string,
  w: string,
  bias?: string,
  ad?: { a: string; b: string },
): string {
  const y = e.op1('Gemm', [h, w, bias], { transB: 1 });
  if (!ad) return y;
  return e.op1('Gemm', [e.op1('Gemm', [h, ad.a], { transB: 1 }), ad.b, y], { transB: 1 });
}

/** q, k, v of the normed rows `h`, after the q/k norms (when the model has them) and RoPE. */
function qkvWithRope(
  e: OnnxEmitter,
  ctx: GenerateContext,
  lw: LayerWeights,
  h: string,
  cs: string,
): { q: string; k: string; v: string } {
  const { heads, d, nh, nkv } = ctx;
  const qkv = linear(e, h, lw.qkv, lw.qkvBias, lw.lora.qkv);
  let pairs = e.op1('Reshape', [qkv, e.i64([0, heads, 2, d])]);
  if (lw.qNorm && lw.kNorm) pairs = qkNorms(e, ctx, pairs, lw.qNorm, lw.kNorm);
  // RoPE: x·cos + rotate_half(x)·sin. (A Split and an Add, not ReduceSum over the pair axis:
  // that reduction takes ORT's slow generic path.)
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
  return { q: q!, k: k!, v: v! };
}

/**
 * Per-head RMSNorm of q and k and of their rotate-half copies (same RMS, the weight's halves
 * swapped) over the packed heads [N, heads, 2, d]; the value heads pass through.
 */
function qkNorms(
  e: OnnxEmitter,
  ctx: GenerateContext,
  pairs: string,
  qNorm: string,
  kNorm: string,
): string {
  const { half, nh, nkv, rmsAttrs } = ctx;
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
  const [qp, kp, vp] = e.op('Split', [pairs, e.i64([nh, nkv, nkv])], { axis: 1 }, { outputs: 3 });
  return e.op1('Concat', [both(qp!, qNorm), both(kp!, kNorm), vp!], { axis: 1 });
}

/** The MLP of the normed rows `h`: down(QuickGelu(gate) · up). */
function swiglu(e: OnnxEmitter, ctx: GenerateContext, lw: LayerWeights, h: string): string {
  const gu = linear(e, h, lw.gateUp, lw.gateUpBias, lw.lora.gateUp);
  const F2 = ctx.c.intermediateSize;
  const [gate, up] = e.op('Split', [gu, e.i64([F2, F2])], { axis: 1 }, { outputs: 2 });
  const act = e.op1('Mul', [e.op1('QuickGelu', [gate!], { alpha: { float: 1 } }, MS_DOMAIN), up!]);
  return linear(e, act, lw.down, lw.downBias, lw.lora.down);
}
