// Reverse-mode autodiff: appends the backward graph of `loss` w.r.t. chosen values.
import { isDifferentiableInput, OPS } from '../ops/registry.js';
import type { GraphBuilder } from './builder.js';
import { type VjpRegion, vjpRegion } from './custom-vjp.js';
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

/** One step of the reverse sweep: a node's VJP, or a custom-VJP region's hand-written one. */
type Step = { node: Node } | { region: VjpRegion };

/**
 * Gradients of `loss` w.r.t. each of `wrt` (zeros for a value `loss` does not depend on).
 * Only nodes on a path from `wrt` to `loss` get a VJP; their rules reuse the forward values, and
 * contributions of a value used several times accumulate with (binary) Add. Integer and bool
 * values carry no gradient; ops without a VJP (Shape, comparisons, Range…) stop it. The nodes of
 * a region registered with `b.customVjp` are not differentiated: its own `vjp` runs instead,
 * once every consumer of its outputs has been.
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
  const carries = (v: Value | undefined): v is Value =>
    v !== undefined && reach.has(v) && isFloat(v.dtype);
  const flows = (n: Node, i: number): boolean =>
    carries(n.inputs[i]) && isDifferentiableInput(n.op, i);
  const regionOf = new Map<Node, VjpRegion>();
  for (const r of b.customVjps.map((v) => vjpRegion(b.graph, v)))
    for (const n of r.nodes) {
      if (regionOf.has(n))
        throw new GraphError(`node ${n.name} is in two custom-VJP regions`, { node: n.name });
      regionOf.set(n, r);
    }

  const active: Step[] = [];
  const entered = new Set<VjpRegion>();
  const differentiated = new Set<VjpRegion>();
  for (const n of b.graph.nodesFor([loss])) {
    const region = regionOf.get(n);
    if (region) {
      // The region stands where its first node is: every consumer of its outputs comes later,
      // so the reverse sweep reaches it after all of them.
      for (const v of n.inputs)
        if (carries(v) && !region.vjp.inputs.includes(v) && !region.values.has(v))
          throw new GraphError(
            `custom VJP '${region.vjp.name}': ${v.name} carries a gradient into it but is not one of its inputs`,
            { node: n.name, op: n.op },
          );
      if (entered.has(region)) continue;
      entered.add(region);
      if (!region.vjp.inputs.some(carries)) continue;
      differentiated.add(region);
      active.push({ region });
      for (const o of region.vjp.outputs) if (isFloat(o.dtype) && !stop.has(o)) reach.add(o);
      continue;
    }
    // An input made after the region's first node: the reverse sweep would run this node's VJP
    // before the region's, without the region's share of the input's gradient.
    for (const o of n.outputs)
      for (const r of entered)
        if (r.vjp.inputs.includes(o))
          throw new GraphError(
            `custom VJP '${r.vjp.name}': its input ${o.name} is computed after the region's first node (build the inputs before the region)`,
            { node: n.name, op: n.op },
          );
    n.inputs.forEach((v, i) => {
      const from = v?.producer && regionOf.get(v.producer);
      if (
        from &&
        differentiated.has(from) &&
        !from.vjp.outputs.includes(v) &&
        isFloat(v.dtype) &&
        isDifferentiableInput(n.op, i)
      )
        throw new GraphError(
          `custom VJP '${from.vjp.name}': ${v.name} is used outside it but is not one of its outputs`,
          { node: n.name, op: n.op },
        );
    });
    if (!OPS[n.op]?.vjp || !n.inputs.some((_, i) => flows(n, i))) continue;
    active.push({ node: n });
    for (const o of n.outputs) if (isFloat(o.dtype) && !stop.has(o)) reach.add(o);
  }

  const grads = new Map<Value, Value>();
  if (reach.has(loss)) grads.set(loss, options.seed ?? b.fullLike(loss, 1));
  const accumulate = (
    scope: string,
    xs: readonly (Value | undefined)[],
    gx: readonly (Value | undefined)[],
    needs: readonly boolean[],
  ) =>
    xs.forEach((v, i) => {
      const g = gx[i];
      if (!v || !needs[i] || !g) return;
      const prev = grads.get(v);
      grads.set(v, prev ? b.withScope(scope, () => b.add(prev, g)) : g);
    });
  for (const step of active.reverse()) {
    if ('region' in step) {
      const { vjp } = step.region;
      const gy = vjp.outputs.map((o) => grads.get(o));
      if (gy.every((g) => g === undefined)) continue;
      const needs = vjp.inputs.map(carries);
      const scope = `${vjp.name}.grad`;
      accumulate(
        scope,
        vjp.inputs,
        b.withScope(scope, () => vjp.vjp({ b, gy, needs })),
        needs,
      );
      continue;
    }
    const n = step.node;
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
    accumulate(`${n.name}.grad`, n.inputs, gx, needs);
  }

  return wrt.map((w) => {
    const g = grads.get(w) ?? b.zerosLike(w);
    return options.asOutputs === false ? g : b.output(g, `grad.${w.name}`);
  });
}
