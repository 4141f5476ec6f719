// The AdamW optimizer as a graph, following torch.optim.AdamW (decoupled weight decay, bias
// correction) with torch.nn.utils.clip_grad_norm_'s global clipping over all gradients together:
//
//   norm = ‖(g_1, …, g_n)‖₂                         (reported before clipping)
//   g   ← g · min(1, max_norm / (norm + 1e-6))      (only when maxGradNorm is set)
//   p   ← p − lr·wd·p
//   m   ← β1·m + (1 − β1)·g
//   v   ← β2·v + (1 − β2)·g²
//   p   ← p − lr/(1 − β1^t) · m / (√v / √(1 − β2^t) + ε)
//
// `step` is t, the 1-based number of this update (PyTorch increments its state step first). It
// is a float32 input by default: WebGPU has no int64 → float Cast kernel, so an int64 step would
// put that Cast on the CPU EP (and make a `disable_cpu_ep_fallback` session refuse to load).
// float32 counts updates exactly up to 2^24 (16.7M steps); 'int64' stays available for CPU/CUDA.

import { GraphBuilder } from '../ir/builder.js';
import { GraphError } from '../ir/errors.js';
import { Graph, type Value } from '../ir/graph.js';
import type { Shape } from '../ir/types.js';

/** A hyper-parameter baked into the graph as a constant, or 'input': a scalar float32 input. */
export type HyperParam = number | 'input';

export interface AdamWHyperParams {
  /** Default 0.9. */
  beta1?: HyperParam;
  /** Default 0.999. */
  beta2?: HyperParam;
  /** Default 1e-8. */
  eps?: HyperParam;
  /** Default 0.01 (torch's AdamW default). */
  weightDecay?: HyperParam;
  /** Global gradient-norm clipping threshold; absent: no clipping. */
  maxGradNorm?: HyperParam;
}

export interface AdamWState {
  param: Value;
  grad: Value;
  m: Value;
  v: Value;
}

export interface AdamWResult {
  params: Value[];
  m: Value[];
  v: Value[];
  /** The global L2 norm of the gradients before clipping. */
  gradNorm: Value;
}

/**
 * Appends one AdamW update of all `states` to a builder. `lr` is a scalar float value, `step` a
 * scalar (int64 or float) holding t ≥ 1. Hyper-parameters given as 'input' become scalar float32
 * graph inputs named `beta1`, `beta2`, `eps`, `weight_decay`, `max_grad_norm`.
 */
export function appendAdamW(
  b: GraphBuilder,
  states: readonly AdamWState[],
  lr: Value,
  step: Value,
  hp: AdamWHyperParams = {},
): AdamWResult {
  if (states.length === 0) throw new GraphError('AdamW needs at least one parameter');
  const dt = states[0]!.param.dtype;
  for (const s of states) {
    if (s.param.dtype !== dt || s.grad.dtype !== dt || s.m.dtype !== dt || s.v.dtype !== dt) {
      throw new GraphError(`AdamW state of ${s.param.name} must all be ${dt}`);
    }
  }
  const h = (v: HyperParam | undefined, dflt: number, name: string): Value =>
    v === 'input' ? b.input(name, dt, []) : b.scalar(v ?? dflt, dt);
  const beta1 = h(hp.beta1, 0.9, 'beta1');
  const beta2 = h(hp.beta2, 0.999, 'beta2');
  const eps = h(hp.eps, 1e-8, 'eps');
  const wd = h(hp.weightDecay, 0.01, 'weight_decay');

  let sq: Value | undefined;
  for (const s of states) {
    const part = b.reduceSum(b.mul(s.grad, s.grad));
    sq = sq ? b.add(sq, part) : part;
  }
  const gradNorm = b.sqrt(sq!);
  let scale: Value | undefined;
  if (hp.maxGradNorm !== undefined) {
    const maxNorm = h(hp.maxGradNorm, 1, 'max_grad_norm');
    scale = b.min(b.div(maxNorm, b.add(gradNorm, 1e-6)), 1);
  }

  const t = b.cast(step, dt);
  const bc1 = b.sub(1, b.pow(beta1, t));
  const sqrtBc2 = b.sqrt(b.sub(1, b.pow(beta2, t)));
  const stepSize = b.div(lr, bc1);
  const decay = b.sub(1, b.mul(lr, wd));
  const oneMinusB1 = b.sub(1, beta1);
  const oneMinusB2 = b.sub(1, beta2);

  const out: AdamWResult = { params: [], m: [], v: [], gradNorm };
  for (const s of states) {
    const g = scale ? b.mul(s.grad, scale) : s.grad;
    const m = b.add(b.mul(beta1, s.m), b.mul(oneMinusB1, g));
    const v = b.add(b.mul(beta2, s.v), b.mul(oneMinusB2, b.mul(g, g)));
    const denom = b.add(b.div(b.sqrt(v), sqrtBc2), eps);
    const p = b.sub(b.mul(s.param, decay), b.mul(stepSize, b.div(m, denom)));
    out.params.push(p);
    out.m.push(m);
    out.v.push(v);
  }
  return out;
}

export interface AdamWParamSpec {
  name: string;
  shape: Shape;
}

export interface AdamWGraphOptions extends AdamWHyperParams {
  params: readonly AdamWParamSpec[];
  /** Element type of params, grads and moments (default float32). */
  dtype?: 'float32' | 'float64';
  /**
   * Type of the `step` input (default float32: exact up to 2^24 updates, and stays on the GPU
   * under WebGPU, where a Cast from int64 has no kernel). 'int64' works on the CPU and CUDA EPs.
   */
  stepDtype?: 'int64' | 'float32';
}

/** I/O names of a standalone AdamW graph, per parameter name. */
export interface AdamWNames {
  lr: string;
  step: string;
  gradNorm: string;
  param: Record<
    string,
    {
      param: string;
      grad: string;
      m: string;
      v: string;
      newParam: string;
      newM: string;
      newV: string;
    }
  >;
}

/**
 * A standalone optimizer graph. Inputs: `lr`, `step`, and per parameter `<name>`, `grad.<name>`,
 * `m.<name>`, `v.<name>`; outputs `new.<name>`, `new.m.<name>`, `new.v.<name>` and `grad_norm`.
 */
export function buildAdamWGraph(options: AdamWGraphOptions): { graph: Graph; names: AdamWNames } {
  const dt = options.dtype ?? 'float32';
  const b = new GraphBuilder(new Graph('adamw'));
  const lr = b.input('lr', dt, []);
  const step = b.input('step', options.stepDtype ?? 'float32', []);
  const names: AdamWNames = { lr: 'lr', step: 'step', gradNorm: 'grad_norm', param: {} };
  const states = options.params.map((p) => {
    names.param[p.name] = {
      param: p.name,
      grad: `grad.${p.name}`,
      m: `m.${p.name}`,
      v: `v.${p.name}`,
      newParam: `new.${p.name}`,
      newM: `new.m.${p.name}`,
      newV: `new.v.${p.name}`,
    };
    return {
      param: b.input(p.name, dt, p.shape),
      grad: b.input(`grad.${p.name}`, dt, p.shape),
      m: b.input(`m.${p.name}`, dt, p.shape),
      v: b.input(`v.${p.name}`, dt, p.shape),
    };
  });
  const r = appendAdamW(b, states, lr, step, options);
  options.params.forEach((p, i) => {
    b.output(r.params[i]!, `new.${p.name}`);
    b.output(r.m[i]!, `new.m.${p.name}`);
    b.output(r.v[i]!, `new.v.${p.name}`);
  });
  b.output(r.gradNorm, 'grad_norm');
  return { graph: b.graph, names };
}
