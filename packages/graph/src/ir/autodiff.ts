// Reverse-mode autodiff: appends the backward graph of `loss` w.r.t. chosen values.
import { isDifferentiableInput, OPS } from '../ops/registry.js';
import type { GraphBuilder } from './builder.js';
import { GraphError } from './errors.js';
import type { Node, Value } from './graph.js';
import { isFloat } from './types.js';

export interface GradOptions {
  /** The gradient of `loss` to start from (default: ones shaped like `loss`). */
  seed?: Value;
  /** Add each gradient as a graph output named `grad.<wrt name>` (default true). */
  asOutputs?: boolean;
  /**
   * Values treated as constants (stop-gradient, PyTorch's `.detach()`): no gradient flows back
   * through them. Make one with `b.identity(x)`, so that `x` itself keeps its gradient.
   */
  stop?: readonly Value[];
}

/**
 * Gradients of `loss` w.r.t. each of `wrt` (zeros for a value `loss` does not depend on).
 * Only nodes on a path from `wrt` to `loss` get a VJP; their rules reuse the forward values, and
 * contributions of a value used several times accumulate with (binary) Add. Integer and bool
 * values carry no gradient; ops without a VJP (Shape, comparisons, Range…) stop it.
 */
export function grad(
  b: GraphBuilder,
  loss: Value,
  wrt: readonly Value[],
  options: GradOptions = {},
): Value[] {
  if (!isFloat(loss.dtype))
    throw new GraphError(`loss ${loss.name} must be floating point, is ${loss.dtype}`);
  for (const w of wrt) {
    if (!isFloat(w.dtype))
      throw new GraphError(
        `cannot differentiate w.r.t. ${w.name}: ${w.dtype} is not a float dtype`,
      );
  }
  const stop = new Set<Value>(options.stop ?? []);
  const reach = new Set<Value>(wrt);
  const flows = (n: Node, i: number): boolean => {
    const v = n.inputs[i];
    return v !== undefined && reach.has(v) && isFloat(v.dtype) && isDifferentiableInput(n.op, i);
  };
  const active: Node[] = [];
  for (const n of b.graph.nodesFor([loss])) {
    if (!OPS[n.op]?.vjp || !n.inputs.some((_, i) => flows(n, i))) continue;
    active.push(n);
    for (const o of n.outputs) if (isFloat(o.dtype) && !stop.has(o)) reach.add(o);
  }

  const grads = new Map<Value, Value>();
  if (reach.has(loss)) grads.set(loss, options.seed ?? b.fullLike(loss, 1));
  for (const n of active.reverse()) {
    const gys = n.outputs.map((o) => grads.get(o));
    if (gys.every((g) => g === undefined)) continue;
    const needs = n.inputs.map((_, i) => flows(n, i));
    let gx: (Value | undefined)[];
    try {
      gx = b.withScope(`${n.name}.grad`, () =>
        OPS[n.op]!.vjp!({
          b,
          x: n.inputs,
          y: n.outputs,
          gy: n.outputs.map((o, i) => gys[i] ?? b.zerosLike(o)),
          attrs: n.attrs,
          needs,
        }),
      );
    } catch (e) {
      if (GraphError.isInstance(e) && e.node) throw e;
      const inputShapes = n.inputs.map((v) => v?.shape);
      throw new GraphError(
        `gradient: ${e instanceof Error ? e.message : String(e)}`,
        { node: n.name, op: n.op, inputShapes },
        { cause: e },
      );
    }
    n.inputs.forEach((v, i) => {
      const g = gx[i];
      if (!v || !needs[i] || !g) return;
      const prev = grads.get(v);
      grads.set(v, prev ? b.withScope(`${n.name}.grad`, () => b.add(prev, g)) : g);
    });
  }

  return wrt.map((w) => {
    const g = grads.get(w) ?? b.zerosLike(w);
    return options.asOutputs === false ? g : b.output(g, `grad.${w.name}`);
  });
}
