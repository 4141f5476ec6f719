// What one op is: its shape/dtype rule, its forward for the reference evaluator, and its
// vector-Jacobian product written with standard ONNX ops through the builder.
import type { GraphBuilder } from '../ir/builder.js';
import type { Value } from '../ir/graph.js';
import type { Attrs, Dim, ElemType, HostTensor, Shape } from '../ir/types.js';

/** A value's static type as shape inference sees it. */
export interface ValueType {
  dtype: ElemType;
  shape: Shape | undefined;
  /** Statically known elements (small rank-0/1 integer tensors); see Value.known. */
  known?: readonly Dim[] | undefined;
}

export interface InferCtx {
  readonly inputs: readonly (ValueType | undefined)[];
  readonly attrs: Attrs;
  /** Throws a GraphError naming the node, its op and its input shapes. */
  fail(message: string): never;
  /** A fresh symbolic dim for sizes only known at run time. */
  fresh(): string;
}

/** ONNX attribute type of each attribute ('dtype' is a ElemType written as TensorProto's int). */
export type AttrType = 'int' | 'float' | 'ints' | 'floats' | 'string' | 'tensor' | 'dtype';

export interface VjpCtx {
  readonly b: GraphBuilder;
  /** The node's inputs (forward values, reused: the forward is never recomputed). */
  readonly x: readonly (Value | undefined)[];
  /** The node's outputs. */
  readonly y: readonly Value[];
  /** Gradient of the loss w.r.t. each output (zeros where an output has none). */
  readonly gy: readonly Value[];
  readonly attrs: Attrs;
  /** Which inputs need a gradient; the rule may skip the others. */
  readonly needs: readonly boolean[];
}

export interface OpDef {
  readonly op: string;
  readonly attrTypes?: Readonly<Record<string, AttrType>>;
  readonly infer: (ctx: InferCtx) => ValueType[];
  readonly forward: (x: readonly (HostTensor | undefined)[], attrs: Attrs) => HostTensor[];
  /** Inputs that can carry a gradient (float inputs among them); absent: none. */
  readonly diff?: readonly number[] | 'all';
  /** Gradients w.r.t. the inputs, `undefined` where none flows. */
  readonly vjp?: (ctx: VjpCtx) => (Value | undefined)[];
}

export function defineOps(...defs: OpDef[]): OpDef[] {
  return defs;
}
