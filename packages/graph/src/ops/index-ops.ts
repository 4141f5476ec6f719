// Gather/scatter ops and Trilu. Gathers scatter their gradient back with reduction 'add'
// (repeated indices accumulate); scatters gather it.
import type { Value } from '../ir/graph.js';
import { normAxis, req } from '../ir/shape.js';
import type { Dim, HostTensor } from '../ir/types.js';
import { axisSplit, make, normAxis as normAxisN, shapeSize, strides } from './nd.js';
import { defineOps } from './op.js';

const idx = (i: number, n: number) => (i < 0 ? i + n : i);

/** Visits every element of `shape` with its multi-index (last axis fastest). */
function each(shape: readonly number[], f: (k: number, at: number[]) => void): void {
  const at = shape.map(() => 0);
  const n = shapeSize(shape);
  for (let k = 0; k < n; k++) {
    f(k, at);
    for (let a = shape.length - 1; a >= 0; a--) {
      if (++at[a]! < shape[a]!) break;
      at[a] = 0;
    }
  }
}

/** Offset in `data` of multi-index `at` with `at[axis]` replaced by index `i`. */
function offsetWith(
  str: readonly number[],
  at: readonly number[],
  axis: number,
  i: number,
): number {
  let off = 0;
  for (let a = 0; a < at.length; a++) off += (a === axis ? i : at[a]!) * str[a]!;
  return off;
}

function scatterElementsData(
  data: HostTensor,
  ind: HostTensor,
  upd: HostTensor,
  axis: number,
  add: boolean,
): HostTensor {
  const o = make(data.dtype, data.shape, Float64Array.from(data.data));
  const str = strides(data.shape);
  const a = axis < 0 ? axis + data.shape.length : axis;
  each(ind.shape, (k, at) => {
    const off = offsetWith(str, at, a, idx(ind.data[k]!, data.shape[a]!));
    o.data[off] = add ? o.data[off]! + upd.data[k]! : upd.data[k]!;
  });
  return o;
}

/** For ScatterND/GatherND: [number of index tuples, tuple length, slice size]. */
function ndLayout(
  data: HostTensor,
  ind: HostTensor,
): { tuples: number; q: number; slice: number; str: number[] } {
  const q = ind.shape[ind.shape.length - 1]!;
  return {
    tuples: shapeSize(ind.shape.slice(0, -1)),
    q,
    slice: shapeSize(data.shape.slice(q)),
    str: strides(data.shape),
  };
}
function ndOffset(data: HostTensor, ind: HostTensor, t: number, q: number, str: number[]): number {
  let off = 0;
  for (let j = 0; j < q; j++) off += idx(ind.data[t * q + j]!, data.shape[j]!) * str[j]!;
  return off;
}

export const indexOps = defineOps(
  {
    op: 'Gather',
    attrTypes: { axis: 'int' },
    infer: (c) => {
      const d = req(c, 0);
      const i = req(c, 1);
      if (!d.shape || !i.shape) return [{ dtype: d.dtype, shape: undefined }];
      const axis = normAxis(c, (c.attrs.axis as number | undefined) ?? 0, d.shape.length);
      const shape = [...d.shape.slice(0, axis), ...i.shape, ...d.shape.slice(axis + 1)];
      let known: Dim[] | undefined;
      if (d.known && d.shape.length === 1 && i.known?.every((v) => typeof v === 'number')) {
        known = (i.known as number[]).map((v) => d.known![idx(v, d.known!.length)]!);
      }
      return [{ dtype: d.dtype, shape, known }];
    },
    forward: ([d, i], at) => {
      const axis = normAxisN((at.axis as number | undefined) ?? 0, d!.shape.length);
      const [outer, len, inner] = axisSplit(d!.shape, axis);
      const n = i!.data.length;
      const o = make(d!.dtype, [
        ...d!.shape.slice(0, axis),
        ...i!.shape,
        ...d!.shape.slice(axis + 1),
      ]);
      for (let p = 0; p < outer; p++)
        for (let j = 0; j < n; j++) {
          const src = (p * len + idx(i!.data[j]!, len)) * inner;
          o.data.set(d!.data.subarray(src, src + inner), (p * n + j) * inner);
        }
      return [o];
    },
    diff: [0],
    // Flatten the index dims of g to one axis, broadcast the flat indices to g's shape, and
    // scatter-add into zeros shaped like the data.
    vjp: (c) => {
      const { b } = c;
      const [data, ind] = c.x as Value[];
      const r = data!.shape!.length;
      const axis = normAxisN((c.attrs.axis as number | undefined) ?? 0, r);
      const parts = [
        ...(axis > 0 ? [b.shape(data!, 0, axis)] : []),
        b.ints([-1]),
        ...(axis < r - 1 ? [b.shape(data!, axis + 1)] : []),
      ];
      const g = b.reshape(c.gy[0]!, parts.length === 1 ? parts[0]! : b.concat(parts, 0));
      const view = Array.from({ length: r }, (_, j) => (j === axis ? -1 : 1));
      const full = b.expand(b.reshape(ind!, view), b.shape(g));
      return [b.scatterElements(b.zerosLike(data!), full, g, axis, 'add')];
    },
  },
  {
    op: 'GatherElements',
    attrTypes: { axis: 'int' },
    infer: (c) => [{ dtype: req(c, 0).dtype, shape: req(c, 1).shape }],
    forward: ([d, i], at) => {
      const axis = (at.axis as number | undefined) ?? 0;
      const a = axis < 0 ? axis + d!.shape.length : axis;
      const str = strides(d!.shape);
      const o = make(d!.dtype, i!.shape);
      each(i!.shape, (k, pos) => {
        o.data[k] = d!.data[offsetWith(str, pos, a, idx(i!.data[k]!, d!.shape[a]!))]!;
      });
      return [o];
    },
    diff: [0],
    vjp: (c) => [
      c.b.scatterElements(
        c.b.zerosLike(c.x[0]!),
        c.x[1]!,
        c.gy[0]!,
        (c.attrs.axis as number | undefined) ?? 0,
        'add',
      ),
    ],
  },
  {
    op: 'GatherND',
    attrTypes: { batch_dims: 'int' },
    infer: (c) => {
      const d = req(c, 0);
      const i = req(c, 1);
      const q = i.shape?.[i.shape.length - 1];
      if (!d.shape || !i.shape || typeof q !== 'number')
        return [{ dtype: d.dtype, shape: undefined }];
      if (c.attrs.batch_dims) c.fail('batch_dims is not supported');
      return [{ dtype: d.dtype, shape: [...i.shape.slice(0, -1), ...d.shape.slice(q)] }];
    },
    forward: ([d, i]) => {
      const { tuples, q, slice, str } = ndLayout(d!, i!);
      const o = make(d!.dtype, [...i!.shape.slice(0, -1), ...d!.shape.slice(q)]);
      for (let t = 0; t < tuples; t++) {
        const off = ndOffset(d!, i!, t, q, str);
        o.data.set(d!.data.subarray(off, off + slice), t * slice);
      }
      return [o];
    },
    diff: [0],
    vjp: (c) => [c.b.scatterND(c.b.zerosLike(c.x[0]!), c.x[1]!, c.gy[0]!, 'add')],
  },
  {
    op: 'ScatterElements',
    attrTypes: { axis: 'int', reduction: 'string' },
    infer: (c) => [{ dtype: req(c, 0).dtype, shape: req(c, 0).shape }],
    forward: ([d, i, u], at) => [
      scatterElementsData(d!, i!, u!, (at.axis as number | undefined) ?? 0, at.reduction === 'add'),
    ],
    diff: [0, 2],
    // 'add': data passes g through; 'none': overwritten positions get no gradient.
    vjp: (c) => {
      const { b } = c;
      const [, ind, upd] = c.x as Value[];
      const axis = (c.attrs.axis as number | undefined) ?? 0;
      const g = c.gy[0]!;
      return [
        c.needs[0]
          ? c.attrs.reduction === 'add'
            ? g
            : b.scatterElements(g, ind!, b.zerosLike(upd!), axis)
          : undefined,
        undefined,
        c.needs[2] ? b.gatherElements(g, ind!, axis) : undefined,
      ];
    },
  },
  {
    op: 'ScatterND',
    attrTypes: { reduction: 'string' },
    infer: (c) => [{ dtype: req(c, 0).dtype, shape: req(c, 0).shape }],
    forward: ([d, i, u], at) => {
      const o = make(d!.dtype, d!.shape, Float64Array.from(d!.data));
      const { tuples, q, slice, str } = ndLayout(d!, i!);
      for (let t = 0; t < tuples; t++) {
        const off = ndOffset(d!, i!, t, q, str);
        for (let j = 0; j < slice; j++)
          o.data[off + j] =
            (at.reduction === 'add' ? o.data[off + j]! : 0) + u!.data[t * slice + j]!;
      }
      return [o];
    },
    diff: [0, 2],
    vjp: (c) => {
      const { b } = c;
      const [, ind, upd] = c.x as Value[];
      const g = c.gy[0]!;
      return [
        c.needs[0]
          ? c.attrs.reduction === 'add'
            ? g
            : b.scatterND(g, ind!, b.zerosLike(upd!))
          : undefined,
        undefined,
        c.needs[2] ? b.gatherND(g, ind!) : undefined,
      ];
    },
  },
  {
    op: 'Trilu',
    attrTypes: { upper: 'int' },
    infer: (c) => {
      const x = req(c, 0);
      if (x.shape && x.shape.length < 2) c.fail('Trilu needs rank >= 2');
      return [{ dtype: x.dtype, shape: x.shape }];
    },
    forward: ([x, kT], at) => {
      const k = kT ? kT.data[0]! : 0;
      const upper = at.upper === undefined || at.upper === 1;
      const [n, m] = x!.shape.slice(-2) as [number, number];
      const o = make(x!.dtype, x!.shape, Float64Array.from(x!.data));
      for (let p = 0; p < o.data.length; p++) {
        const i = Math.floor(p / m) % n;
        const j = p % m;
        if (upper ? j - i < k : j - i > k) o.data[p] = 0;
      }
      return [o];
    },
    diff: [0],
    // The mask is linear: the gradient is masked the same way.
    vjp: (c) => [c.b.emit('Trilu', [c.gy[0]!, c.x[1]], c.attrs)[0]!],
  },
);
