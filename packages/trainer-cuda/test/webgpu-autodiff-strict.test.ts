// Forward + backward on the WebGPU EP with CPU fallback disabled (`session.disable_cpu_ep_fallback`
// = 1: the session refuses to load if any node would run on the CPU EP). The graph has SYMBOLIC
// batch/seq dims, a MatMul with a 2-D weight, a bias, a ReduceMean over the static last axis and a
// ReduceMean over everything (its count depends on batch·seq, known only at run time). Reference:
// the float64 evaluator, itself checked by central finite differences; WebGPU's float32 results
// must match it for two different batch/seq bindings of the same session.

import {
  buildAdamWGraph,
  checkGradients,
  encodeModel,
  evaluate,
  type Graph,
  GraphBuilder,
  type HostTensor,
  tensor,
  toOnnxModel,
} from '@flowgrpo/graph';
import { randomTensor, testRandom as rng, tensorMismatch } from '@flowgrpo/graph/testing';
import {
  createSession,
  deviceAvailability,
  fromOrtTensor as fromOrt,
  toOrtTensor as toOrt,
} from '@flowgrpo/models';
import { describe, expect, it } from 'vitest';

const webgpu = await deviceAvailability('webgpu');
if (!webgpu.available) console.info(`[autodiff] WebGPU strict tests skipped: ${webgpu.reason}`);

const D = 8;
const H = 4;

function trainGraph(): Graph {
  const b = new GraphBuilder('strict');
  const x = b.input('x', 'float32', ['batch', 'seq', D]);
  const t = b.input('t', 'float32', ['batch', 'seq', H]);
  const w = b.input('w', 'float32', [D, H]);
  const bias = b.input('bias', 'float32', [H]);
  // RMS-style scaling: ReduceMean over the static last axis.
  const xn = b.div(x, b.sqrt(b.add(b.reduceMean(b.mul(x, x), [-1], true), 1e-6)));
  const h = b.tanh(b.add(b.matmul(xn, w), bias));
  const d = b.sub(h, t);
  const loss = b.reduceMean(b.mul(d, d)); // over batch·seq·H, a run-time count
  b.output(loss, 'loss');
  b.grad(loss, [w, bias, x]);
  return b.graph;
}

function feedsFor(batch: number, seq: number, seed: number): Record<string, HostTensor> {
  const r = rng(seed);
  return {
    x: randomTensor(r, [batch, seq, D]),
    t: randomTensor(r, [batch, seq, H], -0.5, 0.5),
    w: randomTensor(r, [D, H]),
    bias: randomTensor(r, [H], -0.1, 0.1),
  };
}

describe('WebGPU-safe backward rules (no WebGPU needed)', () => {
  it('the backward has no Size, Cast, ConstantOfShape or Transpose and matches finite differences', () => {
    const g = trainGraph();
    const backward = g.nodes.filter((n) => n.name.includes('.grad/')).map((n) => n.op);
    for (const op of ['Size', 'Cast', 'ConstantOfShape', 'Transpose'])
      expect(backward, op).not.toContain(op);
    const feeds = feedsFor(2, 3, 1);
    const loss = g.outputs.find((v) => v.name === 'loss')!;
    const wrt = ['w', 'bias', 'x'].map((n) => g.inputs.find((v) => v.name === n)!);
    const grads = ['w', 'bias', 'x'].map((n) => g.outputs.find((v) => v.name === `grad.${n}`)!);
    for (const res of checkGradients(g, feeds, loss, wrt, grads))
      expect(res.maxError, res.name).toBeLessThan(1e-6);
  });
});

describe.skipIf(!webgpu.available)(
  `autodiff on WebGPU with CPU fallback disabled${webgpu.available ? '' : ` (skipped: ${webgpu.reason})`}`,
  () => {
    it('loads strictly and gives the evaluator’s loss and gradients for two batch/seq sizes', async () => {
      const g = trainGraph();
      const s = await createSession(encodeModel(toOnnxModel(g, { opset: 21 })), {
        device: 'webgpu',
        disableCpuFallback: true,
      });
      expect(s.device).toBe('webgpu');
      for (const [batch, seq, seed] of [
        [2, 3, 1],
        [3, 5, 2],
      ] as const) {
        const feeds = feedsFor(batch, seq, seed);
        const want = evaluate(g, feeds);
        const { outputs } = await s.run(
          Object.fromEntries(Object.entries(feeds).map(([k, v]) => [k, toOrt(v)])),
        );
        for (const name of ['loss', 'grad.w', 'grad.bias', 'grad.x'])
          expect(
            tensorMismatch(fromOrt(outputs[name]!), want[name]!, 1e-4, `${name} @ ${batch}×${seq}`),
          ).toBeUndefined();
      }
      await s.release();
    });

    it('AdamW with its default (float32) step loads strictly and equals the evaluator', async () => {
      const { graph } = buildAdamWGraph({ params: [{ name: 'w', shape: [D, H] }], maxGradNorm: 1 });
      const s = await createSession(encodeModel(toOnnxModel(graph, { opset: 21 })), {
        device: 'webgpu',
        disableCpuFallback: true,
      });
      const r = rng(5);
      const feeds: Record<string, HostTensor> = {
        lr: tensor('float32', [], 0.01),
        step: tensor('float32', [], 3),
        w: randomTensor(r, [D, H]),
        'grad.w': randomTensor(r, [D, H]),
        'm.w': randomTensor(r, [D, H], 0, 0.1),
        'v.w': randomTensor(r, [D, H], 0, 0.1),
      };
      const want = evaluate(graph, feeds);
      const { outputs } = await s.run(
        Object.fromEntries(Object.entries(feeds).map(([k, v]) => [k, toOrt(v)])),
      );
      for (const name of ['new.w', 'new.m.w', 'new.v.w', 'grad_norm'])
        expect(tensorMismatch(fromOrt(outputs[name]!), want[name]!, 1e-5, name)).toBeUndefined();
      await s.release();
    });
  },
);
