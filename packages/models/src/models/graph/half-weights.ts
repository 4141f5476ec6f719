import type { GraphBuilder, Value } from '@flowgrpo/graph';

// Frozen projection matrices held in half precision (bf16/fp16) and cast to float32 where they
// are used, so that memory holds each one once, in half, and its float32 copy only for the one
// product that needs it. ONNX Runtime's CPU EP has no half-precision Gemm on x86, so the product
// itself stays float32 (the same values as the float32 path when the checkpoint is half: the
// cast is exact).
//
// Two things decide whether the float32 copy really is transient:
// - ORT runs a node as soon as its inputs exist, and frees its output after the last consumer.
//   A Cast of an initializer has no input but the weight, so ORT would cast every layer's weight
//   at the start of the run (or fold it at load: a float32 copy held for the session's life).
//   `castAfter` makes the Cast read the activation it multiplies (none of its rows), so it runs
//   just before its product, and ORT cannot fold it.
// - Autodiff keeps what a gradient reads: the input gradient of x·Wᵀ reads W, which would keep
//   the forward's copy alive until the backward. `frozenLinear`'s hand-written gradient casts the
//   weight again, after the incoming gradient exists.

/** `w` (half) as float32, cast once `after` (an activation [rows, …]) exists: see above. */
export function castAfter(b: GraphBuilder, w: Value, after: Value): Value {
  // No rows of `after`, as a [0, in] tensor of w's dtype, appended to w: the same values, and a
  // shape the builder still knows (a Reshape to a computed shape would lose it, and autodiff
  // would then sum broadcasts at run time). Through bool, so that no gradient flows into it.
  const cols = (w.shape as number[])[1]!;
  const empty = b.cast(b.reshape(b.slice(after, [0], [0], [0]), [-1, cols]), 'bool');
  const none = b.cast(empty, w.dtype);
  return b.cast(b.concat([w, none], 0), 'float32');
}

/**
 * x·Wᵀ for a frozen half-precision W [out, in] and x [rows, in]: the forward and the input
 * gradient (g·W) each cast W where they use it. No gradient flows to W.
 */
export function frozenLinear(b: GraphBuilder, x: Value, w: Value, name: string): Value {
  // The forward's copy is an input of the region, made outside it: the nodes that take x's empty
  // slice are shared with the layer's other projections of x, and a node sits in one region only.
  const wf = castAfter(b, w, x);
  const y = b.gemm(x, wf, undefined, { transB: true });
  b.customVjp({
    name,
    inputs: [x, wf],
    outputs: [y],
    vjp: ({ b, gy, needs }) => {
      const g = gy[0];
      return [g && needs[0] ? b.gemm(g, castAfter(b, w, g)) : undefined, undefined];
    },
  });
  return y;
}
