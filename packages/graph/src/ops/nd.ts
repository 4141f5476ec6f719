// Small n-d array helpers for the reference evaluator's forwards (float64 data, any dtype tag).
import { shapeSize } from '@flowgrpo/core';
import type { ElemType, HostTensor } from '../ir/types.js';

export { shapeSize };

export const make = (
  dtype: ElemType,
  shape: readonly number[],
  data?: Float64Array,
): HostTensor => ({
  dtype,
  shape: [...shape],
  data: data ?? new Float64Array(shapeSize(shape)),
});

export function strides(shape: readonly number[]): number[] {
  const s = new Array<number>(shape.length);
  let acc = 1;
  for (let i = shape.length - 1; i >= 0; i--) {
    s[i] = acc;
    acc *= shape[i]!;
  }
  return s;
}

export function broadcastShape(shapes: readonly (readonly number[])[]): number[] {
  const rank = Math.max(0, ...shapes.map((s) => s.length));
  const out: number[] = [];
  for (let i = 0; i < rank; i++) {
    let d = 1;
    for (const s of shapes) {
      const x = s[s.length - rank + i] ?? 1;
      if (x !== 1) {
        if (d !== 1 && d !== x)
          throw new Error(`cannot broadcast [${shapes.map((q) => q.join(','))}]`);
        d = x;
      }
    }
    out.push(d);
  }
  return out;
}

/** For each flat index of `out`, the flat index of the broadcast input of shape `shape`. */
export function broadcastMap(out: readonly number[], shape: readonly number[]): Int32Array {
  const n = shapeSize(out);
  const map = new Int32Array(n);
  const rank = out.length;
  const inStr = strides(shape);
  const eff = out.map((_, i) => {
    const j = i - (rank - shape.length);
    return j >= 0 && shape[j] !== 1 ? inStr[j]! : 0;
  });
  const idx = new Array<number>(rank).fill(0);
  let off = 0;
  for (let k = 0; k < n; k++) {
    map[k] = off;
    for (let a = rank - 1; a >= 0; a--) {
      idx[a]!++;
      off += eff[a]!;
      if (idx[a]! < out[a]!) break;
      off -= eff[a]! * idx[a]!;
      idx[a] = 0;
    }
  }
  return map;
}

/** Elementwise map over broadcast inputs. */
export function mapN(
  dtype: ElemType,
  xs: readonly HostTensor[],
  f: (...v: number[]) => number,
): HostTensor {
  const shape = broadcastShape(xs.map((x) => x.shape));
  const o = make(dtype, shape);
  const maps = xs.map((x) => broadcastMap(shape, x.shape));
  const vals = new Array<number>(xs.length);
  for (let k = 0; k < o.data.length; k++) {
    for (let j = 0; j < xs.length; j++) vals[j] = xs[j]!.data[maps[j]![k]!]!;
    o.data[k] = f(...vals);
  }
  return o;
}

/** Values of an integer tensor as plain numbers. */
export const ints = (t: HostTensor | undefined): number[] => (t ? Array.from(t.data) : []);

export const normAxis = (a: number, rank: number): number => (a < 0 ? a + rank : a);

/** Iterates an axis: calls f(outer, axisIndex, inner offsets) via (outer, len, inner) split. */
export function axisSplit(shape: readonly number[], axis: number): [number, number, number] {
  const outer = shapeSize(shape.slice(0, axis));
  const len = shape[axis]!;
  const inner = shapeSize(shape.slice(axis + 1));
  return [outer, len, inner];
}

export function transposeData(x: HostTensor, perm: readonly number[]): HostTensor {
  const shape = perm.map((p) => x.shape[p]!);
  const o = make(x.dtype, shape);
  const inStr = strides(x.shape);
  const eff = perm.map((p) => inStr[p]!);
  const idx = new Array<number>(shape.length).fill(0);
  let off = 0;
  for (let k = 0; k < o.data.length; k++) {
    o.data[k] = x.data[off]!;
    for (let a = shape.length - 1; a >= 0; a--) {
      idx[a]!++;
      off += eff[a]!;
      if (idx[a]! < shape[a]!) break;
      off -= eff[a]! * idx[a]!;
      idx[a] = 0;
    }
  }
  return o;
}

/** Converts float64 data to what a dtype can hold (integers truncate toward zero, bool is 0/1). */
export function castValue(x: number, dtype: ElemType): number {
  switch (dtype) {
    case 'bool':
      return x !== 0 ? 1 : 0;
    case 'int64':
    case 'int32':
    case 'int8':
    case 'uint8':
      return Math.trunc(x);
    default:
      return x;
  }
}
