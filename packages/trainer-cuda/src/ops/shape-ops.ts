// Ops that move or reshape data: Shape, Size, Reshape, Transpose, Unsqueeze, Squeeze, Expand,
// Concat, Split, Slice, Pad, Cast, Range, ConstantOfShape. Their gradients only move data back.
import type { Value } from '../graph/graph.js';
import { broadcast, dimProduct, isStatic, knownInts, normAxis, req } from '../graph/shape.js';
import { tensor } from '../graph/tensor.js';
import { type Dim, type DType, isFloat, type Tensor } from '../graph/types.js';
import {
  axisSplit,
  broadcastMap,
  broadcastShape,
  castValue,
  ints,
  make,
  mapN,
  normAxis as normAxis1,
  numel,
  strides,
  transposeData,
} from './nd.js';
import { defineOps, type InferCtx } from './op.js';

const reshapeTo = (x: Tensor, shape: readonly number[]): Tensor => ({
  dtype: x.dtype,
  shape: [...shape],
  data: x.data,
});
const back = (c: {
  b: { reshape(g: Value, s: Value): Value; shape(x: Value): Value };
  gy: readonly Value[];
  x: readonly (Value | undefined)[];
}) => [c.b.reshape(c.gy[0]!, c.b.shape(c.x[0]!))];
const BIG = 2 ** 62;

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
      // Cancel equal dims (symbolic or not) and see what one dim is left.
      const left = [...from];
      const others = out.filter((_, i) => i !== neg);
      const unmatched = others.filter((d) => {
        const j = left.indexOf(d);
        if (j < 0) return true;
        left.splice(j, 1);
        return false;
      });
      const leftOver = left.length === 1 ? left[0] : dimProduct(left);
      out[neg] = unmatched.length === 0 && leftOver !== undefined ? leftOver : c.fresh();
    } else out[neg] = c.fresh();
  } else if (from && isStatic(from) && isStatic(out) && numel(from) !== numel(out)) {
    c.fail(`cannot reshape [${from.join(', ')}] into [${out.join(', ')}]`);
  }
  return out;
}

/** Normalised [start, end) of a Slice on one axis of length n (ONNX clamping rules). */
function sliceRange(start: number, end: number, step: number, n: number): [number, number] {
  const clamp = (v: number, lo: number, hi: number) => Math.min(Math.max(v, lo), hi);
  let s = start < 0 ? start + n : start;
  let e = end < 0 ? end + n : end;
  if (step > 0) {
    s = clamp(s, 0, n);
    e = clamp(e, 0, n);
  } else {
    s = clamp(s, 0, n - 1);
    e = clamp(e, -1, n - 1);
  }
  return [s, e];
}
const sliceLen = (s: number, e: number, step: number) => Math.max(0, Math.ceil((e - s) / step));

/** Per-axis slice parameters of a Slice node, or undefined when not static. */
function sliceParams(c: InferCtx, rank: number) {
  const starts = knownInts(c, 1);
  const ends = knownInts(c, 2);
  const axes = c.inputs[3] ? knownInts(c, 3) : starts?.map((_, i) => i);
  const steps = c.inputs[4] ? knownInts(c, 4) : starts?.map(() => 1);
  if (!starts || !ends || !axes || !steps) return undefined;
  return axes.map((a, i) => ({
    axis: normAxis(c, a, rank),
    start: starts[i]!,
    end: ends[i]!,
    step: steps[i]!,
  }));
}

function splitSizes(n: number, parts: number): number[] {
  const chunk = Math.ceil(n / parts);
  return Array.from({ length: parts }, (_, i) => Math.max(0, Math.min(chunk, n - i * chunk)));
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
      if (neg >= 0) t[neg] = x!.data.length / numel(t.filter((_, i) => i !== neg));
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
    op: 'Concat',
    attrTypes: { axis: 'int' },
    infer: (c) => {
      const xs = c.inputs.map((_, i) => req(c, i));
      const dts = new Set(xs.map((x) => x.dtype));
      if (dts.size > 1) c.fail(`inputs must share one dtype, got ${[...dts].join(', ')}`);
      const first = xs.find((x) => x.shape)?.shape;
      if (!first || xs.some((x) => !x.shape)) return [{ dtype: xs[0]!.dtype, shape: undefined }];
      const r = first.length;
      const axis = normAxis(c, c.attrs.axis as number, r);
      const shape: Dim[] = [...first];
      for (const x of xs) {
        if (x.shape!.length !== r) c.fail('inputs must share one rank');
        x.shape!.forEach((d, i) => {
          if (i !== axis && typeof d === 'number' && typeof shape[i] === 'number' && d !== shape[i])
            c.fail(`dims differ on axis ${i}`);
          if (i !== axis && typeof shape[i] === 'string' && typeof d === 'number') shape[i] = d;
        });
      }
      shape[axis] = xs.every((x) => typeof x.shape![axis] === 'number')
        ? xs.reduce((s, x) => s + (x.shape![axis] as number), 0)
        : c.fresh();
      const known = r === 1 && xs.every((x) => x.known) ? xs.flatMap((x) => x.known!) : undefined;
      return [{ dtype: xs[0]!.dtype, shape, known }];
    },
    forward: (xs, at) => {
      const ts = xs as Tensor[];
      const r = ts[0]!.shape.length;
      const axis = normAxis1(at.axis as number, r);
      const shape = [...ts[0]!.shape];
      shape[axis] = ts.reduce((s, t) => s + t.shape[axis]!, 0);
      const o = make(ts[0]!.dtype, shape);
      const [outer, , inner] = axisSplit(shape, axis);
      let off = 0;
      for (const t of ts) {
        const len = t.shape[axis]! * inner;
        for (let p = 0; p < outer; p++)
          o.data.set(t.data.subarray(p * len, (p + 1) * len), p * shape[axis]! * inner + off);
        off += len;
      }
      return [o];
    },
    diff: 'all',
    // The gradient is split back with each input's size along the axis.
    vjp: (c) => {
      const { b } = c;
      const axis = c.attrs.axis as number;
      const sizes = b.concat(
        c.x.map((x) => b.dim(x!, axis)),
        0,
      );
      return b.emit('Split', [c.gy[0]!, sizes], { axis });
    },
  },
  {
    op: 'Split',
    attrTypes: { axis: 'int', num_outputs: 'int' },
    infer: (c) => {
      const x = req(c, 0);
      // ONNX takes either `split` sizes (input 1) or `num_outputs`, never both.
      const n = (c.attrs.num_outputs as number | undefined) ?? c.inputs[1]?.shape?.[0];
      if (typeof n !== 'number')
        return c.fail('Split needs num_outputs or split sizes of static length');
      if (!x.shape) return Array.from({ length: n }, () => ({ dtype: x.dtype, shape: undefined }));
      const axis = normAxis(c, (c.attrs.axis as number | undefined) ?? 0, x.shape.length);
      const d = x.shape[axis]!;
      const sizes = c.inputs[1]
        ? c.inputs[1].known
        : typeof d === 'number'
          ? splitSizes(d, n)
          : undefined;
      if (sizes && sizes.length !== n) c.fail(`${sizes.length} split sizes for ${n} outputs`);
      return Array.from({ length: n }, (_, i) => ({
        dtype: x.dtype,
        shape: x.shape!.map((e, j) => (j === axis ? (sizes?.[i] ?? c.fresh()) : e)),
      }));
    },
    forward: ([x, s], at) => {
      const axis = normAxis1((at.axis as number | undefined) ?? 0, x!.shape.length);
      const sizes = s ? ints(s) : splitSizes(x!.shape[axis]!, at.num_outputs as number);
      const [outer, len, inner] = axisSplit(x!.shape, axis);
      let off = 0;
      return sizes.map((n) => {
        const shape = x!.shape.map((d, j) => (j === axis ? n : d));
        const o = make(x!.dtype, shape);
        for (let p = 0; p < outer; p++)
          o.data.set(
            x!.data.subarray(p * len * inner + off * inner, p * len * inner + (off + n) * inner),
            p * n * inner,
          );
        off += n;
        return o;
      });
    },
    diff: [0],
    vjp: (c) => [c.b.concat(c.gy, (c.attrs.axis as number | undefined) ?? 0)],
  },
  {
    op: 'Slice',
    infer: (c) => {
      const x = req(c, 0);
      if (!x.shape) return [{ dtype: x.dtype, shape: undefined }];
      const params = sliceParams(c, x.shape.length);
      if (!params) return [{ dtype: x.dtype, shape: x.shape.map(() => c.fresh()) }];
      const shape = [...x.shape];
      for (const p of params) {
        const d = x.shape[p.axis]!;
        if (typeof d === 'number')
          shape[p.axis] = sliceLen(...sliceRange(p.start, p.end, p.step, d), p.step);
        else if (!(p.start === 0 && p.step === 1 && p.end >= BIG)) shape[p.axis] = c.fresh();
      }
      let known: Dim[] | undefined;
      if (x.known && x.shape.length === 1 && params.length === 1 && typeof shape[0] === 'number') {
        const p = params[0]!;
        const [s] = sliceRange(p.start, p.end, p.step, x.known.length);
        known = Array.from({ length: shape[0] }, (_, i) => x.known![s + i * p.step]!);
      }
      return [{ dtype: x.dtype, shape, known }];
    },
    forward: ([x, st, en, ax, sp]) => {
      const r = x!.shape.length;
      const starts = ints(st);
      const axes = ax ? ints(ax).map((a) => (a < 0 ? a + r : a)) : starts.map((_, i) => i);
      const steps = sp ? ints(sp) : starts.map(() => 1);
      const begin = x!.shape.map(() => 0);
      const step = x!.shape.map(() => 1);
      const shape = [...x!.shape];
      axes.forEach((a, i) => {
        const [s, e] = sliceRange(starts[i]!, ints(en)[i]!, steps[i]!, x!.shape[a]!);
        begin[a] = s;
        step[a] = steps[i]!;
        shape[a] = sliceLen(s, e, steps[i]!);
      });
      const o = make(x!.dtype, shape);
      const inStr = strides(x!.shape);
      const idx = shape.map(() => 0);
      for (let k = 0; k < o.data.length; k++) {
        let off = 0;
        for (let a = 0; a < r; a++) off += (begin[a]! + idx[a]! * step[a]!) * inStr[a]!;
        o.data[k] = x!.data[off]!;
        for (let a = r - 1; a >= 0; a--) {
          if (++idx[a]! < shape[a]!) break;
          idx[a] = 0;
        }
      }
      return [o];
    },
    diff: [0],
    // Static unit-step slices pad the gradient back; otherwise each sliced axis scatters it back
    // through the indices Slice(Range(0, dim), start, end, step) — correct for any dims and steps.
    vjp: (c) => {
      const { b } = c;
      const [x, starts, ends, axes, steps] = c.x as Value[];
      const r = x!.shape!.length;
      const st = starts!.known as number[] | undefined;
      const en = ends!.known as number[] | undefined;
      const ax = (axes ? (axes.known as number[] | undefined) : st?.map((_, i) => i))?.map((a) =>
        a < 0 ? a + r : a,
      );
      const sp = steps ? (steps.known as number[] | undefined) : st?.map(() => 1);
      if (
        st &&
        en &&
        ax &&
        sp?.every((s) => s === 1) &&
        ax.every((a) => typeof x!.shape![a] === 'number')
      ) {
        const pads = new Array<number>(2 * r).fill(0);
        ax.forEach((a, i) => {
          const n = x!.shape![a] as number;
          const [s, e] = sliceRange(st[i]!, en[i]!, 1, n);
          pads[a] = s;
          pads[r + a] = n - Math.max(s, e);
        });
        return [b.pad(c.gy[0]!, pads, 0)];
      }
      let g = c.gy[0]!;
      const axisList = ax ?? Array.from({ length: starts!.shape![0] as number }, (_, i) => i);
      axisList.forEach((a, i) => {
        const pick = (v: Value | undefined, dflt: number) =>
          v ? b.slice(v, [i], [i + 1]) : b.ints([dflt]);
        const n = b.dim(x!, a);
        const idx = b.slice(
          b.range(0, b.squeeze(n, [0]), 1),
          pick(starts, 0),
          pick(ends, 0),
          [0],
          pick(steps, 1),
        );
        const view = Array.from({ length: r }, (_, j) => (j === a ? -1 : 1));
        const full = b.expand(b.reshape(idx, view), b.shape(g));
        const target = b.concat(
          Array.from({ length: r }, (_, j) => (j === a ? n : b.dim(g, j))),
          0,
        );
        g = b.scatterElements(b.constantOfShape(target, 0, g.dtype), full, g, a, 'add');
      });
      return [g];
    },
  },
  {
    op: 'Pad',
    attrTypes: { mode: 'string' },
    infer: (c) => {
      const x = req(c, 0);
      const pads = knownInts(c, 1);
      if (!x.shape) return [{ dtype: x.dtype, shape: undefined }];
      const r = x.shape.length;
      if (!pads) return [{ dtype: x.dtype, shape: x.shape.map(() => c.fresh()) }];
      return [
        {
          dtype: x.dtype,
          shape: x.shape.map((d, i) =>
            pads[i] === 0 && pads[r + i] === 0
              ? d
              : typeof d === 'number'
                ? d + pads[i]! + pads[r + i]!
                : c.fresh(),
          ),
        },
      ];
    },
    forward: ([x, p, v]) => {
      const pads = ints(p);
      const r = x!.shape.length;
      const shape = x!.shape.map((d, i) => d + pads[i]! + pads[r + i]!);
      const o = make(x!.dtype, shape);
      o.data.fill(v ? v.data[0]! : 0);
      const oStr = strides(shape);
      const idx = x!.shape.map(() => 0);
      for (let k = 0; k < x!.data.length; k++) {
        let off = 0;
        for (let a = 0; a < r; a++) off += (idx[a]! + pads[a]!) * oStr[a]!;
        o.data[off] = x!.data[k]!;
        for (let a = r - 1; a >= 0; a--) {
          if (++idx[a]! < x!.shape[a]!) break;
          idx[a] = 0;
        }
      }
      return [o];
    },
    diff: [0],
    // Constant-mode padding with non-negative pads: the gradient is the un-padded window.
    vjp: (c) => {
      const { b } = c;
      const x = c.x[0]!;
      const r = x.shape!.length;
      const before = b.slice(c.x[1]!, [0], [r]);
      return [
        b.slice(
          c.gy[0]!,
          before,
          b.add(before, b.shape(x)),
          b.ints(Array.from({ length: r }, (_, i) => i)),
        ),
      ];
    },
  },
  {
    op: 'Cast',
    attrTypes: { to: 'dtype' },
    infer: (c) => {
      const x = req(c, 0);
      const to = c.attrs.to as DType;
      const intish = (d: DType) => !isFloat(d) && d !== 'bool';
      return [
        {
          dtype: to,
          shape: x.shape,
          known: x.known && intish(x.dtype) && intish(to) ? x.known : undefined,
        },
      ];
    },
    forward: ([x], at) => [mapN(at.to as DType, [x!], (v) => castValue(v, at.to as DType))],
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
      const v = c.attrs.value as Tensor | undefined;
      const shape =
        c.inputs[0]?.known ??
        (typeof req(c, 0).shape?.[0] === 'number'
          ? Array.from({ length: req(c, 0).shape![0] as number }, () => c.fresh())
          : undefined);
      return [{ dtype: v?.dtype ?? 'float32', shape }];
    },
    forward: ([s], at) => {
      const v = at.value as Tensor | undefined;
      return [tensor(v?.dtype ?? 'float32', ints(s), v ? v.data[0]! : 0)];
    },
  },
);
