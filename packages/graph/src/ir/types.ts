// The IR's vocabulary: element types, symbolic shapes, host tensors and attribute values.

export type ElemType =
  | 'float32'
  | 'float16'
  | 'bfloat16'
  | 'float64'
  | 'int64'
  | 'int32'
  | 'int8'
  | 'uint8'
  | 'bool';

/** A dimension: a fixed size, or a symbolic name ('batch', 'seq') bound when the graph runs. */
export type Dim = number | string;
/** A value's shape; `undefined` where even the rank is unknown. */
export type Shape = readonly Dim[];

export const FLOAT_DTYPES: readonly ElemType[] = ['float32', 'float16', 'bfloat16', 'float64'];
export const isFloat = (d: ElemType): boolean => FLOAT_DTYPES.includes(d);

/**
 * A host tensor as the reference evaluator sees it: every element type is held in a Float64Array
 * (floats are computed in float64 whatever their dtype; int64 is exact up to 2^53; bool is 0/1).
 */
export interface HostTensor {
  readonly dtype: ElemType;
  readonly shape: readonly number[];
  readonly data: Float64Array;
}

/** Node attribute values; their ONNX types come from each op's `attrTypes`. */
export type AttrValue = number | string | readonly number[] | readonly string[] | HostTensor;
export type Attrs = Readonly<Record<string, AttrValue>>;

/** Where an initializer's bytes live when they are not inline (e.g. a shared weights.data). */
export interface ExternalRef {
  location: string;
  offset: number;
  length: number;
}
