// Host tensors for the reference evaluator, constants and initializers, and their byte layouts.
import { shapeSize } from '@flowgrpo/core';
import { GraphError } from './errors.js';
import type { ElemType, HostTensor } from './types.js';

export type TensorInput =
  | ArrayLike<number>
  | BigInt64Array
  | readonly bigint[]
  | readonly boolean[]
  | number
  | bigint;

/** A host tensor; integer inputs may be bigint, booleans become 0/1. */
export function tensor(dtype: ElemType, shape: readonly number[], values: TensorInput): HostTensor {
  const n = shapeSize(shape);
  const data = new Float64Array(n);
  if (typeof values === 'number' || typeof values === 'bigint') data.fill(Number(values));
  else {
    if (values.length !== n) {
      throw new GraphError(
        `tensor of shape [${shape.join(', ')}] needs ${n} values, got ${values.length}`,
      );
    }
    for (let i = 0; i < n; i++) data[i] = Number(values[i]);
  }
  return { dtype, shape: [...shape], data };
}

export const BYTES_PER_ELEMENT: Readonly<Record<ElemType, number>> = {
  float32: 4,
  float16: 2,
  bfloat16: 2,
  float64: 8,
  int64: 8,
  int32: 4,
  int8: 1,
  uint8: 1,
  bool: 1,
};

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** IEEE half from a number, round-to-nearest-even. */
export function toFloat16Bits(x: number): number {
  f32[0] = x;
  const b = u32[0]!;
  const sign = (b >>> 16) & 0x8000;
  const exp = (b >>> 23) & 0xff;
  let mant = b & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
  const e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    const half = 1 << (shift - 1);
    let m = mant >>> shift;
    const rest = mant & ((1 << shift) - 1);
    if (rest > half || (rest === half && m & 1)) m++;
    return sign | m;
  }
  let h = sign | (e << 10) | (mant >>> 13);
  const rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest === 0x1000 && h & 1)) h++;
  return h;
}

export function fromFloat16Bits(h: number): number {
  const s = h & 0x8000 ? -1 : 1;
  const e = (h >>> 10) & 0x1f;
  const m = h & 0x3ff;
  if (e === 0) return s * m * 2 ** -24;
  if (e === 0x1f) return m ? Number.NaN : s * Number.POSITIVE_INFINITY;
  return s * (1 + m / 1024) * 2 ** (e - 15);
}

/** Little-endian bytes of a tensor in its dtype (what ONNX raw_data and ORT feeds hold). */
export function tensorBytes(t: HostTensor): Uint8Array {
  const n = t.data.length;
  const d = t.data;
  switch (t.dtype) {
    case 'float32':
      return new Uint8Array(Float32Array.from(d).buffer);
    case 'float64':
      return new Uint8Array(Float64Array.from(d).buffer);
    case 'int32':
      return new Uint8Array(Int32Array.from(d).buffer);
    case 'int64': {
      const out = new BigInt64Array(n);
      for (let i = 0; i < n; i++) out[i] = BigInt(Math.trunc(d[i]!));
      return new Uint8Array(out.buffer);
    }
    case 'int8':
      return new Uint8Array(Int8Array.from(d).buffer);
    case 'uint8':
      return Uint8Array.from(d);
    case 'bool':
      return Uint8Array.from(d, (x) => (x ? 1 : 0));
    case 'float16':
      return new Uint8Array(Uint16Array.from(d, toFloat16Bits).buffer);
    case 'bfloat16': {
      const out = new Uint16Array(n);
      for (let i = 0; i < n; i++) {
        f32[0] = d[i]!;
        const b = u32[0]!;
        out[i] = Number.isNaN(d[i]) ? 0x7fc0 : (b + 0x7fff + ((b >>> 16) & 1)) >>> 16;
      }
      return new Uint8Array(out.buffer);
    }
  }
}

/** The typed array ONNX Runtime expects for a dtype ('float16' as Uint16Array bits). */
export function toTypedArray(
  t: HostTensor,
): Float32Array | Float64Array | Int32Array | BigInt64Array | Int8Array | Uint8Array | Uint16Array {
  const bytes = tensorBytes(t);
  switch (t.dtype) {
    case 'float32':
      return new Float32Array(bytes.buffer);
    case 'float64':
      return new Float64Array(bytes.buffer);
    case 'int32':
      return new Int32Array(bytes.buffer);
    case 'int64':
      return new BigInt64Array(bytes.buffer);
    case 'int8':
      return new Int8Array(bytes.buffer);
    case 'float16':
    case 'bfloat16':
      return new Uint16Array(bytes.buffer);
    default:
      return bytes;
  }
}
