import type { DecoderConfig } from '../config.js';
import { OnnxDataType, type OnnxEmitter } from './onnx-emitter.js';

// What every part of the `generate` graph (inference-graph.ts) reads: the main graph it is
// emitted into, the model's sizes, and the few constants they all share.

export const F = OnnxDataType.FLOAT;
export const D = OnnxDataType.DOUBLE;
export const I32 = OnnxDataType.INT32;
export const I64 = OnnxDataType.INT64;
export const BOOL = OnnxDataType.BOOL;

/** Added to the scores of empty slots: exp underflows to exactly 0. */
export const MASKED = -1e9;

export interface GenerateContext {
  /**
   * The main graph. Its values are outer-scope values of the loop bodies, so some body nodes read
   * constants made here.
   */
  g: OnnxEmitter;
  c: DecoderConfig;
  H: number;
  /** Query heads, key/value heads, query heads per key/value head. */
  nh: number;
  nkv: number;
  grp: number;
  /** Head size and its half (RoPE rotates the halves). */
  d: number;
  half: number;
  L: number;
  V: number;
  /** Packed heads per row: the query heads, the key heads, the value heads. */
  heads: number;
  axis0: string;
  axis1: string;
  axisLast: string;
  /** SimplifiedLayerNormalization's attributes (RMSNorm over the last axis). */
  rmsAttrs: { axis: number; epsilon: { float: number }; stash_type: number };
}

/** The context of a graph emitted into `g` for `c`; makes the shared axis constants. */
export function generateContext(g: OnnxEmitter, c: DecoderConfig): GenerateContext {
  const nh = c.numAttentionHeads;
  const nkv = c.numKeyValueHeads;
  return {
    g,
    c,
    H: c.hiddenSize,
    nh,
    nkv,
    grp: nh / nkv,
    d: c.headDim,
    half: c.headDim / 2,
    L: c.numHiddenLayers,
    V: c.vocabSize,
    heads: nh + 2 * nkv,
    axis0: g.i64([0]),
    axis1: g.i64([1]),
    axisLast: g.i64([-1]),
    rmsAttrs: { axis: -1, epsilon: { float: c.rmsNormEps }, stash_type: 1 },
  };
}

/** Concat of `xs` along `axis`, or the one value itself. */
export function concat(e: OnnxEmitter, xs: string[], axis: number): string {
  return xs.length === 1 ? xs[0]! : e.op1('Concat', xs, { axis });
}
