import { OnnxDataType } from './model.js';

const BYTES: Record<number, number> = {
  [OnnxDataType.FLOAT]: 4,
  [OnnxDataType.UINT8]: 1,
  [OnnxDataType.INT8]: 1,
  [OnnxDataType.INT32]: 4,
  [OnnxDataType.INT64]: 8,
  [OnnxDataType.BOOL]: 1,
  [OnnxDataType.FLOAT16]: 2,
  [OnnxDataType.DOUBLE]: 8,
  [OnnxDataType.BFLOAT16]: 2,
};

/** Bytes per element of an ONNX data type, or undefined for types flowgrpo does not write. */
export function onnxDataTypeSize(dataType: number): number | undefined {
  return BYTES[dataType];
}

const NAMES: Record<number, string> = {
  [OnnxDataType.FLOAT]: 'float32',
  [OnnxDataType.UINT8]: 'uint8',
  [OnnxDataType.INT8]: 'int8',
  [OnnxDataType.INT32]: 'int32',
  [OnnxDataType.INT64]: 'int64',
  [OnnxDataType.BOOL]: 'bool',
  [OnnxDataType.FLOAT16]: 'float16',
  [OnnxDataType.DOUBLE]: 'float64',
  [OnnxDataType.BFLOAT16]: 'bfloat16',
};

/** The ONNX Runtime JS tensor type name of an ONNX data type ('float32', 'int64', ...). */
export function onnxDataTypeName(dataType: number): string {
  return NAMES[dataType] ?? `onnx-type-${dataType}`;
}
