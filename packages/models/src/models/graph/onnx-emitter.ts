import {
  type OnnxAttributeValue,
  OnnxDataType,
  type OnnxGraph,
  type OnnxNode,
  type OnnxTensor,
  type OnnxValueInfo,
  onnxTensor,
} from '@flowgrpo/graph';

// A small writer of raw ONNX nodes, for the inference graphs: they use com.microsoft contrib ops
// and a Loop with a body graph, which the differentiable IR (@flowgrpo/graph's GraphBuilder,
// standard ops only) does not model and does not need to — nothing differentiates these graphs.
// Every value name is unique across the main graph and its subgraphs (ONNX requires it for
// outer-scope references), so one name counter is shared by a graph and the bodies it holds.

export const MS_DOMAIN = 'com.microsoft';

export type Attr =
  | number
  | string
  | number[]
  | { floats: number[] }
  | { float: number }
  | { tensor: OnnxTensor }
  | { graph: OnnxGraph };

function attribute(v: Attr): OnnxAttributeValue {
  if (typeof v === 'number')
    return Number.isInteger(v) ? { type: 'int', value: v } : { type: 'float', value: v };
  if (typeof v === 'string') return { type: 'string', value: v };
  if (Array.isArray(v)) return { type: 'ints', value: v };
  if ('floats' in v) return { type: 'floats', value: v.floats };
  if ('float' in v) return { type: 'float', value: v.float };
  if ('tensor' in v) return { type: 'tensor', value: v.tensor };
  return { type: 'graph', value: v.graph };
}

interface NameSource {
  next(hint: string): string;
}

export class OnnxEmitter {
  readonly nodes: OnnxNode[] = [];
  readonly initializers: OnnxTensor[] = [];
  readonly inputs: OnnxValueInfo[] = [];
  readonly outputs: OnnxValueInfo[] = [];
  readonly #names: NameSource;
  readonly #prefix: string;

  constructor(prefix = '', names?: NameSource) {
    this.#prefix = prefix;
    let n = 0;
    this.#names = names ?? { next: (hint) => `${hint}_${n++}` };
  }

  /** A fresh value name (unique in this graph and every body that shares the counter). */
  name(hint: string): string {
    return this.#names.next(`${this.#prefix}${hint}`);
  }

  /** An emitter for a subgraph (Loop / If body) sharing this graph's name counter. */
  body(prefix: string): OnnxEmitter {
    return new OnnxEmitter(prefix, this.#names);
  }

  input(name: string, elemType: OnnxDataType, shape: (number | string)[]): string {
    this.inputs.push({ name, elemType, shape });
    return name;
  }

  /**
   * Declares `value` as a graph output named `name` (default: the value's own name; an Identity
   * node renames it otherwise).
   */
  output(value: string, elemType: OnnxDataType, shape?: (number | string)[], name = value): void {
    if (value !== name) this.nodes.push({ opType: 'Identity', inputs: [value], outputs: [name] });
    this.outputs.push({ name, elemType, ...(shape && { shape }) });
  }

  /** Adds one node; returns its output names (`outputs` fresh ones, or the given names). */
  op(
    opType: string,
    inputs: (string | undefined)[],
    attrs: Record<string, Attr> = {},
    o: { outputs?: number | string[]; domain?: string } = {},
  ): string[] {
    const outs =
      typeof o.outputs === 'object'
        ? o.outputs
        : Array.from({ length: o.outputs ?? 1 }, () => this.name(opType.toLowerCase()));
    const ins = inputs.map((x) => x ?? '');
    while (ins.length > 0 && ins[ins.length - 1] === '') ins.pop();
    const attributes = Object.fromEntries(Object.entries(attrs).map(([k, v]) => [k, attribute(v)]));
    this.nodes.push({
      opType,
      ...(o.domain && { domain: o.domain }),
      inputs: ins,
      outputs: outs,
      ...(Object.keys(attributes).length > 0 && { attributes }),
    });
    return outs;
  }

  /** A node with one output. */
  op1(
    opType: string,
    inputs: (string | undefined)[],
    attrs: Record<string, Attr> = {},
    domain?: string,
  ): string {
    return this.op(opType, inputs, attrs, domain ? { domain } : {})[0]!;
  }

  /** A constant (stored inline as an initializer of this graph). */
  constant(
    hint: string,
    data: Int32Array | BigInt64Array | Float32Array | Float64Array,
    dims: number[],
  ): string {
    const name = this.name(hint);
    this.initializers.push(onnxTensor(name, data, dims));
    return name;
  }

  i64(values: readonly number[], dims: number[] = [values.length]): string {
    return this.constant(
      'i64',
      BigInt64Array.from(values, (v) => BigInt(v)),
      dims,
    );
  }

  i32(values: readonly number[], dims: number[] = [values.length]): string {
    return this.constant('i32', Int32Array.from(values), dims);
  }

  f32(values: readonly number[], dims: number[] = [values.length]): string {
    return this.constant('f32', Float32Array.from(values), dims);
  }

  f64(values: readonly number[], dims: number[] = [values.length]): string {
    return this.constant('f64', Float64Array.from(values), dims);
  }

  graph(name: string): OnnxGraph {
    return {
      name,
      nodes: this.nodes,
      inputs: this.inputs,
      outputs: this.outputs,
      initializers: this.initializers,
    };
  }
}

export { OnnxDataType };
