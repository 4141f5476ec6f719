// Build OnnxTensor initializers from typed arrays without copying their bytes.

import { shapeSize } from '@flowgrpo/core';
import { OnnxEncodeError } from './errors.js';
import { OnnxDataType, type OnnxTensor } from './model.js';

export type OnnxTypedArray =
  | Float32Array
  | Float64Array
  | Int32Array
  | BigInt64Array
  | Int8Array
  | Uint8Array;

function dataTypeOf(data: OnnxTypedArray): OnnxDataType {
  if (data instanceof Float32Array) return OnnxDataType.FLOAT;
  if (data instanceof Float64Array) return OnnxDataType.DOUBLE;
  if (data instanceof Int32Array) return OnnxDataType.INT32;
  if (data instanceof BigInt64Array) return OnnxDataType.INT64;
  if (data instanceof Int8Array) return OnnxDataType.INT8;
  return OnnxDataType.UINT8;
}

/**
 * An initializer over `data`'s memory (a view, not a copy: do not mutate `data` before the model
 * is written). `dataType` overrides the inferred type, e.g. FLOAT16/BFLOAT16 over a Uint16Array's
 * bytes passed as Uint8Array, or BOOL over a Uint8Array.
 */
export function onnxTensor(
  name: string,
  data: OnnxTypedArray | Uint16Array,
  dims: number[],
  dataType?: OnnxDataType,
): OnnxTensor {
  const dt =
    dataType ??
    (data instanceof Uint16Array ? OnnxDataType.FLOAT16 : dataTypeOf(data as OnnxTypedArray));
  if (shapeSize(dims) !== data.length && dataType === undefined) {
    throw new OnnxEncodeError(`dims [${dims.join(', ')}] do not match ${data.length} elements`, {
      where: `tensor "${name}"`,
    });
  }
  return {
    name,
    dataType: dt,
    dims: [...dims],
    rawData: new Uint8Array(data.buffer, data.byteOffset, data.byteLength),
  };
}
