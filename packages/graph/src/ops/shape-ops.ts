// Ops that reshape or retype data: Shape, Size, Reshape, Transpose, Unsqueeze, Squeeze, Expand,
// Cast, Range, ConstantOfShape. Their gradients only move data back.

import { dimDiv } from '../ir/dim-algebra.js';
import type { Value } from '../ir/graph.js';
import { broadcast, dimProduct, isStatic, knownInts, normAxis, req } from '../ir/shape.js';
import { tensor } from '../ir/tensor.js';
import { type Dim, type ElemType, type HostTensor, isFloat } from '../ir/types.js';
import {
  broadcastMap,
  broadcastShape,
  castValue,
  ints,
  make,
  mapN,
  shapeSize,
  transposeData,
} from './nd.js';
import { defineOps, type InferCtx } from './op.js';

const reshapeTo = (x: HostTensor, shape: readonly number[]): HostTensor => ({
  dtype: x.dtype,
  shape: [...shape],
  data: x.data,
});
const back = (c: {
  b: { reshape(g: Value, s: Value): Value; shape(x: Value): Value };
  gy: readonly Value[];
  x: readonly (Value | undefined)[];
}) => [c.b.reshape(c.gy[0]!, c.b.shape(c.x[0]!))];

/** Resolves a Reshape target (0 copies the input dim, -1 is inferred). */
function reshapeDims(c: InferCtx, from: readonly Dim[] | undefined, target: readonly Dim[]): Dim[] {
  const out = target.map((d, i) => (d === 0 ? (from?.[i] ?? c.fresh()) : d));
  const neg = out.indexOf(-1);
  if (neg >= 0) {
    const total = from && dimProduct(from);
    const rest = dimProduct(out.filter((_, i) => i !== neg));
    if (typeof total === 'number' && typeof rest === 'number') {
      if (rest === 0 || total % rest !== 0)
        c.fail(`cannot reshape ${total} elements into [${target.join(', ')}]`);
      out[neg] = total / rest;
    } else if (from) {
      // Symbolic: divide the monomials (batch*seq*H / H = batch*seq); else cancel equal dims and
      // see what one dim is left.
      const quotient = total !== undefined && rest !== undefined ? dimDiv(total, rest) : undefined;
      const left = [...from];
      const others = out.filter((_, i) => i !== neg);
      const unmatched = others.filter((d) => {
        const j = left.indexOf(d);
        if (j < 0) return true;
        left.splice(j, 1);
        return false;
      });
      const leftOver = left.length === 1 ? left[0] : dimProduct(left);
      out[neg] =
        quotient ?? (unmatched.length === 0 && leftOver !== undefined ? leftOver : c.fresh());
    } else out[neg] = c.fresh();
  } else if (from && isStatic(from) && isStatic(out) && shapeSize(from) !== shapeSize(out)) {
    c.fail(`cannot reshape [${from.join(', ')}] into [${out.join(', ')}]`);
  }
  return out;
}

export const shapeOps = defineOps(
  {
    op: 'Shape',
    attrTypes: { start: 'int', end: 'int' },
    infer: (c) => {
      const s = req(c, 0).shape;
      if (!s) return [{ dtype: 'int64', shape: [c.fresh()] }];
      const r = s.length;
      const norm = (v: number) => Math.min(Math.max(v < 0 ? v + r : v, 0), r);
      const from = norm((c.attrs.start as number | undefined) ?? 0);
      const to = norm((c.attrs.end as number | undefined) ?? r);
      const known = s.slice(from, Math.max(from, to));
      return [{ dtype: 'int64', shape: [known.length], known }];
    },
    forward: ([x], at) => {
      const r = x!.shape.length;
      const norm = (v: number) => Math.min(Math.max(v < 0 ? v + r : v, 0), r);
      const dims = x!.shape.slice(
        norm((at.start as number | undefined) ?? 0),
        norm((at.end as number | undefined) ?? r),
      );
      return [tensor('int64', [dims.length], dims)];
    },
  },
  {
    op: 'Size',
    infer: (c) => {
      const n = req(c, 0).shape && dimProduct(req(c, 0).shape!);
      return [{ dtype: 'int64', shape: [], known: n === undefined ? undefined : [n] }];
    },
    forward: ([x]) => [tensor('int64', [], x!.data.length)],
  },
  {
    op: 'Reshape',
    attrTypes: { allowzero: 'int' },
    infer: (c) => {
      const x = req(c, 0);
      const target = c.inputs[1]?.known;
      const tShape = req(c, 1).shape;
      if (!target) {
        const n = tShape?.[0];
        return [
          {
            dtype: x.dtype,
            shape: typeof n === 'number' ? Array.from({ length: n }, () => c.fresh()) : undefined,
          },
        ];
      }
      const shape = reshapeDims(c, x.shape, target);
      return [{ dtype: x.dtype, shape, known: x.known && shape.length <= 1 ? x.known : undefined }];
    },
    forward: ([x, s]) => {
      const t = ints(s).map((d, i) => (d === 0 ? x!.shape[i]! : d));
      const neg = t.indexOf(-1);
      if (neg >= 0) t[neg] = x!.data.length / shapeSize(t.filter((_, i) => i !== neg));
      return [reshapeTo(x!, t)];
    },
    diff: [0],
    vjp: back,
  },
  {
    op: 'Transpose',
    attrTypes: { perm: 'ints' },
    infer: (c) => {
      const x = req(c, 0);
      if (!x.shape) return [{ dtype: x.dtype, shape: undefined }];
      const perm =
        (c.attrs.perm as number[] | undefined) ?? x.shape.map((_, i) => x.shape!.length - 1 - i);
      if (perm.length !== x.shape.length || new Set(perm).size !== perm.length)
        c.fail(`bad perm [${perm.join(', ')}]`);
      return [{ dtype: x.dtype, shape: perm.map((p) => x.shape![normAxis(c, p, perm.length)]!) }];
    },
    forward: ([x], at) => [
      transposeData(
        x!,
        (at.perm as number[] | undefined) ?? x!.shape.map((_, i) => x!.shape.length - 1 - i),
      ),
    ],
    diff: [0],
    vjp: (c) => {
      const r = c.x[0]!.shape!.length;
      const perm =
        (c.attrs.perm as number[] | undefined) ?? Array.from({ length: r }, (_, i) => r - 1 - i);
      const inv = new Array<number>(r);
      perm.forEach((p, i) => {
        inv[p] = i;
      });
      return [c.b.transpose(c.gy[0]!, inv)];
    },
  },
  {
    op: 'Unsqueeze',
    infer: (c) => {
      const x = req(c, 0);
      const axes = knownInts(c, 1);
      if (!x.shape || !axes) return [{ dtype: x.dtype, shape: undefined }];
      const r = x.shape.length + axes.length;
      const norm = axes.map((a) => normAxis(c, a, r));
      const rest = [...x.shape];
      const shape = Array.from({ length: r }, (_, i) => (norm.includes(i) ? 1 : rest.shift()!));
      return [
        { dtype: x.dtype, shape, known: x.shape.length === 0 && r === 1 ? x.known : undefined },
      ];
    },
    forward: ([x, axesT]) => {
      const axes = ints(axesT);
      const r = x!.shape.length + axes.length;
      const norm = axes.map((a) => (a < 0 ? a + r : a));
      const rest = [...x!.shape];
      return [
        reshapeTo(
          x!,
          Array.from({ length: r }, (_, i) => (norm.includes(i) ? 1 : rest.shift()!)),
        ),
      ];
    },
    diff: [0],
    vjp: back,
  },
  {
    op: 'Squeeze',
    infer: (c) => {
      const x = req(c, 0);
      if (!x.shape) return [{ dtype: x.dtype, shape: undefined }];
      const axes = c.inputs[1]
        ? knownInts(c, 1)?.map((a) => normAxis(c, a, x.shape!.length))
        : x.shape.flatMap((d, i) => (d === 1 ? [i] : []));
      if (!axes) return [{ dtype: x.dtype, shape: undefined }];
      for (const a of axes)
        if (typeof x.shape[a] === 'number' && x.shape[a] !== 1)
          c.fail(`cannot squeeze axis ${a} of size ${x.shape[a]}`);
      const shape = x.shape.filter((_, i) => !axes.includes(i));
      return [{ dtype: x.dtype, shape, known: shape.length === 0 ? x.known : undefined }];
    },
    forward: ([x, axesT]) => {
      const r = x!.shape.length;
      const axes = axesT
        ? ints(axesT).map((a) => (a < 0 ? a + r : a))
        : x!.shape.flatMap((d, i) => (d === 1 ? [i] : []));
      return [
        reshapeTo(
          x!,
          x!.shape.filter((_, i) => !axes.includes(i)),
        ),
      ];
    },
    diff: [0],
    vjp: back,
  },
  {
    op: 'Expand',
    infer: (c) => {
      const x = req(c, 0);
      const target = c.inputs[1]?.known;
      if (target) return [{ dtype: x.dtype, shape: broadcast(c, [x.shape, target]) }];
      const n = req(c, 1).shape?.[0];
      if (typeof n !== 'number' || !x.shape) return [{ dtype: x.dtype, shape: undefined }];
      return [
        {
          dtype: x.dtype,
          shape: Array.from({ length: Math.max(n, x.shape.length) }, () => c.fresh()),
        },
      ];
    },
    forward: ([x, s]) => {
      const shape = broadcastShape([x!.shape, ints(s)]);
      const map = broadcastMap(shape, x!.shape);
      return [
        make(
          x!.dtype,
          shape,
          Float64Array.from(map, (k) => x!.data[k]!),
        ),
      ];
    },
    diff: [0],
    vjp: (c) => [c.b.unbroadcast(c.gy[0]!, c.x[0]!)],
  },
  {
    op: 'Cast',
    attrTypes: { to: 'dtype' },
    infer: (c) => {
      const x = req(c, 0);
      const to = c.attrs.to as ElemType;
      const intish = (d: ElemType) => !isFloat(d) && d !== 'bool';
      return [
        {
          dtype: to,
          shape: x.shape,
          known: x.known && intish(x.dtype) && intish(to) ? x.known : undefined,
        },
      ];
    },
    forward: ([x], at) => [mapN(at.to as ElemType, [x!], (v) => castValue(v, at.to as ElemType))],
    diff: [0],
    vjp: (c) => [isFloat(c.y[0]!.dtype) ? c.b.cast(c.gy[0]!, c.x[0]!.dtype) : undefined],
  },
  {
    op: 'Range',
    infer: (c) => {
      const [s, l, d] = [0, 1, 2].map((i) => knownInts(c, i)?.[0]);
      const n =
        s !== undefined && l !== undefined && d !== undefined
          ? Math.max(0, Math.ceil((l - s) / d))
          : c.fresh();
      return [{ dtype: req(c, 0).dtype, shape: [n] }];
    },
    forward: ([s, l, d]) => {
      const [a, z, st] = [s!.data[0]!, l!.data[0]!, d!.data[0]!];
      const n = Math.max(0, Math.ceil((z - a) / st));
      return [
        make(
          s!.dtype,
          [n],
          Float64Array.from({ length: n }, (_, i) => a + i * st),
        ),
      ];
    },
  },
  {
    op: 'ConstantOfShape',
    attrTypes: { value: 'tensor' },
    infer: (c) => {
      const v = c.attrs.value as HostTensor | undefined;
      const shape =
        c.inputs[0]?.known ??
        (typeof req(c, 0).shape?.[0] === 'number'
          ? Array.from({ length: req(c, 0).shape![0] as number }, () => c.fresh())
          : undefined);
      return [{ dtype: v?.dtype ?? 'float32', shape }];
    },
    forward: ([s], at) => {
      const v = at.value as HostTensor | undefined;
      return [tensor(v?.dtype ?? 'float32', ints(s), v ? v.data[0]! : 0)];
    },
  },
);
