import { bf16ArrayToF32, f16ArrayToF32, f32ArrayToBf16, f32ArrayToF16 } from './dtype-convert.js';
import { ValidationError } from './errors.js';

// Tensor element types by their safetensors names. 16-bit floats and fp8 are held as raw bit
// patterns (Uint16Array / Uint8Array); see dtype-convert.ts to turn them into float32.

export const DTYPES = {
  F64: { bytes: 8, array: Float64Array },
  F32: { bytes: 4, array: Float32Array },
  F16: { bytes: 2, array: Uint16Array },
  BF16: { bytes: 2, array: Uint16Array },
  F8_E4M3: { bytes: 1, array: Uint8Array },
  F8_E5M2: { bytes: 1, array: Uint8Array },
  I64: { bytes: 8, array: BigInt64Array },
  I32: { bytes: 4, array: Int32Array },
  I16: { bytes: 2, array: Int16Array },
  I8: { bytes: 1, array: Int8Array },
  U64: { bytes: 8, array: BigUint64Array },
  U32: { bytes: 4, array: Uint32Array },
  U16: { bytes: 2, array: Uint16Array },
  U8: { bytes: 1, array: Uint8Array },
  BOOL: { bytes: 1, array: Uint8Array },
} as const;

export type DType = keyof typeof DTYPES;

/** The typed array that holds a dtype's elements. */
export type DTypeArray<D extends DType = DType> = InstanceType<(typeof DTYPES)[D]['array']>;

export type TypedArray =
  | Float64Array
  | Float32Array
  | BigInt64Array
  | BigUint64Array
  | Int32Array
  | Int16Array
  | Int8Array
  | Uint32Array
  | Uint16Array
  | Uint8Array;

/** A dense row-major tensor. `data.length` equals the product of `shape` ([] is a scalar). */
export interface Tensor<D extends DType = DType> {
  dtype: D;
  shape: number[];
  data: DTypeArray<D>;
}

export function isDType(x: unknown): x is DType {
  return typeof x === 'string' && Object.hasOwn(DTYPES, x);
}

export function dtypeByteSize(dtype: DType): number {
  return DTYPES[dtype].bytes;
}

/** Number of elements of a shape; throws on negative or non-integer dimensions. */
export function shapeSize(shape: readonly number[]): number {
  let n = 1;
  for (const d of shape) {
    if (!Number.isSafeInteger(d) || d < 0) {
      throw new ValidationError(`invalid tensor dimension ${d} in shape [${shape.join(', ')}]`, {
        issues: [{ path: 'shape', message: 'dimensions must be non-negative integers' }],
        value: shape,
      });
    }
    n *= d;
  }
  return n;
}

/** Views `bytes` (little-endian) as the typed array of `dtype`, copying only when misaligned. */
export function typedArrayFromBytes<D extends DType>(dtype: D, bytes: Uint8Array): DTypeArray<D> {
  const { bytes: size, array } = DTYPES[dtype];
  let b = bytes;
  if (b.byteOffset % size !== 0) b = b.slice();
  return new array(b.buffer as ArrayBuffer, b.byteOffset, b.byteLength / size) as DTypeArray<D>;
}

/** The little-endian bytes of a typed array (a view, not a copy). */
export function bytesOf(data: ArrayBufferView): Uint8Array {
  return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
}

export function createTensor<D extends DType>(
  dtype: D,
  shape: number[],
  data?: DTypeArray<D>,
): Tensor<D> {
  const n = shapeSize(shape);
  const { array } = DTYPES[dtype];
  const values = data ?? (new array(n) as DTypeArray<D>);
  if (!(values instanceof array) || values.length !== n) {
    throw new ValidationError(
      `tensor data must be a ${array.name} of ${n} elements for ${dtype} [${shape.join(', ')}]`,
      { issues: [{ path: 'data', message: 'wrong array type or length' }] },
    );
  }
  return { dtype, shape, data: values };
}

const FLOAT_DTYPES = new Set<DType>(['F64', 'F32', 'F16', 'BF16']);

/** A floating-point tensor's values as float32 (F64 is rounded; F32 returns its own array). */
export function tensorToFloat32(tensor: Tensor): Float32Array {
  switch (tensor.dtype) {
    case 'F32':
      return tensor.data as Float32Array;
    case 'F64':
      return Float32Array.from(tensor.data as Float64Array);
    case 'F16':
      return f16ArrayToF32(tensor.data as Uint16Array);
    case 'BF16':
      return bf16ArrayToF32(tensor.data as Uint16Array);
    default:
      throw new ValidationError(`cannot convert a ${tensor.dtype} tensor to float32`, {
        issues: [{ path: 'dtype', message: `expected one of ${[...FLOAT_DTYPES].join(', ')}` }],
      });
  }
}

/** float32 values as a tensor of a floating dtype (round to nearest even when narrowing). */
export function float32ToTensor<D extends 'F64' | 'F32' | 'F16' | 'BF16'>(
  values: Float32Array,
  dtype: D,
  shape: number[] = [values.length],
): Tensor<D> {
  let data: Float64Array | Float32Array | Uint16Array;
  if (dtype === 'F32') data = values;
  else if (dtype === 'F64') data = Float64Array.from(values);
  else if (dtype === 'F16') data = f32ArrayToF16(values);
  else data = f32ArrayToBf16(values);
  return createTensor(dtype, shape, data as DTypeArray<D>);
}
