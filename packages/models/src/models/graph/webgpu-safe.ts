import type { GraphBuilder, Value } from '@flowgrpo/graph';
import { tensor } from '@flowgrpo/graph';

// Graph idioms that keep the decoder's graphs on the WebGPU EP with CPU fallback disabled.
// WebGPU has no int64 kernels besides Gather/GatherElements indices (not even Shape of an int64
// tensor, nor int64 Add/Reshape/Range), so nothing here does arithmetic on int64 values or
// shapes: run-time sizes come from Shape of float tensors, positions and masks are counted and
// compared as floats (exact below 2^24), and int64 inputs are only ever Gather indices.
// docs/decoder.md ("WebGPU strict mode") has the measurements behind each choice.

/** Added to the scores of masked keys: exp underflows to 0, and a fully masked row stays finite. */
export const MASKED = -1e9;

/** A float tensor of ones broadcast to `shape` (Expand of a scalar: no ConstantOfShape). */
export function ones(b: GraphBuilder, shape: Value | readonly number[]): Value {
  return b.expand(b.scalar(1, 'float32'), shape);
}

/**
 * The run-time shape [B, T, ...tail] of a [B, T, ...] float tensor `like`, as an int64 shape
 * value: Shape of an EMPTY [B, T, 1…, 0] tensor. Why not Concat(Shape(x)[0:2], tail): that is
 * int64 Concat/Slice arithmetic, which WebGPU runs on the CPU.
 */
export function runtimeShape(b: GraphBuilder, like: Value, tail: readonly number[]): Value {
  const col = b.slice(like, [0], [1], [2]); // [B, T, 1]
  const unit = b.reshape(col, [0, 0, ...tail.map(() => 1), 1]);
  return b.shape(b.expand(unit, [1, 1, ...tail, 0]), 0, 2 + tail.length);
}

/** 0, 1, …, n−1 along axis `axis` of `like` (float): an exclusive CumSum of ones, not Range. */
export function positionsAlong(b: GraphBuilder, like: Value, axis: number): Value {
  return b.cumsum(ones(b, b.shape(like, axis, axis + 1)), 0, { exclusive: true });
}

/** n−1, …, 1, 0 along axis `axis` of `like` (float): the distance to the last element. */
function distanceToEnd(b: GraphBuilder, like: Value, axis: number): Value {
  return b.cumsum(ones(b, b.shape(like, axis, axis + 1)), 0, { exclusive: true, reverse: true });
}

/**
 * The 0/1 int64 attention mask [B, S] as floats, read as Gather([0, 1], mask) rather than Cast
 * (an int64 → float Cast has no WebGPU kernel). Only 0 and 1 are valid mask values.
 */
export function maskAsFloat(b: GraphBuilder, attentionMask: Value): Value {
  return b.gather(b.constant(tensor('float32', [2], [0, 1])), attentionMask, 0);
}

/**
 * The int64 segment ids [B, T] of packed rows (train_step) as floats, read as a Gather from the
 * float 0 … T−1 along axis 1 of `like` (ids must lie in [0, T): a row of T tokens holds at most
 * T examples). Why not Cast: an int64 → float Cast has no WebGPU kernel.
 */
export function segmentsAsFloat(b: GraphBuilder, segmentIds: Value, like: Value): Value {
  return b.gather(positionsAlong(b, like, 1), segmentIds, 0);
}

/**
 * Additive attention bias [B, 1, g·T, S] for causal attention with padding, in the stacked-query
 * layout (row j·T + i is query i of GQA group member j): query i (absolute position S − T + i)
 * sees key k when k ≤ S − T + i, i.e. when S − 1 − k ≥ T − 1 − i, and key k is not padding. Both
 * sides count from the end, so neither S − T nor an int64 Range is needed.
 *
 * With `segments` (packed rows, no past: S = T) query i also needs key k in its own example —
 * segment[k] = segment[i] — so the mask is block-diagonal causal and no example sees another.
 */
export function causalPaddingBias(
  b: GraphBuilder,
  maskF: Value, // [B, S] float 0/1
  queries: Value, // [B, T, ...] any float tensor with the query length T on axis 1
  group: number,
  segments?: Value, // [B, T] float segment ids (S = T)
): Value {
  const keyFromEnd = distanceToEnd(b, maskF, 1); // [S]
  const queryFromEnd = distanceToEnd(b, queries, 1); // [T]
  const causal = b.greaterOrEqual(b.unsqueeze(keyFromEnd, [0]), b.unsqueeze(queryFromEnd, [1]));
  const notPad = b.greater(b.unsqueeze(maskF, [1, 2]), 0);
  let allowed = b.and(causal, notPad); // [B, 1, T, S]
  if (segments) {
    const querySegment = b.unsqueeze(segments, [1, 3]); // [B, 1, T, 1]
    const keySegment = b.unsqueeze(segments, [1, 2]); // [B, 1, 1, S]
    allowed = b.and(allowed, b.equal(querySegment, keySegment));
  }
  // Built for T queries, then copied g times (the compares and Where over [g·T, S] cost more).
  const bias = b.where(allowed, 0, MASKED);
  return group > 1 ? b.concat(Array(group).fill(bias), 2) : bias;
}

/**
 * Attention heads side by side, [B, nh, T, d] → [B·T, nh·d] (column h·d + e), by Split over heads
 * and Concat on the last axis. Why not Transpose + Reshape: with a Transpose there, ORT rewrites
 * the backward's Shape(Transpose(·)) into an int64 Gather that WebGPU lacks.
 */
export function mergeHeads(b: GraphBuilder, perHead: Value, nh: number, hd: number): Value {
  const sideBySide = nh > 1 ? b.concat(b.split(perHead, nh, 1), 3) : perHead; // [B, 1, T, nh·d]
  return b.reshape(sideBySide, [-1, nh * hd]);
}

/**
 * Rows `positions` [B, K] (int64) of x3 [B, T, H] → [B, K, H], as a one-hot [B, K, T] MatMul.
 * The one-hot holds a 1 and exact zeros, so the rows are bit-identical to a Gather; why not
 * GatherElements: its index maths and its backward need int64 Reshape/Expand/Add.
 */
export function selectRows(b: GraphBuilder, x3: Value, positions: Value): Value {
  const posT = positionsAlong(b, x3, 1); // [T]: 0 … T−1
  const posK = b.gather(posT, positions, 0); // [B, K] float
  const select = b.cast(b.equal(b.unsqueeze(posK, [2]), posT), 'float32'); // [B, K, T]
  return b.matmul(select, x3);
}

/**
 * log softmax(z)[id] per row of z [N, V] for ids [B, K] (int64, N = B·K) → [B, K], as
 * z[id] − ReduceLogSumExp(z): the pick is a one-hot product built from float compares (a
 * vocabulary arange from z's run-time shape: one from static dims would be folded into a
 * constant stored next to the weights), and LogSoftmax has no WebGPU kernel.
 * The arange is one row [V], broadcast in the compare: WebGPU's CumSum costs O(V) per element,
 * and over the whole [N, V] it took 90% of a Qwen2.5-0.5B train step on an H200 (3.2 of 3.5 s
 * of GPU time; docs/performance.md §4).
 */
export function pickLogprobs(b: GraphBuilder, z: Value, ids: Value): { logp: Value; lse: Value } {
  const vocab = positionsAlong(b, z, 1); // [V]: 0 … V−1
  const idsF = b.gather(vocab, ids, 0); // [B, K] float
  const oneHot = b.cast(b.equal(vocab, b.reshape(idsF, [-1, 1])), 'float32'); // [N, V]
  const picked = b.reduceSum(b.mul(z, oneHot), [1], true);
  const lse = b.reduceLogSumExp(z, [1], true); // [N, 1]
  return { logp: b.reshape(b.sub(picked, lse), b.shape(idsF)), lse };
}
