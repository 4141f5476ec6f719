// A tiny training loop run entirely in onnxruntime-node: a train-step graph (2-layer MLP forward,
// MSE loss, autodiff gradients) and the AdamW graph, 50 steps on a toy regression problem.
// Reference: the same loop in plain TypeScript float64 maths — forward, hand-derived backward
// (dout = 2(out − y)/N, dW2 = hᵀdout, dh = dout·W2ᵀ, dpre = dh ⊙ (1 − h²), dW1 = xᵀdpre) and
// PyTorch's AdamW with global norm clipping. The ORT losses must track it step by step.

import {
  buildAdamWGraph,
  encodeModel,
  type Graph,
  GraphBuilder,
  type HostTensor,
  tensor,
  toOnnxModel,
} from '@flowgrpo/graph';
import { randomTensor, testRandom as rng } from '@flowgrpo/graph/testing';
import { fromOrtTensor as fromOrt, toOrtTensor as toOrt } from '@flowgrpo/models';
import * as ort from 'onnxruntime-node';
import { describe, expect, it } from 'vitest';

const N = 32;
const H = 16;
const HP = { lr: 0.05, beta1: 0.9, beta2: 0.999, eps: 1e-8, wd: 0.01, maxNorm: 1 };
function createSession(graph: Graph): Promise<ort.InferenceSession> {
  const bytes = encodeModel(toOnnxModel(graph, { opset: 21 }));
  return ort.InferenceSession.create(bytes, { logSeverityLevel: 3, intraOpNumThreads: 1 });
}

const SHAPES: Record<string, number[]> = { w1: [2, H], b1: [H], w2: [H, 1], b2: [1] };

function trainStepGraph() {
  const b = new GraphBuilder('train_step');
  const x = b.input('x', 'float32', ['n', 2]);
  const y = b.input('y', 'float32', ['n', 1]);
  const p = Object.fromEntries(
    Object.entries(SHAPES).map(([k, s]) => [k, b.input(k, 'float32', s)]),
  );
  const h = b.tanh(b.add(b.matmul(x, p.w1!), p.b1!));
  const d = b.sub(b.add(b.matmul(h, p.w2!), p.b2!), y);
  const loss = b.reduceMean(b.mul(d, d));
  b.output(loss, 'loss');
  b.grad(loss, Object.values(p));
  return b.graph;
}

/** Plain-TS reference: loss and gradients of the MLP. */
function refStep(P: Record<string, number[]>, x: number[], y: number[]) {
  const h = new Array<number>(N * H);
  const out = new Array<number>(N);
  for (let n = 0; n < N; n++) {
    let o = P.b2![0]!;
    for (let j = 0; j < H; j++) {
      const v = Math.tanh(x[2 * n]! * P.w1![j]! + x[2 * n + 1]! * P.w1![H + j]! + P.b1![j]!);
      h[n * H + j] = v;
      o += v * P.w2![j]!;
    }
    out[n] = o;
  }
  const G: Record<string, number[]> = Object.fromEntries(
    Object.entries(P).map(([k, v]) => [k, v.map(() => 0)]),
  );
  let loss = 0;
  for (let n = 0; n < N; n++) {
    const e = out[n]! - y[n]!;
    loss += (e * e) / N;
    const dout = (2 * e) / N;
    G.b2![0]! += dout;
    for (let j = 0; j < H; j++) {
      G.w2![j]! += h[n * H + j]! * dout;
      const dpre = dout * P.w2![j]! * (1 - h[n * H + j]! ** 2);
      G.b1![j]! += dpre;
      G.w1![j]! += x[2 * n]! * dpre;
      G.w1![H + j]! += x[2 * n + 1]! * dpre;
    }
  }
  return { loss, G };
}

describe('training loop in ORT', () => {
  it('train-step + AdamW graphs drive the loss down like the plain-TS loop', async () => {
    const r = rng(11);
    const xs = randomTensor(r, [N, 2]);
    const ys = tensor(
      'float32',
      [N, 1],
      Array.from({ length: N }, (_, n) =>
        Math.fround(Math.sin(2 * xs.data[2 * n]!) * xs.data[2 * n + 1]! + 0.5 * xs.data[2 * n]!),
      ),
    );
    const init = Object.fromEntries(
      Object.entries(SHAPES).map(([k, s]) => [k, randomTensor(r, s, -0.5, 0.5)]),
    );

    const step = await createSession(trainStepGraph());
    const { graph } = buildAdamWGraph({
      params: Object.entries(SHAPES).map(([name, shape]) => ({ name, shape })),
      beta1: HP.beta1,
      beta2: HP.beta2,
      eps: HP.eps,
      weightDecay: HP.wd,
      maxGradNorm: HP.maxNorm,
    });
    const opt = await createSession(graph);

    // ORT state (float32) and reference state (float64), same initial values.
    let params: Record<string, ort.Tensor> = Object.fromEntries(
      Object.entries(init).map(([k, t]) => [k, toOrt(t)]),
    );
    let moments: Record<string, ort.Tensor> = {};
    for (const [k, s] of Object.entries(SHAPES)) {
      moments[`m.${k}`] = toOrt(tensor('float32', s, 0));
      moments[`v.${k}`] = toOrt(tensor('float32', s, 0));
    }
    const P: Record<string, number[]> = Object.fromEntries(
      Object.entries(init).map(([k, t]) => [k, Array.from(t.data)]),
    );
    const M: Record<string, number[]> = Object.fromEntries(
      Object.entries(P).map(([k, v]) => [k, v.map(() => 0)]),
    );
    const V: Record<string, number[]> = Object.fromEntries(
      Object.entries(P).map(([k, v]) => [k, v.map(() => 0)]),
    );

    const ortLoss: number[] = [];
    const refLoss: number[] = [];
    for (let t = 1; t <= 50; t++) {
      const out = await step.run({ x: toOrt(xs), y: toOrt(ys), ...params });
      ortLoss.push(fromOrt(out.loss!).data[0]!);
      const feeds: Record<string, ort.Tensor> = {
        ...params,
        ...moments,
        lr: toOrt(tensor('float32', [], HP.lr)),
        step: toOrt(tensor('float32', [], t)),
      };
      for (const k of Object.keys(SHAPES)) feeds[`grad.${k}`] = out[`grad.${k}`]!;
      const upd = await opt.run(feeds);
      params = Object.fromEntries(Object.keys(SHAPES).map((k) => [k, upd[`new.${k}`]!]));
      moments = {};
      for (const k of Object.keys(SHAPES)) {
        moments[`m.${k}`] = upd[`new.m.${k}`]!;
        moments[`v.${k}`] = upd[`new.v.${k}`]!;
      }

      const { loss, G } = refStep(P, Array.from(xs.data), Array.from(ys.data));
      refLoss.push(loss);
      const norm = Math.sqrt(
        Object.values(G)
          .flat()
          .reduce((a, g) => a + g * g, 0),
      );
      expect(fromOrt(upd.grad_norm!).data[0]).toBeCloseTo(norm, 4);
      const clip = Math.min(1, HP.maxNorm / (norm + 1e-6));
      for (const k of Object.keys(P)) {
        P[k] = P[k]!.map((p, i) => {
          const g = G[k]![i]! * clip;
          M[k]![i] = HP.beta1 * M[k]![i]! + (1 - HP.beta1) * g;
          V[k]![i] = HP.beta2 * V[k]![i]! + (1 - HP.beta2) * g * g;
          const denom = Math.sqrt(V[k]![i]!) / Math.sqrt(1 - HP.beta2 ** t) + HP.eps;
          return p * (1 - HP.lr * HP.wd) - (HP.lr / (1 - HP.beta1 ** t)) * (M[k]![i]! / denom);
        });
      }
    }
    await step.release();
    await opt.release();

    for (let t = 0; t < 50; t++)
      expect(Math.abs(ortLoss[t]! - refLoss[t]!) / refLoss[t]!).toBeLessThan(1e-3);
    expect(ortLoss[49]!).toBeLessThan(0.2 * ortLoss[0]!);
    const final: HostTensor = fromOrt(params.w2!);
    for (const [i, v] of final.data.entries()) expect(v).toBeCloseTo(P.w2![i]!, 3);
  });
});
