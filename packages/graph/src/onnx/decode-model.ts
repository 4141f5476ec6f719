// ONNX ModelProto bytes → OnnxModel. Reads everything encode-model.ts writes, plus the typed
// data fields (float_data, int32_data, int64_data, double_data) other exporters use, which it
// converts to little-endian rawData. Unknown fields are skipped, so models from other tools can be
// inspected (op types, domains, opsets).

import {
  AttributeProtoField,
  AttributeType,
  DATA_LOCATION_EXTERNAL,
  DimensionField,
  GraphProtoField,
  ModelProtoField,
  NodeProtoField,
  OperatorSetIdField,
  StringStringEntryField,
  TensorProtoField,
  TensorShapeField,
  TypeProtoField,
  TypeTensorField,
  ValueInfoField,
} from './encode-model.js';
import { OnnxDecodeError } from './errors.js';
import type {
  OnnxAttributeValue,
  OnnxDataType,
  OnnxDim,
  OnnxExternalData,
  OnnxGraph,
  OnnxModel,
  OnnxNode,
  OnnxOpsetImport,
  OnnxTensor,
  OnnxValueInfo,
} from './model.js';
import { ProtoReader } from './protobuf-reader.js';
import { WireType } from './protobuf-writer.js';

function toNumber(v: number | bigint, what: string): number {
  if (typeof v === 'bigint') throw new OnnxDecodeError(`${what} ${v} is out of the safe range`);
  return v;
}

function decodeEntry(r: ProtoReader): [string, string] {
  let key = '';
  let value = '';
  while (!r.done) {
    const { field, wire } = r.next();
    if (field === StringStringEntryField.key) key = r.string();
    else if (field === StringStringEntryField.value) value = r.string();
    else r.skip(wire);
  }
  return [key, value];
}

function decodeTensor(r: ProtoReader): OnnxTensor {
  const F = TensorProtoField;
  const dims: number[] = [];
  let dataType = 0;
  let name = '';
  let rawData: Uint8Array | undefined;
  let location = 0;
  const ext = new Map<string, string>();
  const floats: number[] = [];
  const doubles: number[] = [];
  const int32s: number[] = [];
  const int64s: (number | bigint)[] = [];
  while (!r.done) {
    const { field, wire } = r.next();
    switch (field) {
      case F.dims:
        r.repeated(wire, (x) => toNumber(x.int64(), 'dim'), dims);
        break;
      case F.dataType:
        dataType = toNumber(r.int64(), 'data_type');
        break;
      case F.name:
        name = r.string();
        break;
      case F.rawData:
        rawData = r.bytes();
        break;
      case F.externalData: {
        const [k, v] = decodeEntry(r.message());
        ext.set(k, v);
        break;
      }
      case F.dataLocation:
        location = toNumber(r.int64(), 'data_location');
        break;
      case F.floatData:
        r.repeated(wire, (x) => x.float(), floats);
        break;
      case F.doubleData:
        r.repeated(wire, (x) => x.double(), doubles);
        break;
      case F.int32Data:
        r.repeated(wire, (x) => toNumber(x.int64(), 'int32_data'), int32s);
        break;
      case F.int64Data:
        r.repeated(wire, (x) => x.int64(), int64s);
        break;
      default:
        r.skip(wire);
    }
  }
  const tensor: OnnxTensor = { name, dataType: dataType as OnnxDataType, dims };
  if (location === DATA_LOCATION_EXTERNAL) {
    const loc = ext.get('location');
    if (loc === undefined)
      throw new OnnxDecodeError(`tensor "${name}": external data without location`);
    const external: OnnxExternalData = {
      location: loc,
      offset: Number(ext.get('offset') ?? 0),
      length: Number(ext.get('length') ?? Number.NaN),
    };
    tensor.external = external;
  } else if (rawData !== undefined) {
    // Copy (into a plain Uint8Array even when the input is a Buffer): a view into the model
    // bytes would keep the whole file alive and alias it.
    tensor.rawData = new Uint8Array(rawData);
  } else {
    tensor.rawData = typedFieldsToRaw(dataType, { floats, doubles, int32s, int64s });
  }
  return tensor;
}

function typedFieldsToRaw(
  dataType: number,
  f: { floats: number[]; doubles: number[]; int32s: number[]; int64s: (number | bigint)[] },
): Uint8Array {
  if (f.floats.length) return new Uint8Array(Float32Array.from(f.floats).buffer);
  if (f.doubles.length) return new Uint8Array(Float64Array.from(f.doubles).buffer);
  if (f.int64s.length) return new Uint8Array(BigInt64Array.from(f.int64s, BigInt).buffer);
  if (f.int32s.length) {
    // int32_data also carries the narrow types, one element per entry.
    switch (dataType) {
      case 2:
      case 9:
        return Uint8Array.from(f.int32s);
      case 3:
        return new Uint8Array(Int8Array.from(f.int32s).buffer);
      case 10:
      case 16:
        return new Uint8Array(Uint16Array.from(f.int32s).buffer);
      default:
        return new Uint8Array(Int32Array.from(f.int32s).buffer);
    }
  }
  return new Uint8Array(0);
}

function decodeValueInfo(r: ProtoReader): OnnxValueInfo {
  let name = '';
  let elemType = 0;
  let shape: OnnxDim[] | undefined;
  while (!r.done) {
    const { field, wire } = r.next();
    if (field === ValueInfoField.name) {
      name = r.string();
    } else if (field === ValueInfoField.type) {
      const t = r.message();
      while (!t.done) {
        const tf = t.next();
        if (tf.field !== TypeProtoField.tensorType) {
          t.skip(tf.wire);
          continue;
        }
        const tt = t.message();
        while (!tt.done) {
          const f = tt.next();
          if (f.field === TypeTensorField.elemType) {
            elemType = toNumber(tt.int64(), 'elem_type');
          } else if (f.field === TypeTensorField.shape) {
            shape = [];
            const s = tt.message();
            while (!s.done) {
              const sf = s.next();
              if (sf.field !== TensorShapeField.dim) {
                s.skip(sf.wire);
                continue;
              }
              const d = s.message();
              let dim: OnnxDim = '';
              while (!d.done) {
                const df = d.next();
                if (df.field === DimensionField.dimValue) dim = toNumber(d.int64(), 'dim_value');
                else if (df.field === DimensionField.dimParam) dim = d.string();
                else d.skip(df.wire);
              }
              shape.push(dim);
            }
          } else {
            tt.skip(f.wire);
          }
        }
      }
    } else {
      r.skip(wire);
    }
  }
  const v: OnnxValueInfo = { name, elemType: elemType as OnnxDataType };
  if (shape !== undefined) v.shape = shape;
  return v;
}

function decodeAttribute(r: ProtoReader): [string, OnnxAttributeValue] {
  const F = AttributeProtoField;
  let name = '';
  let type = 0;
  let f: number | undefined;
  let i: number | bigint | undefined;
  let s: string | undefined;
  let t: OnnxTensor | undefined;
  let g: OnnxGraph | undefined;
  const floats: number[] = [];
  const ints: (number | bigint)[] = [];
  const strings: string[] = [];
  while (!r.done) {
    const { field, wire } = r.next();
    switch (field) {
      case F.name:
        name = r.string();
        break;
      case F.type:
        type = toNumber(r.int64(), 'attribute type');
        break;
      case F.f:
        f = r.float();
        break;
      case F.i:
        i = r.int64();
        break;
      case F.s:
        s = r.string();
        break;
      case F.t:
        t = decodeTensor(r.message());
        break;
      case F.g:
        g = decodeGraph(r.message());
        break;
      case F.floats:
        r.repeated(wire, (x) => x.float(), floats);
        break;
      case F.ints:
        r.repeated(wire, (x) => x.int64(), ints);
        break;
      case F.strings:
        strings.push(r.string());
        break;
      default:
        r.skip(wire);
    }
  }
  const A = AttributeType;
  switch (type) {
    case A.float:
      return [name, { type: 'float', value: f ?? 0 }];
    case A.int:
      return [name, { type: 'int', value: i ?? 0 }];
    case A.string:
      return [name, { type: 'string', value: s ?? '' }];
    case A.tensor:
      if (!t) throw new OnnxDecodeError(`attribute "${name}": TENSOR without t`);
      return [name, { type: 'tensor', value: t }];
    case A.graph:
      if (!g) throw new OnnxDecodeError(`attribute "${name}": GRAPH without g`);
      return [name, { type: 'graph', value: g }];
    case A.floats:
      return [name, { type: 'floats', value: floats }];
    case A.ints:
      return [name, { type: 'ints', value: ints }];
    case A.strings:
      return [name, { type: 'strings', value: strings }];
    default:
      throw new OnnxDecodeError(`attribute "${name}": unsupported attribute type ${type}`);
  }
}

function decodeNode(r: ProtoReader): OnnxNode {
  const F = NodeProtoField;
  const node: OnnxNode = { opType: '', inputs: [], outputs: [] };
  const attributes: Record<string, OnnxAttributeValue> = {};
  let hasAttributes = false;
  while (!r.done) {
    const { field, wire } = r.next();
    switch (field) {
      case F.input:
        node.inputs.push(r.string());
        break;
      case F.output:
        node.outputs.push(r.string());
        break;
      case F.name:
        node.name = r.string();
        break;
      case F.opType:
        node.opType = r.string();
        break;
      case F.domain:
        node.domain = r.string();
        break;
      case F.attribute: {
        const [name, value] = decodeAttribute(r.message());
        attributes[name] = value;
        hasAttributes = true;
        break;
      }
      default:
        r.skip(wire);
    }
  }
  if (hasAttributes) node.attributes = attributes;
  return node;
}

function decodeGraph(r: ProtoReader): OnnxGraph {
  const F = GraphProtoField;
  const g: OnnxGraph = { name: '', nodes: [], inputs: [], outputs: [], initializers: [] };
  const valueInfo: OnnxValueInfo[] = [];
  while (!r.done) {
    const { field, wire } = r.next();
    switch (field) {
      case F.node:
        g.nodes.push(decodeNode(r.message()));
        break;
      case F.name:
        g.name = r.string();
        break;
      case F.initializer:
        g.initializers.push(decodeTensor(r.message()));
        break;
      case F.docString:
        g.docString = r.string();
        break;
      case F.input:
        g.inputs.push(decodeValueInfo(r.message()));
        break;
      case F.output:
        g.outputs.push(decodeValueInfo(r.message()));
        break;
      case F.valueInfo:
        valueInfo.push(decodeValueInfo(r.message()));
        break;
      default:
        r.skip(wire);
    }
  }
  if (valueInfo.length) g.valueInfo = valueInfo;
  return g;
}

/** Decode an ONNX ModelProto. Throws OnnxDecodeError on malformed bytes. */
export function decodeModel(bytes: Uint8Array): OnnxModel {
  const F = ModelProtoField;
  const r = new ProtoReader(bytes);
  const model: OnnxModel = {
    irVersion: 0,
    opsetImports: [],
    producerName: '',
    producerVersion: '',
    graph: { name: '', nodes: [], inputs: [], outputs: [], initializers: [] },
  };
  let sawGraph = false;
  const metadata: Record<string, string> = {};
  let hasMetadata = false;
  while (!r.done) {
    const { field, wire } = r.next();
    switch (field) {
      case F.irVersion:
        model.irVersion = toNumber(r.int64(), 'ir_version');
        break;
      case F.producerName:
        model.producerName = r.string();
        break;
      case F.producerVersion:
        model.producerVersion = r.string();
        break;
      case F.docString:
        model.docString = r.string();
        break;
      case F.graph:
        model.graph = decodeGraph(r.message());
        sawGraph = true;
        break;
      case F.opsetImport: {
        const o = r.message();
        const opset: OnnxOpsetImport = { domain: '', version: 0 };
        while (!o.done) {
          const of = o.next();
          if (of.field === OperatorSetIdField.domain) opset.domain = o.string();
          else if (of.field === OperatorSetIdField.version)
            opset.version = toNumber(o.int64(), 'opset version');
          else o.skip(of.wire);
        }
        model.opsetImports.push(opset);
        break;
      }
      case F.metadataProps: {
        const [k, v] = decodeEntry(r.message());
        metadata[k] = v;
        hasMetadata = true;
        break;
      }
      default:
        if (wire > WireType.I32)
          throw new OnnxDecodeError(`bad wire type ${wire} (field ${field})`);
        r.skip(wire);
    }
  }
  if (!sawGraph) throw new OnnxDecodeError('no graph in the model (not an ONNX ModelProto?)');
  if (hasMetadata) model.metadata = metadata;
  return model;
}
