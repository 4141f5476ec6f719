// The graph container: values (inputs, initializers, constants, node outputs), nodes in
// topological order (the builder only appends), and the graph's outputs.
import { GraphError } from './errors.js';
import type { Attrs, Dim, ElemType, ExternalRef, HostTensor, Shape } from './types.js';

export type ValueKind = 'input' | 'initializer' | 'constant' | 'node';

export interface Value {
  readonly id: number;
  /** Unique within the graph; becomes the ONNX value name. */
  name: string;
  readonly dtype: ElemType;
  readonly shape: Shape | undefined;
  readonly kind: ValueKind;
  /** The node computing it (kind 'node'). */
  readonly producer?: Node;
  /** Bytes of constants and inline initializers. */
  readonly data?: HostTensor;
  /** Initializers whose bytes live in a side file such as weights.data. */
  readonly external?: ExternalRef;
  /** An inline initializer to be written to the external-data file at export. */
  readonly preferExternal?: boolean;
  /**
   * Statically known elements of a small integer tensor (rank 0 or 1), numbers or symbolic dims:
   * lets `Reshape(x, Concat(Shape(x)[0:2], [-1]))` keep `batch`/`seq` in the inferred shape.
   */
  readonly known?: readonly Dim[];
}

export interface Node {
  readonly id: number;
  readonly name: string;
  readonly op: string;
  /** `undefined` is an omitted optional input. */
  readonly inputs: readonly (Value | undefined)[];
  readonly outputs: readonly Value[];
  readonly attrs: Attrs;
}

export class Graph {
  readonly inputs: Value[] = [];
  readonly initializers: Value[] = [];
  readonly nodes: Node[] = [];
  readonly outputs: Value[] = [];
  private readonly names = new Set<string>();
  private nextId = 0;
  /** Bumped by prune(): values of removed nodes must not be reused. */
  private revision = 0;

  constructor(readonly name = 'flowgrpo') {}

  get version(): number {
    return this.revision;
  }

  newId(): number {
    return this.nextId++;
  }

  /** Reserves `name`; auto names get a numeric suffix on collision, user names must be unique. */
  claimName(name: string, user: boolean): string {
    if (!this.names.has(name)) {
      this.names.add(name);
      return name;
    }
    if (user) throw new GraphError(`value name '${name}' is already used in graph '${this.name}'`);
    for (let i = 1; ; i++) {
      const alt = `${name}_${i}`;
      if (!this.names.has(alt)) {
        this.names.add(alt);
        return alt;
      }
    }
  }

  releaseName(name: string): void {
    this.names.delete(name);
  }

  /** Nodes whose outputs are needed to compute `targets`, in topological order. */
  nodesFor(targets: readonly Value[]): Node[] {
    const needed = new Set<Node>();
    const stack = targets.map((v) => v.producer).filter((n): n is Node => n !== undefined);
    while (stack.length > 0) {
      const n = stack.pop()!;
      if (needed.has(n)) continue;
      needed.add(n);
      for (const v of n.inputs) if (v?.producer && !needed.has(v.producer)) stack.push(v.producer);
    }
    return this.nodes.filter((n) => needed.has(n));
  }

  /**
   * Dead-code elimination: drops every node not needed for the graph's outputs (values they
   * computed must not be used afterwards).
   */
  prune(): this {
    const keep = new Set(this.nodesFor(this.outputs));
    const kept = this.nodes.filter((n) => keep.has(n));
    for (const n of this.nodes)
      if (!keep.has(n)) for (const o of n.outputs) this.releaseName(o.name);
    this.nodes.length = 0;
    this.nodes.push(...kept);
    this.revision++;
    return this;
  }
}
