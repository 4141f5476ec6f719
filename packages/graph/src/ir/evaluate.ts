// The reference evaluator: runs a graph in plain TypeScript, every float computed in float64
// whatever its dtype (so finite differences are accurate; casts to float32/float16 do not round).
import { OPS } from '../ops/registry.js';
import { GraphError } from './errors.js';
import type { Graph, Value } from './graph.js';
import type { HostTensor } from './types.js';

/**
 * Evaluates `outputs` (default: the graph's outputs) from `feeds` keyed by input name. External
 * initializers must be fed like inputs. Symbolic dims must bind consistently across feeds.
 */
export function evaluate(
  graph: Graph,
  feeds: Readonly<Record<string, HostTensor>>,
  outputs: readonly (Value | string)[] = graph.outputs,
): Record<string, HostTensor> {
  const env = new Map<Value, HostTensor>();
  const dims = new Map<string, number>();
  for (const v of [...graph.inputs, ...graph.initializers]) {
    const t = feeds[v.name] ?? v.data;
    if (!t) {
      if (v.kind === 'input') continue;
      throw new GraphError(`initializer ${v.name} has external data: feed it by name`);
    }
    const s = v.shape!;
    if (t.shape.length !== s.length)
      throw new GraphError(`${v.name}: fed rank ${t.shape.length}, declared [${s.join(', ')}]`);
    s.forEach((d, i) => {
      const got = t.shape[i]!;
      const want = typeof d === 'number' ? d : (dims.get(d) ?? got);
      if (got !== want)
        throw new GraphError(
          `${v.name}: dim ${i} is ${got}, expected ${typeof d === 'number' ? d : `${d}=${want}`}`,
        );
      if (typeof d === 'string') dims.set(d, got);
    });
    env.set(v, t);
  }
  const byName = new Map<string, Value>();
  for (const n of graph.nodes) for (const o of n.outputs) byName.set(o.name, o);
  for (const v of [...graph.inputs, ...graph.initializers, ...graph.outputs]) byName.set(v.name, v);
  const targets = outputs.map((o) => {
    const v = typeof o === 'string' ? byName.get(o) : o;
    if (!v) throw new GraphError(`no value named '${o as string}'`);
    return v;
  });
  const read = (v: Value): HostTensor => {
    const t = env.get(v) ?? v.data;
    if (!t) throw new GraphError(`input ${v.name} is not fed`);
    return t;
  };
  for (const n of graph.nodesFor(targets)) {
    let ys: HostTensor[];
    try {
      ys = OPS[n.op]!.forward(
        n.inputs.map((v) => (v ? read(v) : undefined)),
        n.attrs,
      );
    } catch (e) {
      if (GraphError.isInstance(e)) throw e;
      throw new GraphError(
        `evaluation failed: ${(e as Error).message}`,
        {
          node: n.name,
          op: n.op,
          inputShapes: n.inputs.map((v) => (v ? env.get(v)?.shape : undefined)),
        },
        { cause: e },
      );
    }
    for (const [i, o] of n.outputs.entries()) env.set(o, ys[i]!);
  }
  return Object.fromEntries(targets.map((v) => [v.name, read(v)]));
}
