// Reductions with axes as an INPUT (opset 18) and CumSum.
import { GraphError } from '../ir/errors.js';
import type { Value } from '../ir/graph.js';
import { knownInts, normAxis, req } from '../ir/shape.js';
import type { Attrs, Dim, HostTensor } from '../ir/types.js';
import { axisSplit, broadcastMap, ints, make, mapN } from './nd.js';
import { defineOps, type OpDef, type VjpCtx } from './op.js';

/** The normalised reduced axes, or undefined when they are not known statically. */
function reducedAxes(
  rank: number,
  axes: readonly number[] | undefined,
  present: boolean,
  at: Attrs,
): number[] | undefined {
  if (present && axes === undefined) return undefined;
  if (!axes || axes.length === 0)
    return at.noop_with_empty_axes ? [] : Array.from({ length: rank }, (_, i) => i);
  return [...new Set(axes.map((a) => (a < 0 ? a + rank : a)))].sort((p, q) => p - q);
}

const keep = (at: Attrs) => at.keepdims === undefined || at.keepdims === 1;

type Acc = {
  init: number;
  step: (acc: number, x: number) => number;
  end: (acc: number, n: number) => number;
};

function reduceData(x: HostTensor, axesT: HostTensor | undefined, at: Attrs, acc: Acc): HostTensor {
  const axes = reducedAxes(x.shape.length, axesT ? ints(axesT) : undefined, false, at)!;
  const kshape = x.shape.map((d, i) => (axes.includes(i) ? 1 : d));
  const o = make(x.dtype, kshape);
  o.data.fill(acc.init);
  const map = broadcastMap(x.shape, kshape);
  const src = x.data;
  for (let i = 0; i < src.length; i++) o.data[map[i]!] = acc.step(o.data[map[i]!]!, src[i]!);
  const n = x.data.length / Math.max(1, o.data.length);
  for (let i = 0; i < o.data.length; i++) o.data[i] = acc.end(o.data[i]!, n);
  return keep(at) ? o : { ...o, shape: x.shape.filter((_, i) => !axes.includes(i)) };
}

/** The reduced gradient and output broadcast back over the reduced axes (keepdims form). */
function kept(c: VjpCtx, v: Value): Value {
  if (keep(c.attrs)) return v;
  const r = c.x[0]!.shape!.length;
  const axes = reducedAxes(r, c.x[1]?.known as number[] | undefined, !!c.x[1], c.attrs);
  if (!axes)
    throw new GraphError('reduction axes must be static to differentiate', { op: 'Reduce' });
  return axes.length === 0 ? v : c.b.unsqueeze(v, axes);
}

const reduceOp = (op: string, acc: Acc, vjp: OpDef['vjp'], forward?: OpDef['forward']): OpDef => ({
  op,
  attrTypes: { keepdims: 'int', noop_with_empty_axes: 'int' },
  infer: (c) => {
    const x = req(c, 0);
    if (!x.shape) return [{ dtype: x.dtype, shape: undefined }];
    const known = knownInts(c, 1);
    for (const a of known ?? []) normAxis(c, a, x.shape.length);
    const axes = reducedAxes(x.shape.length, known, !!c.inputs[1], c.attrs);
    if (!axes)
      return [{ dtype: x.dtype, shape: keep(c.attrs) ? x.shape.map(() => c.fresh()) : undefined }];
    const shape: Dim[] = [];
    x.shape.forEach((d, i) => {
      if (!axes.includes(i)) shape.push(d);
      else if (keep(c.attrs)) shape.push(1);
    });
    return [{ dtype: x.dtype, shape }];
  },
  forward: forward ?? (([x, axes], at) => [reduceData(x!, axes, at, acc)]),
  diff: [0],
  vjp,
});

const sum: Acc = { init: 0, step: (a, x) => a + x, end: (a) => a };
const max: Acc = { init: -Infinity, step: Math.max, end: (a) => a };

export const reduceOps = defineOps(
  reduceOp('ReduceSum', sum, (c) => [c.b.expand(kept(c, c.gy[0]!), c.b.shape(c.x[0]!))]),
  // d mean / dx = g / n. A symbolic reduced dim d is counted in float as ReduceSum(Expand(1, d)),
  // a vector of d ones: Size and Cast(int64 → float) have no WebGPU kernel and would put the
  // count on the CPU EP. The sum of ones is exact while n < 2^24 (as a float32 Cast would be).
  reduceOp('ReduceMean', { ...sum, end: (a, n) => a / n }, (c) => {
    const { b } = c;
    const x = c.x[0]!;
    const axes =
      reducedAxes(x.shape!.length, c.x[1]?.known as number[] | undefined, !!c.x[1], c.attrs) ?? [];
    let count: Value | number = 1;
    for (const a of axes) {
      const d = x.shape![a]!;
      const n =
        typeof d === 'number' ? d : b.reduceSum(b.expand(b.scalar(1, x.dtype), b.dim(x, a)));
      count =
        count === 1
          ? n
          : typeof count === 'number' && typeof n === 'number'
            ? count * n
            : b.mul(count, n);
    }
    return [b.div(b.expand(kept(c, c.gy[0]!), b.shape(x)), count)];
  }),
  // The gradient goes to the maxima, shared evenly at ties (as torch.amax).
  reduceOp('ReduceMax', max, (c) => {
    const { b } = c;
    const x = c.x[0]!;
    const axes = c.x[1] ?? b.ints(x.shape!.map((_, i) => i));
    const hit = b.cast(b.equal(x, kept(c, c.y[0]!)), x.dtype);
    const count = b.reduceSum(hit, axes, true);
    return [b.mul(hit, b.div(kept(c, c.gy[0]!), count))];
  }),
  // d logΣexp(x) / dx = exp(x − y)
  reduceOp(
    'ReduceLogSumExp',
    sum,
    (c) => [c.b.mul(kept(c, c.gy[0]!), c.b.exp(c.b.sub(c.x[0]!, kept(c, c.y[0]!))))],
    // max(x) + log Σ exp(x − max): stable for large logits.
    ([x, axes], at) => {
      const mx = reduceData(x!, axes, { ...at, keepdims: 1 }, max);
      const e = mapN(x!.dtype, [x!, mx], (v, m) => Math.exp(v - (Number.isFinite(m) ? m : 0)));
      const s = reduceData(e, axes, at, sum);
      const m = reduceData(x!, axes, at, max);
      return [mapN(x!.dtype, [s, m], (q, mm) => Math.log(q) + (Number.isFinite(mm) ? mm : 0))];
    },
  ),
  {
    // Ties pick the first index (select_last_index = 0).
    op: 'ArgMax',
    attrTypes: { axis: 'int', keepdims: 'int', select_last_index: 'int' },
    infer: (c) => {
      const x = req(c, 0);
      if (!x.shape) return [{ dtype: 'int64', shape: undefined }];
      const a = normAxis(c, (c.attrs.axis as number | undefined) ?? 0, x.shape.length);
      const shape = keep(c.attrs)
        ? x.shape.map((d, i) => (i === a ? 1 : d))
        : x.shape.filter((_, i) => i !== a);
      return [{ dtype: 'int64', shape }];
    },
    forward: ([x], at) => {
      const r = x!.shape.length;
      const ax = (at.axis as number | undefined) ?? 0;
      const a = ax < 0 ? ax + r : ax;
      const [outer, len, inner] = axisSplit(x!.shape, a);
      const o = make(
        'int64',
        keep(at) ? x!.shape.map((d, i) => (i === a ? 1 : d)) : x!.shape.filter((_, i) => i !== a),
      );
      for (let p = 0; p < outer; p++)
        for (let i = 0; i < inner; i++) {
          let best = 0;
          for (let j = 1; j < len; j++)
            if (x!.data[(p * len + j) * inner + i]! > x!.data[(p * len + best) * inner + i]!)
              best = j;
          o.data[p * inner + i] = best;
        }
      return [o];
    },
  },
  {
    op: 'CumSum',
    attrTypes: { exclusive: 'int', reverse: 'int' },
    infer: (c) => [{ dtype: req(c, 0).dtype, shape: req(c, 0).shape }],
    forward: ([x, axisT], at) => {
      const axis = axisT!.data[0]!;
      const [outer, len, inner] = axisSplit(x!.shape, axis < 0 ? axis + x!.shape.length : axis);
      const y = make(x!.dtype, x!.shape);
      for (let o = 0; o < outer; o++)
        for (let i = 0; i < inner; i++) {
          let s = 0;
          for (let jj = 0; jj < len; jj++) {
            const j = at.reverse ? len - 1 - jj : jj;
            const k = o * len * inner + j * inner + i;
            if (at.exclusive) {
              y.data[k] = s;
              s += x!.data[k]!;
            } else y.data[k] = s += x!.data[k]!;
          }
        }
      return [y];
    },
    diff: [0],
    // The adjoint of a running sum is the running sum in the other direction.
    vjp: (c) => [
      c.b.cumsum(c.gy[0]!, c.x[1]!, { exclusive: !!c.attrs.exclusive, reverse: !c.attrs.reverse }),
    ],
  },
);
