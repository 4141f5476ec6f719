// Hand-written gradients for a part of a graph, as jax.custom_vjp or a PyTorch
// autograd.Function: autodiff does not differentiate the nodes between a region's inputs and its
// outputs; when the reverse sweep reaches the region it calls the region's `vjp` instead. The
// use: a backward that recomputes what the forward threw away (the chunked LM head of
// @flowgrpo/models recomputes each chunk of logits rather than keeping all of them).
import type { GraphBuilder } from './builder.js';
import { GraphError } from './errors.js';
import type { Graph, Node, Value } from './graph.js';

export interface CustomVjpContext {
  readonly b: GraphBuilder;
  /** Gradient of the loss w.r.t. each output; `undefined` where the loss does not depend on it. */
  readonly gy: readonly (Value | undefined)[];
  /** Which inputs need a gradient; the rule may skip the others. */
  readonly needs: readonly boolean[];
}

export interface CustomVjp {
  /** Names the backward's scope (`<name>.grad/…`). */
  readonly name: string;
  readonly inputs: readonly Value[];
  readonly outputs: readonly Value[];
  /** Gradients w.r.t. `inputs`, `undefined` where none flows. */
  readonly vjp: (ctx: CustomVjpContext) => readonly (Value | undefined)[];
}

/** A registered region and the nodes it stands for. */
export interface VjpRegion {
  readonly vjp: CustomVjp;
  /**
   * Nodes on a path from an input to an output, not counting those that compute an input (an
   * input may feed another: a tied embedding feeds the hidden states and the LM head): autodiff
   * skips them.
   */
  readonly nodes: ReadonlySet<Node>;
  /** Values those nodes compute. */
  readonly values: ReadonlySet<Value>;
}

/** The nodes of `graph` between `vjp.inputs` and `vjp.outputs`; throws on a malformed region. */
export function vjpRegion(graph: Graph, vjp: CustomVjp): VjpRegion {
  const fromInputs = new Set<Value>(vjp.inputs);
  const before = new Set(graph.nodesFor(vjp.inputs));
  const nodes = new Set<Node>();
  for (const n of graph.nodesFor(vjp.outputs)) {
    if (before.has(n) || !n.inputs.some((v) => v !== undefined && fromInputs.has(v))) continue;
    nodes.add(n);
    for (const o of n.outputs) fromInputs.add(o);
  }
  const values = new Set<Value>([...nodes].flatMap((n) => n.outputs));
  for (const o of vjp.outputs)
    if (!values.has(o))
      throw new GraphError(
        `custom VJP '${vjp.name}': output ${o.name} does not depend on its inputs`,
      );
  return { vjp, nodes, values };
}
