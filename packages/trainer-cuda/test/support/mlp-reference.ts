// The 2-layer MLP regression the optimizer-step tests fit, and its reference: the same training loop
// in plain TypeScript float64 maths — forward, hand-derived backward and torch.optim.AdamW with
// torch.nn.utils.clip_grad_norm_ — sharing the runner's init and data.
//
//   h = tanh(x·W1 + b1), out = h·W2 + b2, loss = mean((out − y)²) over N·O elements
//   dout = 2(out − y)/(N·O), dW2 = hᵀ·dout, db2 = Σₙ dout, dpre = (dout·W2ᵀ) ⊙ (1 − h²),
//   dW1 = xᵀ·dpre, db1 = Σₙ dpre

import type { GraphBuilder, Value } from '@flowgrpo/graph';
import { testRandom as rng } from '@flowgrpo/graph/testing';
import * as ort from 'onnxruntime-node';

export const N = 24;
export const D = 3;
export const H = 12;
export const O = 2;
export const STEPS = 30;
export const HP = { beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0.01, maxGradNorm: 1 };
/** A per-step learning rate (linear warm-up then decay), fed as an input every step. */
export const lrAt = (t: number): number => (t <= 5 ? 0.02 * t : 0.1 * (1 - (t - 5) / 40));

export const SHAPES: Record<string, number[]> = { w1: [D, H], b1: [H], w2: [H, O], b2: [O] };

export interface Problem {
  x: Float32Array;
  y: Float32Array;
  init: Record<string, Float32Array>;
}

export function problem(seed = 7): Problem {
  const r = rng(seed);
  const u = (n: number, lo: number, hi: number) =>
    Float32Array.from({ length: n }, () => lo + (hi - lo) * r());
  const x = u(N * D, -1, 1);
  const y = new Float32Array(N * O);
  for (let n = 0; n < N; n++) {
    const [a, b, c] = [x[n * D]!, x[n * D + 1]!, x[n * D + 2]!];
    y[n * O] = Math.sin(2 * a) + 0.5 * b * c;
    y[n * O + 1] = a * b - 0.3 * c;
  }
  const init = Object.fromEntries(
    Object.entries(SHAPES).map(([k, s]) => [
      k,
      u(
        s.reduce((p, d) => p * d, 1),
        -0.6,
        0.6,
      ),
    ]),
  );
  return { x, y, init };
}

/** The train step as the runner builds it (static shapes: see the report on WebGPU fallbacks). */
export function buildMlpLoss(b: GraphBuilder, p: Readonly<Record<string, Value>>): Value {
  const x = b.input('x', 'float32', [N, D]);
  const y = b.input('y', 'float32', [N, O]);
  const h = b.tanh(b.add(b.matmul(x, p.w1!), p.b1!));
  const d = b.sub(b.add(b.matmul(h, p.w2!), p.b2!), y);
  return b.reduceMean(b.mul(d, d));
}

export const ortParams = (pr: Problem): Record<string, ort.Tensor> =>
  Object.fromEntries(
    Object.entries(SHAPES).map(([k, s]) => [k, new ort.Tensor('float32', pr.init[k]!.slice(), s)]),
  );

export const ortBatch = (pr: Problem): Record<string, ort.Tensor> => ({
  x: new ort.Tensor('float32', pr.x, [N, D]),
  y: new ort.Tensor('float32', pr.y, [N, O]),
});

/** Loss and gradients of the MLP in float64. */
function lossAndGrads(P: Record<string, Float64Array>, x: Float32Array, y: Float32Array) {
  const G: Record<string, Float64Array> = Object.fromEntries(
    Object.entries(P).map(([k, v]) => [k, new Float64Array(v.length)]),
  );
  let loss = 0;
  const h = new Float64Array(H);
  const dh = new Float64Array(H);
  for (let n = 0; n < N; n++) {
    for (let j = 0; j < H; j++) {
      let a = P.b1![j]!;
      for (let i = 0; i < D; i++) a += x[n * D + i]! * P.w1![i * H + j]!;
      h[j] = Math.tanh(a);
    }
    dh.fill(0);
    for (let o = 0; o < O; o++) {
      let out = P.b2![o]!;
      for (let j = 0; j < H; j++) out += h[j]! * P.w2![j * O + o]!;
      const e = out - y[n * O + o]!;
      loss += (e * e) / (N * O);
      const dout = (2 * e) / (N * O);
      G.b2![o]! += dout;
      for (let j = 0; j < H; j++) {
        G.w2![j * O + o]! += h[j]! * dout;
        dh[j]! += dout * P.w2![j * O + o]!;
      }
    }
    for (let j = 0; j < H; j++) {
      const dpre = dh[j]! * (1 - h[j]! ** 2);
      G.b1![j]! += dpre;
      for (let i = 0; i < D; i++) G.w1![i * H + j]! += x[n * D + i]! * dpre;
    }
  }
  return { loss, G };
}

export interface ReferenceRun {
  losses: number[];
  gradNorms: number[];
  params: Record<string, Float64Array>;
}

/** STEPS updates of AdamW (torch semantics) from the same init on the same data. */
export function referenceRun(pr: Problem, steps = STEPS): ReferenceRun {
  const P = Object.fromEntries(Object.entries(pr.init).map(([k, v]) => [k, Float64Array.from(v)]));
  const M = Object.fromEntries(Object.entries(P).map(([k, v]) => [k, new Float64Array(v.length)]));
  const V = Object.fromEntries(Object.entries(P).map(([k, v]) => [k, new Float64Array(v.length)]));
  const losses: number[] = [];
  const gradNorms: number[] = [];
  for (let t = 1; t <= steps; t++) {
    const { loss, G } = lossAndGrads(P, pr.x, pr.y);
    losses.push(loss);
    let sq = 0;
    for (const g of Object.values(G)) for (const v of g) sq += v * v;
    const norm = Math.sqrt(sq);
    gradNorms.push(norm);
    const clip = Math.min(1, HP.maxGradNorm / (norm + 1e-6));
    const lr = lrAt(t);
    for (const k of Object.keys(P)) {
      const p = P[k]!;
      for (let i = 0; i < p.length; i++) {
        const g = G[k]![i]! * clip;
        M[k]![i] = HP.beta1 * M[k]![i]! + (1 - HP.beta1) * g;
        V[k]![i] = HP.beta2 * V[k]![i]! + (1 - HP.beta2) * g * g;
        const denom = Math.sqrt(V[k]![i]!) / Math.sqrt(1 - HP.beta2 ** t) + HP.eps;
        p[i] = p[i]! * (1 - lr * HP.weightDecay) - (lr / (1 - HP.beta1 ** t)) * (M[k]![i]! / denom);
      }
    }
  }
  return { losses, gradNorms, params: P };
}

/** max |a − b| / max(1e-12, |b|) over a curve. */
export function maxRelError(got: readonly number[], want: readonly number[]): number {
  let worst = 0;
  for (let i = 0; i < want.length; i++)
    worst = Math.max(worst, Math.abs(got[i]! - want[i]!) / Math.max(1e-12, Math.abs(want[i]!)));
  return worst;
}
