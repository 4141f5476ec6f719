// Ops that cut and join along axes: Concat, Split, Slice, Pad. Their gradients put the pieces back.

import { dimSum } from '../ir/dim-algebra.js';
import type { Value } from '../ir/graph.js';
import { knownInts, normAxis, req } from '../ir/shape.js';
import type { Dim, HostTensor } from '../ir/types.js';
import { axisSplit, ints, make, normAxis as normAxis1, strides } from './nd.js';
import { defineOps, type InferCtx } from './op.js';

/** Slice ends at or past this count as "to the end" of a symbolic dim. */
const BIG = 2 ** 62;

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

export const sliceConcatOps = defineOps(
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
        : (dimSum(xs.map((x) => x.shape![axis]!)) ?? c.fresh());
      const known = r === 1 && xs.every((x) => x.known) ? xs.flatMap((x) => x.known!) : undefined;
      return [{ dtype: xs[0]!.dtype, shape, known }];
    },
    forward: (xs, at) => {
      const ts = xs as HostTensor[];
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
        else if (p.step > 0 && p.start >= 0 && p.end >= 0 && p.end <= p.start)
          shape[p.axis] = 0; // empty whatever the length: both ends clamp to min(·, n)
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
        g = b.scatterElements(b.expand(b.scalar(0, g.dtype), target), full, g, a, 'add');
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
);
