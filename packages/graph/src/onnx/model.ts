// A plain, serialisable description of an ONNX model: what the graph IR exports and what the
// protobuf writer encodes. Kept free of IR details so the writer, the reader and the runtime can be
// tested on their own.

/** ONNX TensorProto.DataType values used by flowgrpo. */
export const OnnxDataType = {
  FLOAT: 1,
  UINT8: 2,
  INT8: 3,
  INT32: 6,
  INT64: 7,
  BOOL: 9,
  FLOAT16: 10,
  DOUBLE: 11,
  BFLOAT16: 16,
} as const;
export type OnnxDataType = (typeof OnnxDataType)[keyof typeof OnnxDataType];

/** A dimension: a fixed size, or a symbolic name such as 'batch' or 'seq'. */
export type OnnxDim = number | string;

export interface OnnxValueInfo {
  name: string;
  elemType: OnnxDataType;
  /** Undefined when the rank itself is unknown. */
  shape?: OnnxDim[];
}

export type OnnxAttributeValue =
  | { type: 'float'; value: number }
  | { type: 'int'; value: number | bigint }
  | { type: 'string'; value: string }
  | { type: 'tensor'; value: OnnxTensor }
  | { type: 'floats'; value: number[] }
  | { type: 'ints'; value: (number | bigint)[] }
  | { type: 'strings'; value: string[] }
  | { type: 'graph'; value: OnnxGraph };

export interface OnnxNode {
  opType: string;
  /** '' (or undefined) is the default ai.onnx domain. */
  domain?: string;
  name?: string;
  /** '' marks an omitted optional input. */
  inputs: string[];
  outputs: string[];
  attributes?: Record<string, OnnxAttributeValue>;
}

/** Where a tensor's bytes live when they are not inline: a file beside the .onnx file. */
export interface OnnxExternalData {
  location: string;
  offset: number;
  length: number;
}

export interface OnnxTensor {
  name: string;
  dataType: OnnxDataType;
  dims: number[];
  /** Little-endian raw bytes (TensorProto.raw_data), or external. Exactly one is set. */
  rawData?: Uint8Array;
  external?: OnnxExternalData;
}

export interface OnnxGraph {
  name: string;
  nodes: OnnxNode[];
  inputs: OnnxValueInfo[];
  outputs: OnnxValueInfo[];
  initializers: OnnxTensor[];
  /** Optional shape annotations of intermediate values. */
  valueInfo?: OnnxValueInfo[];
  docString?: string;
}

export interface OnnxOpsetImport {
  domain: string;
  version: number;
}

export interface OnnxModel {
  irVersion: number;
  opsetImports: OnnxOpsetImport[];
  producerName: string;
  producerVersion: string;
  graph: OnnxGraph;
  docString?: string;
  metadata?: Record<string, string>;
}

/** Opset and IR version flowgrpo writes (onnxruntime-node 1.30 loads opset <= 26, IR <= 13). */
export const DEFAULT_OPSET = 21;
export const DEFAULT_IR_VERSION = 10;
