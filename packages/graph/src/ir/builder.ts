// The graph builder: one typed function per op. Each call infers the output's dtype and symbolic
// shape at once (errors name the node), and folds the call into a constant when its result is
// statically known and small (shape arithmetic on static dims, ops on constants).

import { shapeSize } from '@flowgrpo/core';
import type { OpDef, ValueType } from '../ops/op.js';
import { OPS } from '../ops/registry.js';
import { type GradOptions, grad as gradOf } from './autodiff.js';
import type { CustomVjp } from './custom-vjp.js';
import { GraphError } from './errors.js';
import { Graph, type Node, type Value } from './graph.js';
import { isStatic } from './shape.js';
import { tensor } from './tensor.js';
import {
  type Attrs,
  type Dim,
  type ElemType,
  type ExternalRef,
  type HostTensor,
  isFloat,
  type Shape,
} from './types.js';

/** A value, or a number made into a scalar constant of the other operand's dtype. */
export type Operand = Value | number;
/** An int64 vector input given as a value or as static numbers. */
export type Ints = Value | readonly number[];

const FOLD_LIMIT = 4096;
const INT_DTYPES: readonly ElemType[] = ['int64', 'int32', 'int8', 'uint8'];

export class GraphBuilder {
  readonly graph: Graph;
  /** Regions whose gradient is written by hand (`customVjp`), in registration order. */
  readonly customVjps: CustomVjp[] = [];
  private scopes: string[] = [];
  private readonly constCache = new Map<string, Value>();
  private readonly named = new Set<Value>();
  private readonly memo = new Map<string, Value[]>();
  private memoVersion = 0;

  constructor(graphOrName: Graph | string = 'flowgrpo') {
    this.graph = typeof graphOrName === 'string' ? new Graph(graphOrName) : graphOrName;
  }

  // ---- graph inputs, initializers, constants, outputs -------------------------------------

  input(name: string, dtype: ElemType, shape: Shape): Value {
    const v = this.value({
      name: this.graph.claimName(name, true),
      dtype,
      shape: [...shape],
      kind: 'input',
    });
    this.graph.inputs.push(v);
    return v;
  }

  /**
   * A named weight. `external: true` asks export to append its bytes to the external-data file
   * (`toOnnxModel(graph, { weights })`, e.g. the shared weights.data) instead of inlining them.
   */
  initializer(name: string, t: HostTensor, options: { external?: boolean } = {}): Value {
    const v = this.value({
      name: this.graph.claimName(name, true),
      dtype: t.dtype,
      shape: t.shape,
      kind: 'initializer',
      data: t,
      ...(options.external && { preferExternal: true }),
    });
    this.graph.initializers.push(v);
    return v;
  }

  /** A named weight whose bytes live in a side file (e.g. weights.data) at a given offset. */
  externalInitializer(
    name: string,
    dtype: ElemType,
    shape: readonly number[],
    external: ExternalRef,
  ): Value {
    const v = this.value({
      name: this.graph.claimName(name, true),
      dtype,
      shape: [...shape],
      kind: 'initializer',
      external,
    });
    this.graph.initializers.push(v);
    return v;
  }

  /** An anonymous constant (small ones are shared). */
  constant(t: HostTensor): Value {
    const key =
      t.data.length <= 16 ? `${t.dtype}[${t.shape.join(',')}]${t.data.join(',')}` : undefined;
    const hit = key === undefined ? undefined : this.constCache.get(key);
    if (hit) return hit;
    const known =
      INT_DTYPES.includes(t.dtype) && t.shape.length <= 1 && t.data.length <= 64
        ? Array.from(t.data)
        : undefined;
    const name = this.graph.claimName(`${this.scopes.join('')}const_${this.graph.newId()}`, false);
    const v = this.value({
      name,
      dtype: t.dtype,
      shape: t.shape,
      kind: 'constant',
      data: t,
      known,
    });
    if (key !== undefined) this.constCache.set(key, v);
    return v;
  }

  scalar(x: number, dtype: ElemType = 'float32'): Value {
    return this.constant(tensor(dtype, [], x));
  }

  /** A 1-D int64 constant. */
  ints(xs: readonly number[]): Value {
    return this.constant(tensor('int64', [xs.length], xs));
  }

  /** Marks `v` as a graph output named `name` (an Identity when the name is taken by v already). */
  output(v: Value, name?: string): Value {
    let out = v;
    if (name !== undefined && name !== v.name) {
      if (v.kind === 'node' && !this.graph.outputs.includes(v) && !this.named.has(v)) {
        this.graph.releaseName(v.name);
        v.name = this.graph.claimName(name, true);
        this.named.add(v);
      } else {
        out = this.emitNew('Identity', [v], {})[0]!;
        this.graph.releaseName(out.name);
        out.name = this.graph.claimName(name, true);
      }
    } else if (v.kind !== 'node' || this.graph.outputs.includes(v)) {
      out = this.emitNew('Identity', [v], {})[0]!;
    }
    this.graph.outputs.push(out);
    return out;
  }

  /** Runs `f` with node names prefixed by `scope/`. */
  withScope<T>(scope: string, f: () => T): T {
    this.scopes.push(`${scope}/`);
    try {
      return f();
    } finally {
      this.scopes.pop();
    }
  }

  /**
   * Registers a hand-written gradient for the nodes between `region.inputs` and
   * `region.outputs` (jax.custom_vjp): `grad` calls `region.vjp` instead of differentiating them.
   */
  customVjp(region: CustomVjp): void {
    this.customVjps.push(region);
  }

  /** Appends the backward graph of `loss` w.r.t. `wrt`; see autodiff.ts. */
  grad(loss: Value, wrt: readonly Value[], options?: GradOptions): Value[] {
    return gradOf(this, loss, wrt, options);
  }

  // ---- the generic emitter -----------------------------------------------------------------

  /** Adds one node (or folds it to constants); every typed op below goes through here. */
  emit(op: string, inputs: readonly (Value | undefined)[], attrs: Attrs = {}): Value[] {
    // Every op is pure, so the same op on the same values is computed once (gradient rules ask
    // for Shape(x) or Wᵀ again and again).
    if (this.memoVersion !== this.graph.version) {
      this.memo.clear();
      this.memoVersion = this.graph.version;
    }
    const key = `${op}(${inputs.map((v) => v?.id ?? '').join(',')})${JSON.stringify(attrs)}`;
    const seen = this.memo.get(key);
    if (seen) return seen;
    const outs = this.emitNew(op, inputs, attrs);
    this.memo.set(key, outs);
    return outs;
  }

  private emitNew(op: string, inputs: readonly (Value | undefined)[], attrs: Attrs): Value[] {
    const def: OpDef | undefined = OPS[op];
    const id = this.graph.newId();
    const nodeName = `${this.scopes.join('')}${op}_${id}`;
    if (!def) throw new GraphError(`unknown op '${op}'`, { node: nodeName, op });
    const inputShapes = inputs.map((v) => v?.shape);
    let k = 0;
    const types = def.infer({
      inputs: inputs.map((v) => v && { dtype: v.dtype, shape: v.shape, known: v.known }),
      attrs,
      fail: (message: string): never => {
        throw new GraphError(message, { node: nodeName, op, inputShapes });
      },
      fresh: () => `${nodeName.replaceAll('/', '.')}_d${k++}`,
    });
    const folded = this.fold(def, inputs, attrs, types);
    if (folded) return folded.map((t) => this.constant(t));
    const outputs: Value[] = [];
    const node: Node = { id, name: nodeName, op, inputs: [...inputs], outputs, attrs };
    types.forEach((t, i) => {
      const name = this.graph.claimName(types.length === 1 ? nodeName : `${nodeName}_${i}`, false);
      outputs.push(
        this.value({
          name,
          dtype: t.dtype,
          shape: t.shape,
          kind: 'node',
          producer: node,
          known: t.known,
        }),
      );
    });
    this.graph.nodes.push(node);
    return outputs;
  }

  private fold(
    def: OpDef,
    inputs: readonly (Value | undefined)[],
    attrs: Attrs,
    types: ValueType[],
  ): HostTensor[] | undefined {
    if (!types.every((t) => isStatic(t.shape) && shapeSize(t.shape) <= FOLD_LIMIT))
      return undefined;
    if (types.every((t) => t.known?.every((d) => typeof d === 'number'))) {
      return types.map((t) => tensor(t.dtype, t.shape as number[], t.known as number[]));
    }
    if (inputs.some((v) => v !== undefined) && inputs.every((v) => v === undefined || v.data)) {
      return def.forward(
        inputs.map((v) => v?.data),
        attrs,
      );
    }
    return undefined;
  }

  private value(fields: Omit<Value, 'id'>): Value {
    return { id: this.graph.newId(), ...fields };
  }

  private one(op: string, inputs: readonly (Value | undefined)[], attrs: Attrs = {}): Value {
    return this.emit(op, inputs, attrs)[0]!;
  }

  private operands(a: Operand, b: Operand): [Value, Value] {
    const dt = typeof a === 'number' ? (typeof b === 'number' ? 'float32' : b.dtype) : a.dtype;
    return [
      typeof a === 'number' ? this.scalar(a, dt) : a,
      typeof b === 'number' ? this.scalar(b, dt) : b,
    ];
  }

  private intsValue(x: Ints | undefined): Value | undefined {
    return x === undefined
      ? undefined
      : Array.isArray(x)
        ? this.ints(x as readonly number[])
        : (x as Value);
  }

  // ---- elementwise ---------------------------------------------------------------------------

  add(a: Operand, b: Operand): Value {
    return this.one('Add', this.operands(a, b));
  }
  sub(a: Operand, b: Operand): Value {
    return this.one('Sub', this.operands(a, b));
  }
  mul(a: Operand, b: Operand): Value {
    return this.one('Mul', this.operands(a, b));
  }
  div(a: Operand, b: Operand): Value {
    return this.one('Div', this.operands(a, b));
  }
  pow(a: Operand, b: Operand): Value {
    return this.one('Pow', this.operands(a, b));
  }
  min(a: Operand, b: Operand): Value {
    return this.one('Min', this.operands(a, b));
  }
  max(a: Operand, b: Operand): Value {
    return this.one('Max', this.operands(a, b));
  }
  equal(a: Operand, b: Operand): Value {
    return this.one('Equal', this.operands(a, b));
  }
  less(a: Operand, b: Operand): Value {
    return this.one('Less', this.operands(a, b));
  }
  greater(a: Operand, b: Operand): Value {
    return this.one('Greater', this.operands(a, b));
  }
  greaterOrEqual(a: Operand, b: Operand): Value {
    return this.one('GreaterOrEqual', this.operands(a, b));
  }
  lessOrEqual(a: Operand, b: Operand): Value {
    return this.one('LessOrEqual', this.operands(a, b));
  }
  or(a: Value, b: Value): Value {
    return this.one('Or', [a, b]);
  }
  sin(x: Value): Value {
    return this.one('Sin', [x]);
  }
  cos(x: Value): Value {
    return this.one('Cos', [x]);
  }
  erf(x: Value): Value {
    return this.one('Erf', [x]);
  }
  /** Index of the maximum along `axis` (int64; not differentiable). */
  argMax(x: Value, axis = -1, keepdims = false): Value {
    return this.one('ArgMax', [x], { axis, keepdims: keepdims ? 1 : 0 });
  }
  and(a: Value, b: Value): Value {
    return this.one('And', [a, b]);
  }
  not(a: Value): Value {
    return this.one('Not', [a]);
  }
  neg(x: Value): Value {
    return this.one('Neg', [x]);
  }
  abs(x: Value): Value {
    return this.one('Abs', [x]);
  }
  sqrt(x: Value): Value {
    return this.one('Sqrt', [x]);
  }
  reciprocal(x: Value): Value {
    return this.one('Reciprocal', [x]);
  }
  exp(x: Value): Value {
    return this.one('Exp', [x]);
  }
  log(x: Value): Value {
    return this.one('Log', [x]);
  }
  sigmoid(x: Value): Value {
    return this.one('Sigmoid', [x]);
  }
  tanh(x: Value): Value {
    return this.one('Tanh', [x]);
  }
  relu(x: Value): Value {
    return this.one('Relu', [x]);
  }
  identity(x: Value): Value {
    return this.one('Identity', [x]);
  }

  where(cond: Value, x: Operand, y: Operand): Value {
    return this.one('Where', [cond, ...this.operands(x, y)]);
  }

  cast(x: Value, to: ElemType): Value {
    return x.dtype === to ? x : this.one('Cast', [x], { to });
  }

  clip(x: Value, min?: number | Value, max?: number | Value): Value {
    const s = (v: number | Value | undefined) =>
      typeof v === 'number' ? this.scalar(v, x.dtype) : v;
    return this.one('Clip', [x, s(min), s(max)]);
  }

  // ---- linear algebra ------------------------------------------------------------------------

  matmul(a: Value, b: Value): Value {
    return this.one('MatMul', [a, b]);
  }

  gemm(
    a: Value,
    b: Value,
    c?: Value,
    o: { alpha?: number; beta?: number; transA?: boolean; transB?: boolean } = {},
  ): Value {
    return this.one('Gemm', [a, b, c], {
      alpha: o.alpha ?? 1,
      beta: o.beta ?? 1,
      transA: o.transA ? 1 : 0,
      transB: o.transB ? 1 : 0,
    });
  }

  softmax(x: Value, axis = -1): Value {
    return this.one('Softmax', [x], { axis });
  }

  // ---- reductions (axes are an input, opset 18) ----------------------------------------------

  reduceSum(x: Value, axes?: Ints, keepdims = false): Value {
    return this.reduce('ReduceSum', x, axes, keepdims);
  }
  reduceMean(x: Value, axes?: Ints, keepdims = false): Value {
    return this.reduce('ReduceMean', x, axes, keepdims);
  }
  reduceMax(x: Value, axes?: Ints, keepdims = false): Value {
    return this.reduce('ReduceMax', x, axes, keepdims);
  }
  reduceLogSumExp(x: Value, axes?: Ints, keepdims = false): Value {
    return this.reduce('ReduceLogSumExp', x, axes, keepdims);
  }
  private reduce(op: string, x: Value, axes: Ints | undefined, keepdims: boolean): Value {
    return this.one(op, [x, this.intsValue(axes)], { keepdims: keepdims ? 1 : 0 });
  }

  cumsum(
    x: Value,
    axis: number | Value,
    o: { exclusive?: boolean; reverse?: boolean } = {},
  ): Value {
    const ax = typeof axis === 'number' ? this.scalar(axis, 'int64') : axis;
    return this.one('CumSum', [x, ax], {
      exclusive: o.exclusive ? 1 : 0,
      reverse: o.reverse ? 1 : 0,
    });
  }

  // ---- indexing ------------------------------------------------------------------------------

  gather(data: Value, indices: Value, axis = 0): Value {
    return this.one('Gather', [data, indices], { axis });
  }
  gatherElements(data: Value, indices: Value, axis = 0): Value {
    return this.one('GatherElements', [data, indices], { axis });
  }
  gatherND(data: Value, indices: Value): Value {
    return this.one('GatherND', [data, indices]);
  }
  scatterElements(
    data: Value,
    indices: Value,
    updates: Value,
    axis = 0,
    reduction: 'none' | 'add' = 'none',
  ): Value {
    return this.one('ScatterElements', [data, indices, updates], { axis, reduction });
  }
  scatterND(
    data: Value,
    indices: Value,
    updates: Value,
    reduction: 'none' | 'add' = 'none',
  ): Value {
    return this.one('ScatterND', [data, indices, updates], { reduction });
  }
  trilu(x: Value, o: { upper?: boolean; k?: number | Value } = {}): Value {
    const k = typeof o.k === 'number' ? this.scalar(o.k, 'int64') : o.k;
    return this.one('Trilu', [x, k], { upper: o.upper === false ? 0 : 1 });
  }

  // ---- shapes --------------------------------------------------------------------------------

  /** The shape as a 1-D int64 value (dims start..end, end exclusive). */
  shape(x: Value, start?: number, end?: number): Value {
    const attrs: Record<string, number> = {};
    if (start !== undefined) attrs.start = start;
    if (end !== undefined) attrs.end = end;
    return this.one('Shape', [x], attrs);
  }
  size(x: Value): Value {
    return this.one('Size', [x]);
  }
  reshape(x: Value, shape: Ints): Value {
    return this.one('Reshape', [x, this.intsValue(shape)]);
  }
  transpose(x: Value, perm?: readonly number[]): Value {
    return this.one('Transpose', [x], perm ? { perm } : {});
  }
  concat(xs: readonly Value[], axis: number): Value {
    return this.one('Concat', xs, { axis });
  }
  /** Splits into `parts` equal pieces, or pieces of the given sizes. */
  split(x: Value, parts: number | Ints, axis = 0): Value[] {
    if (typeof parts === 'number') return this.emit('Split', [x], { axis, num_outputs: parts });
    const sizes = this.intsValue(parts)!;
    const n = sizes.shape?.[0];
    if (typeof n !== 'number') throw new GraphError('Split sizes need a static length');
    return this.emit('Split', [x, sizes], { axis });
  }
  slice(x: Value, starts: Ints, ends: Ints, axes?: Ints, steps?: Ints): Value {
    return this.one('Slice', [
      x,
      this.intsValue(starts),
      this.intsValue(ends),
      this.intsValue(axes),
      this.intsValue(steps),
    ]);
  }
  unsqueeze(x: Value, axes: Ints): Value {
    return this.one('Unsqueeze', [x, this.intsValue(axes)]);
  }
  squeeze(x: Value, axes?: Ints): Value {
    return this.one('Squeeze', [x, this.intsValue(axes)]);
  }
  expand(x: Value, shape: Ints): Value {
    return this.one('Expand', [x, this.intsValue(shape)]);
  }
  pad(x: Value, pads: Ints, value?: number): Value {
    return this.one('Pad', [
      x,
      this.intsValue(pads),
      value === undefined ? undefined : this.scalar(value, x.dtype),
    ]);
  }
  range(start: Operand, limit: Operand, delta: Operand = 1): Value {
    const dt =
      [start, limit, delta].find((v): v is Value => typeof v !== 'number')?.dtype ?? 'int64';
    const s = (v: Operand) => (typeof v === 'number' ? this.scalar(v, dt) : v);
    return this.one('Range', [s(start), s(limit), s(delta)]);
  }
  constantOfShape(shape: Ints, value = 0, dtype: ElemType = 'float32'): Value {
    return this.one('ConstantOfShape', [this.intsValue(shape)], {
      value: tensor(dtype, [1], [value]),
    });
  }

  // ---- helpers used by gradient rules --------------------------------------------------------

  /** Zeros with x's shape and dtype (static shapes fold to a constant). */
  zerosLike(x: Value): Value {
    return this.fullLike(x, 0);
  }

  /**
   * `value` broadcast to x's shape and dtype (static shapes fold to a constant). An Expand of a
   * scalar, not ConstantOfShape: the WebGPU EP has no ConstantOfShape kernel.
   */
  fullLike(x: Value, value: number): Value {
    return this.expand(this.scalar(value, x.dtype), this.shape(x));
  }

  /** The size of x along `axis` as a 1-D int64 of length 1 (a constant when static). */
  dim(x: Value, axis: number): Value {
    const r = x.shape!.length;
    const a = axis < 0 ? axis + r : axis;
    return this.shape(x, a, a + 1);
  }

  /**
   * Sums a broadcast gradient `g` back to the shape of `x`: leading axes are summed away, axes
   * where x has 1 are summed with keepdims. Where static shapes cannot tell (two different symbolic
   * dims), the sum happens at run time: Where(dim == 1, ReduceSum(g, axis) broadcast, g), then a
   * Slice to x's dim (1 or the full length).
   */
  unbroadcast(g: Value, x: Value): Value {
    if (!g.shape || !x.shape)
      throw new GraphError(`cannot reduce gradient of unknown rank to ${x.name}`);
    const gs = g.shape;
    const xs = x.shape;
    const lead = gs.length - xs.length;
    if (lead < 0)
      throw new GraphError(`gradient of rank ${gs.length} is below ${x.name}'s rank ${xs.length}`);
    const sum: number[] = [];
    const unsure: number[] = [];
    for (let i = 0; i < xs.length; i++) {
      const xd: Dim = xs[i]!;
      const gd: Dim = gs[lead + i]!;
      if (xd === gd) continue;
      if (xd === 1) sum.push(i);
      else if (typeof xd === 'string' || typeof gd === 'string') unsure.push(i);
      else throw new GraphError(`gradient dim ${gd} cannot reduce to ${x.name}'s dim ${xd}`);
    }
    let r = g;
    if (lead > 0)
      r = this.reduceSum(
        r,
        Array.from({ length: lead }, (_, i) => i),
        false,
      );
    if (sum.length > 0) r = this.reduceSum(r, sum, true);
    for (const a of unsure) {
      // dim == 1 compared in float (a sum of ones): Equal on int64 has no WebGPU kernel.
      const isOne = this.equal(
        this.reduceSum(this.expand(this.scalar(1, g.dtype), this.dim(x, a))),
        1,
      );
      const summed = this.reduceSum(r, [a], true);
      r = this.slice(this.where(isOne, summed, r), [0], this.dim(x, a), [a]);
    }
    return r;
  }

  /** Checks at build time that x is floating point (gradient rules assume it). */
  assertFloat(x: Value, what: string): void {
    if (!isFloat(x.dtype))
      throw new GraphError(`${what} needs a float value, ${x.name} is ${x.dtype}`);
  }
}
