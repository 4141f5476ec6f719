// Export of a graph to the plain ONNX model description (src/onnx/model.ts): standard ai.onnx ops
// only, unique node and value names, dead code dropped, constants written as initializers.
import {
  DEFAULT_IR_VERSION,
  DEFAULT_OPSET,
  type OnnxAttributeValue,
  OnnxDataType,
  type OnnxExternalData,
  type OnnxModel,
  type OnnxNode,
  type OnnxTensor,
  type OnnxValueInfo,
} from '../onnx/model.js';
import type { AttrType } from '../ops/op.js';
import { OPS } from '../ops/registry.js';
import { GraphError } from './errors.js';
import type { Graph, Value } from './graph.js';
import { tensorBytes } from './tensor.js';
import type { AttrValue, ElemType, HostTensor } from './types.js';

export const ONNX_DTYPE: Readonly<Record<ElemType, OnnxDataType>> = {
  float32: OnnxDataType.FLOAT,
  float16: OnnxDataType.FLOAT16,
  bfloat16: OnnxDataType.BFLOAT16,
  float64: OnnxDataType.DOUBLE,
  int64: OnnxDataType.INT64,
  int32: OnnxDataType.INT32,
  int8: OnnxDataType.INT8,
  uint8: OnnxDataType.UINT8,
  bool: OnnxDataType.BOOL,
};

export interface ExportOptions {
  opset?: number;
  irVersion?: number;
  producerVersion?: string;
  docString?: string;
  metadata?: Record<string, string>;
  /**
   * Where initializers made with `{ external: true }` go (e.g. a WeightsFileWriter over
   * weights.data); without it they are inlined (writeModel may still move large ones out).
   */
  weights?: { append(bytes: Uint8Array): OnnxExternalData };
}

// The same tensor exported twice yields the same byte array, so a weights writer that
// deduplicates by memory stores it once for every graph.
const byteCache = new WeakMap<HostTensor, Uint8Array>();
const bytesOf = (t: HostTensor): Uint8Array => {
  let bytes = byteCache.get(t);
  if (!bytes) {
    bytes = tensorBytes(t);
    byteCache.set(t, bytes);
  }
  return bytes;
};

function onnxTensor(name: string, t: HostTensor): OnnxTensor {
  return { name, dataType: ONNX_DTYPE[t.dtype], dims: [...t.shape], rawData: bytesOf(t) };
}

function attribute(
  node: string,
  key: string,
  v: AttrValue,
  type: AttrType | undefined,
): OnnxAttributeValue {
  const t =
    type ??
    (typeof v === 'string'
      ? 'string'
      : typeof v === 'number'
        ? Number.isInteger(v)
          ? 'int'
          : 'float'
        : undefined);
  switch (t) {
    case 'int':
    case 'float':
      return { type: t, value: v as number };
    case 'string':
      return { type: 'string', value: v as string };
    case 'ints':
    case 'floats':
      return { type: t, value: [...(v as number[])] };
    case 'dtype':
      return { type: 'int', value: ONNX_DTYPE[v as ElemType] };
    case 'tensor':
      return { type: 'tensor', value: onnxTensor('', v as HostTensor) };
    default:
      throw new GraphError(`attribute '${key}' has no declared ONNX type`, { node });
  }
}

const info = (v: Value): OnnxValueInfo => ({
  name: v.name,
  elemType: ONNX_DTYPE[v.dtype],
  ...(v.shape && { shape: [...v.shape] }),
});

/** The graph's ONNX description; nodes not needed for the outputs are left out. */
export function toOnnxModel(graph: Graph, options: ExportOptions = {}): OnnxModel {
  if (graph.outputs.length === 0) throw new GraphError(`graph '${graph.name}' has no outputs`);
  const nodes = graph.nodesFor(graph.outputs);
  const used = new Set<Value>(graph.outputs);
  for (const n of nodes) for (const v of n.inputs) if (v) used.add(v);
  const initializers: OnnxTensor[] = [];
  for (const v of graph.initializers) {
    if (!used.has(v)) continue;
    if (v.external) {
      initializers.push({
        name: v.name,
        dataType: ONNX_DTYPE[v.dtype],
        dims: v.shape as number[],
        external: v.external,
      });
    } else if (v.preferExternal && options.weights) {
      const external = options.weights.append(bytesOf(v.data!));
      initializers.push({
        name: v.name,
        dataType: ONNX_DTYPE[v.dtype],
        dims: [...v.data!.shape],
        external,
      });
    } else initializers.push(onnxTensor(v.name, v.data!));
  }
  for (const v of used) if (v.kind === 'constant') initializers.push(onnxTensor(v.name, v.data!));
  const onnxNodes: OnnxNode[] = nodes.map((n) => {
    const inputs = n.inputs.map((v) => v?.name ?? '');
    while (inputs.length > 0 && inputs[inputs.length - 1] === '') inputs.pop();
    const types = OPS[n.op]!.attrTypes ?? {};
    const attributes = Object.fromEntries(
      Object.entries(n.attrs).map(([k, v]) => [k, attribute(n.name, k, v, types[k])]),
    );
    return {
      opType: n.op,
      domain: '',
      name: n.name,
      inputs,
      outputs: n.outputs.map((o) => o.name),
      attributes,
    };
  });
  return {
    irVersion: options.irVersion ?? DEFAULT_IR_VERSION,
    opsetImports: [{ domain: '', version: options.opset ?? DEFAULT_OPSET }],
    producerName: 'flowgrpo',
    producerVersion: options.producerVersion ?? '0.1.0',
    graph: {
      name: graph.name,
      nodes: onnxNodes,
      inputs: graph.inputs.map(info),
      outputs: graph.outputs.map(info),
      initializers,
    },
    ...(options.docString !== undefined && { docString: options.docString }),
    ...(options.metadata && { metadata: options.metadata }),
  };
}
