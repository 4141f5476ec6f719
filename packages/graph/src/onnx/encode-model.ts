// OnnxModel → ONNX ModelProto bytes. Field numbers are those of onnx/onnx.proto (proto2); the
// tables below name every number used so the reader and the writer share one source.

import { shapeSize } from '@flowgrpo/core';
import { onnxDataTypeSize } from './data-type.js';
import { OnnxEncodeError, OnnxModelTooLargeError } from './errors.js';
import type {
  OnnxAttributeValue,
  OnnxGraph,
  OnnxModel,
  OnnxNode,
  OnnxTensor,
  OnnxValueInfo,
} from './model.js';
import { concatChunks, ProtoWriter } from './protobuf-writer.js';

export const ModelProtoField = {
  irVersion: 1,
  producerName: 2,
  producerVersion: 3,
  domain: 4,
  modelVersion: 5,
  docString: 6,
  graph: 7,
  opsetImport: 8,
  metadataProps: 14,
} as const;

export const OperatorSetIdField = { domain: 1, version: 2 } as const;
export const StringStringEntryField = { key: 1, value: 2 } as const;

export const GraphProtoField = {
  node: 1,
  name: 2,
  initializer: 5,
  docString: 10,
  input: 11,
  output: 12,
  valueInfo: 13,
} as const;

export const NodeProtoField = {
  input: 1,
  output: 2,
  name: 3,
  opType: 4,
  attribute: 5,
  docString: 6,
  domain: 7,
} as const;

export const AttributeProtoField = {
  name: 1,
  f: 2,
  i: 3,
  s: 4,
  t: 5,
  g: 6,
  floats: 7,
  ints: 8,
  strings: 9,
  tensors: 10,
  graphs: 11,
  docString: 13,
  type: 20,
} as const;

/** AttributeProto.AttributeType. */
export const AttributeType = {
  float: 1,
  int: 2,
  string: 3,
  tensor: 4,
  graph: 5,
  floats: 6,
  ints: 7,
  strings: 8,
} as const;

export const TensorProtoField = {
  dims: 1,
  dataType: 2,
  floatData: 4,
  int32Data: 5,
  int64Data: 7,
  name: 8,
  rawData: 9,
  doubleData: 10,
  docString: 12,
  externalData: 13,
  dataLocation: 14,
} as const;

/** TensorProto.DataLocation.EXTERNAL. */
export const DATA_LOCATION_EXTERNAL = 1;

export const ValueInfoField = { name: 1, type: 2, docString: 3 } as const;
export const TypeProtoField = { tensorType: 1 } as const;
export const TypeTensorField = { elemType: 1, shape: 2 } as const;
export const TensorShapeField = { dim: 1 } as const;
export const DimensionField = { dimValue: 1, dimParam: 2 } as const;

/** protobuf's hard limit on one serialized message (2^31 − 1 bytes). */
export const PROTOBUF_LIMIT = 0x7fffffff;

function entry(key: string, value: string): ProtoWriter {
  return new ProtoWriter()
    .string(StringStringEntryField.key, key)
    .string(StringStringEntryField.value, value);
}

export function encodeTensor(t: OnnxTensor, where = `tensor "${t.name}"`): ProtoWriter {
  if ((t.rawData === undefined) === (t.external === undefined)) {
    throw new OnnxEncodeError('exactly one of rawData and external must be set', { where });
  }
  const elemSize = onnxDataTypeSize(t.dataType);
  if (elemSize === undefined) {
    throw new OnnxEncodeError(`unsupported data type ${t.dataType}`, { where });
  }
  const expected = shapeSize(t.dims) * elemSize;
  const actual = t.rawData?.byteLength ?? t.external!.length;
  if (actual !== expected) {
    throw new OnnxEncodeError(
      `dims [${t.dims.join(', ')}] need ${expected} bytes, the data has ${actual}`,
      { where },
    );
  }
  const w = new ProtoWriter();
  for (const d of t.dims) w.int64(TensorProtoField.dims, d);
  w.int64(TensorProtoField.dataType, t.dataType);
  w.string(TensorProtoField.name, t.name);
  if (t.rawData !== undefined) {
    w.bytes(TensorProtoField.rawData, t.rawData);
  } else {
    const ext = t.external!;
    w.message(TensorProtoField.externalData, entry('location', ext.location));
    w.message(TensorProtoField.externalData, entry('offset', String(ext.offset)));
    w.message(TensorProtoField.externalData, entry('length', String(ext.length)));
    w.int64(TensorProtoField.dataLocation, DATA_LOCATION_EXTERNAL);
  }
  return w;
}

function encodeValueInfo(v: OnnxValueInfo): ProtoWriter {
  const tensorType = new ProtoWriter().int64(TypeTensorField.elemType, v.elemType);
  if (v.shape !== undefined) {
    const shape = new ProtoWriter();
    for (const d of v.shape) {
      const dim = new ProtoWriter();
      if (typeof d === 'number') dim.int64(DimensionField.dimValue, d);
      else dim.string(DimensionField.dimParam, d);
      shape.message(TensorShapeField.dim, dim);
    }
    tensorType.message(TypeTensorField.shape, shape);
  }
  return new ProtoWriter()
    .string(ValueInfoField.name, v.name)
    .message(ValueInfoField.type, new ProtoWriter().message(TypeProtoField.tensorType, tensorType));
}

function encodeAttribute(name: string, a: OnnxAttributeValue, where: string): ProtoWriter {
  const F = AttributeProtoField;
  const w = new ProtoWriter().string(F.name, name);
  switch (a.type) {
    case 'float':
      w.float(F.f, a.value);
      break;
    case 'int':
      w.int64(F.i, a.value);
      break;
    case 'string':
      w.string(F.s, a.value);
      break;
    case 'tensor':
      w.message(F.t, encodeTensor(a.value, `${where} attribute "${name}"`));
      break;
    case 'graph':
      w.message(F.g, encodeGraph(a.value));
      break;
    case 'floats':
      for (const v of a.value) w.float(F.floats, v);
      break;
    case 'ints':
      for (const v of a.value) w.int64(F.ints, v);
      break;
    case 'strings':
      for (const v of a.value) w.string(F.strings, v);
      break;
    default:
      throw new OnnxEncodeError(`unknown attribute type ${(a as { type: string }).type}`, {
        where: `${where} attribute "${name}"`,
      });
  }
  w.int64(F.type, AttributeType[a.type]);
  return w;
}

function encodeNode(n: OnnxNode, index: number): ProtoWriter {
  const where = `node ${n.name ?? index} (${n.opType})`;
  const w = new ProtoWriter();
  for (const i of n.inputs) w.string(NodeProtoField.input, i);
  for (const o of n.outputs) w.string(NodeProtoField.output, o);
  if (n.name) w.string(NodeProtoField.name, n.name);
  w.string(NodeProtoField.opType, n.opType);
  for (const [name, value] of Object.entries(n.attributes ?? {})) {
    w.message(NodeProtoField.attribute, encodeAttribute(name, value, where));
  }
  if (n.domain) w.string(NodeProtoField.domain, n.domain);
  return w;
}

export function encodeGraph(g: OnnxGraph): ProtoWriter {
  const w = new ProtoWriter();
  g.nodes.forEach((n, i) => {
    w.message(GraphProtoField.node, encodeNode(n, i));
  });
  w.string(GraphProtoField.name, g.name);
  for (const t of g.initializers) {
    w.message(GraphProtoField.initializer, encodeTensor(t, `initializer "${t.name}"`));
  }
  if (g.docString) w.string(GraphProtoField.docString, g.docString);
  for (const v of g.inputs) w.message(GraphProtoField.input, encodeValueInfo(v));
  for (const v of g.outputs) w.message(GraphProtoField.output, encodeValueInfo(v));
  for (const v of g.valueInfo ?? []) w.message(GraphProtoField.valueInfo, encodeValueInfo(v));
  return w;
}

/**
 * Encode a model as a list of chunks whose tensor payloads alias the model's `rawData` arrays.
 * Throws OnnxModelTooLargeError past the protobuf limit (move initializers to external data).
 */
export function encodeModelChunks(model: OnnxModel): { chunks: Uint8Array[]; length: number } {
  const F = ModelProtoField;
  const w = new ProtoWriter()
    .int64(F.irVersion, model.irVersion)
    .string(F.producerName, model.producerName)
    .string(F.producerVersion, model.producerVersion);
  if (model.docString) w.string(F.docString, model.docString);
  w.message(F.graph, encodeGraph(model.graph));
  for (const o of model.opsetImports) {
    const opset = new ProtoWriter();
    if (o.domain) opset.string(OperatorSetIdField.domain, o.domain);
    opset.int64(OperatorSetIdField.version, o.version);
    w.message(F.opsetImport, opset);
  }
  for (const [k, v] of Object.entries(model.metadata ?? {})) {
    w.message(F.metadataProps, entry(k, v));
  }
  const length = w.length;
  if (length > PROTOBUF_LIMIT)
    throw new OnnxModelTooLargeError({ bytes: length, limit: PROTOBUF_LIMIT });
  return { chunks: w.finish(), length };
}

/** Encode a model into one buffer (fine for tests and small graphs; files use writeModel). */
export function encodeModel(model: OnnxModel): Uint8Array {
  return concatChunks(encodeModelChunks(model).chunks);
}
