// Central finite differences through the reference evaluator (float64), to check gradients.

import { GraphError } from './errors.js';
import { evaluate } from './evaluate.js';
import type { Graph, Value } from './graph.js';
import type { HostTensor } from './types.js';

export interface GradCheckResult {
  name: string;
  analytic: Float64Array;
  numeric: Float64Array;
  /** max |analytic − numeric| / max(1, |analytic|, |numeric|) */
  maxError: number;
}

/**
 * Compares `grads` (the autodiff outputs for `wrt`) with central differences
 * (f(x+ε) − f(x−ε)) / 2ε of the sum of `loss`, perturbing each element of each fed `wrt` value.
 */
export function checkGradients(
  graph: Graph,
  feeds: Readonly<Record<string, HostTensor>>,
  loss: Value,
  wrt: readonly Value[],
  grads: readonly Value[],
  eps = 1e-6,
): GradCheckResult[] {
  const got = evaluate(graph, feeds, grads);
  const f = (fs: Record<string, HostTensor>) =>
    evaluate(graph, fs, [loss])[loss.name]!.data.reduce((s, x) => s + x, 0);
  return wrt.map((w, k) => {
    const base = feeds[w.name] ?? w.data;
    if (!base) throw new GraphError(`${w.name} must be fed to check its gradient`);
    const numeric = new Float64Array(base.data.length);
    for (let i = 0; i < numeric.length; i++) {
      const at = (d: number) => {
        const data = Float64Array.from(base.data);
        data[i]! += d;
        return f({ ...feeds, [w.name]: { ...base, data } });
      };
      numeric[i] = (at(eps) - at(-eps)) / (2 * eps);
    }
    const analytic = got[grads[k]!.name]!.data;
    let maxError = 0;
    for (let i = 0; i < numeric.length; i++) {
      const a = analytic[i]!;
      const n = numeric[i]!;
      maxError = Math.max(maxError, Math.abs(a - n) / Math.max(1, Math.abs(a), Math.abs(n)));
    }
    if (analytic.length !== numeric.length) maxError = Number.POSITIVE_INFINITY;
    return { name: w.name, analytic, numeric, maxError };
  });
}
