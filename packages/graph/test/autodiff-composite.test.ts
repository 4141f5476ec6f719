// Composite graphs a trainer builds — softmax cross-entropy (ReduceLogSumExp with GatherElements
// or Gather of the labels), RMSNorm, single- and multi-head causal attention, a 2-layer MLP with
// LoRA adapters — checked by central finite differences (ε = 1e-6) through the float64 reference
// evaluator, and exported to a real onnxruntime-node session that must give the evaluator's
// numbers (relative 1e-5 in float32).
import { describe, expect, it } from 'vitest';
import {
  checkGradients,
  evaluate,
  GraphBuilder,
  type HostTensor,
  tensor,
  type Value,
} from '../src/index.js';
import { randomTensor, testRandom } from '../src/testing/index.js';
import { expectOrtMatches, runOrt } from './graph-helpers.js';

/** Gradient check of `loss` w.r.t. `wrt`, then the same graph in ORT. */
async function check(
  b: GraphBuilder,
  feeds: Record<string, HostTensor>,
  loss: Value,
  wrt: Value[],
) {
  const grads = b.grad(loss, wrt);
  for (const r of checkGradients(b.graph, feeds, loss, wrt, grads))
    expect(r.maxError, r.name).toBeLessThan(1e-6);
  b.output(loss, 'loss');
  await expectOrtMatches(b.graph, feeds);
  return grads;
}

describe('softmax cross-entropy', () => {
  it('ReduceLogSumExp − GatherElements(labels): value, d/dlogits = (softmax − onehot)/N, FD', async () => {
    const r = testRandom(3);
    const b = new GraphBuilder('ce');
    const x = b.input('x', 'float32', ['n', 4]);
    const w = b.input('w', 'float32', [4, 5]);
    const labels = b.input('labels', 'int64', ['n']);
    const logits = b.matmul(x, w);
    const lse = b.reduceLogSumExp(logits, [-1]);
    const picked = b.squeeze(b.gatherElements(logits, b.unsqueeze(labels, [-1]), 1), [-1]);
    const loss = b.reduceMean(b.sub(lse, picked));
    const feeds = {
      x: randomTensor(r, [3, 4], -2, 2),
      w: randomTensor(r, [4, 5]),
      labels: tensor('int64', [3], [4, 0, 4]),
    };

    // Independent value: −mean log softmax(logits)[label], computed directly in TS.
    const lg = evaluate(b.graph, feeds, [logits])[logits.name]!;
    let ce = 0;
    const softmaxMinusOnehot: number[] = [];
    for (let i = 0; i < 3; i++) {
      const row = Array.from(lg.data.subarray(i * 5, i * 5 + 5));
      const z = row.reduce((s, v) => s + Math.exp(v), 0);
      ce -= Math.log(Math.exp(row[feeds.labels.data[i]!]!) / z) / 3;
      for (const [j, v] of row.entries()) {
        softmaxMinusOnehot.push((Math.exp(v) / z - (j === feeds.labels.data[i] ? 1 : 0)) / 3);
      }
    }
    const [gLogits] = b.grad(loss, [logits], { asOutputs: false });
    const out = evaluate(b.graph, feeds, [loss, gLogits!]);
    expect(out[loss.name]!.data[0]).toBeCloseTo(ce, 12);
    for (const [i, v] of out[gLogits!.name]!.data.entries())
      expect(v).toBeCloseTo(softmaxMinusOnehot[i]!, 12);
    await check(b, feeds, loss, [w, x]);
  });

  it('logits only at gathered positions; labels picked by Gather on the flattened logits', async () => {
    const r = testRandom(4);
    const b = new GraphBuilder('ce-gather');
    const hidden = b.input('hidden', 'float32', ['seq', 6]);
    const pos = b.input('positions', 'int64', ['p']);
    const labels = b.input('labels', 'int64', ['p']);
    const w = b.input('lm_head', 'float32', [6, 7]);
    const logits = b.matmul(b.gather(hidden, pos, 0), w);
    const flat = b.reshape(logits, [-1]);
    const p = b.squeeze(b.shape(pos), [0]);
    const idx = b.add(b.mul(b.range(0, p, 1), 7), labels);
    const logp = b.sub(b.gather(flat, idx, 0), b.reduceLogSumExp(logits, [1]));
    const loss = b.neg(b.reduceSum(logp));
    const feeds = {
      hidden: randomTensor(r, [5, 6]),
      positions: tensor('int64', [3], [1, 4, 4]),
      labels: tensor('int64', [3], [6, 0, 2]),
      lm_head: randomTensor(r, [6, 7]),
    };
    await check(b, feeds, loss, [hidden, w]);
  });
});

describe('normalisation and attention', () => {
  it('RMSNorm (x · 1/√(mean x² + ε) · w)', async () => {
    const r = testRandom(5);
    const b = new GraphBuilder('rmsnorm');
    const x = b.input('x', 'float32', [2, 3, 8]);
    const w = b.input('w', 'float32', [8]);
    const target = b.input('t', 'float32', [2, 3, 8]);
    const inv = b.reciprocal(b.sqrt(b.add(b.reduceMean(b.mul(x, x), [-1], true), 1e-6)));
    const y = b.mul(b.mul(x, inv), w);
    const loss = b.reduceSum(b.mul(y, target));
    await check(
      b,
      {
        x: randomTensor(r, [2, 3, 8]),
        w: randomTensor(r, [8], 0.5, 1.5),
        t: randomTensor(r, [2, 3, 8]),
      },
      loss,
      [x, w],
    );
  });

  it('single-head attention with a causal additive mask from Trilu', async () => {
    const r = testRandom(6);
    const T = 4;
    const D = 3;
    const b = new GraphBuilder('attn1');
    const x = b.input('x', 'float32', [T, D]);
    const [wq, wk, wv] = ['wq', 'wk', 'wv'].map((n) => b.input(n, 'float32', [D, D])) as [
      Value,
      Value,
      Value,
    ];
    const target = b.input('t', 'float32', [T, D]);
    const lower = b.trilu(b.constantOfShape([T, T], 1), { upper: false });
    const mask = b.mul(b.sub(lower, 1), 1e4);
    const scores = b.add(
      b.div(b.matmul(b.matmul(x, wq), b.transpose(b.matmul(x, wk))), Math.sqrt(D)),
      mask,
    );
    const y = b.matmul(b.softmax(scores, -1), b.matmul(x, wv));
    const loss = b.reduceSum(b.mul(y, target));
    const feeds: Record<string, HostTensor> = {
      x: randomTensor(r, [T, D]),
      t: randomTensor(r, [T, D]),
    };
    for (const n of ['wq', 'wk', 'wv']) feeds[n] = randomTensor(r, [D, D]);
    // The first row attends only to itself: y[0] = v[0] (hand derivation of the causal mask).
    const v = evaluate(b.graph, feeds, [b.matmul(x, wv), y]);
    const [vv, yy] = Object.values(v) as [HostTensor, HostTensor];
    for (let j = 0; j < D; j++) expect(yy.data[j]).toBeCloseTo(vv.data[j]!, 10);
    await check(b, feeds, loss, [x, wq, wk, wv]);
  });

  it('multi-head attention over symbolic batch/seq, mask built from the runtime seq length', async () => {
    const r = testRandom(8);
    const D = 8;
    const H = 2;
    const Dh = D / H;
    const b = new GraphBuilder('mha');
    const x = b.input('x', 'float32', ['batch', 'seq', D]);
    const [wq, wk, wv, wo] = ['wq', 'wk', 'wv', 'wo'].map((n) =>
      b.input(n, 'float32', [D, D]),
    ) as Value[];
    const target = b.input('t', 'float32', ['batch', 'seq', D]);
    const bt = b.shape(x, 0, 2);
    const heads = (w: Value) =>
      b.transpose(b.reshape(b.matmul(x, w), b.concat([bt, b.ints([H, Dh])], 0)), [0, 2, 1, 3]);
    const [q, k, v] = [heads(wq!), heads(wk!), heads(wv!)];
    const seq = b.shape(x, 1, 2);
    const lower = b.trilu(b.constantOfShape(b.concat([seq, seq], 0), 1), { upper: false });
    const mask = b.mul(b.sub(lower, 1), 1e4);
    const att = b.softmax(
      b.add(b.div(b.matmul(q, b.transpose(k, [0, 1, 3, 2])), Math.sqrt(Dh)), mask),
      -1,
    );
    const merged = b.reshape(
      b.transpose(b.matmul(att, v), [0, 2, 1, 3]),
      b.concat([bt, b.ints([D])], 0),
    );
    expect(merged.shape).toEqual(['batch', 'seq', D]);
    const y = b.matmul(merged, wo!);
    const loss = b.reduceSum(b.mul(y, target));
    const params: Record<string, HostTensor> = {};
    for (const n of ['wq', 'wk', 'wv', 'wo']) params[n] = randomTensor(r, [D, D], -0.5, 0.5);
    const grads = await check(
      b,
      { ...params, x: randomTensor(r, [2, 3, D]), t: randomTensor(r, [2, 3, D]) },
      loss,
      [x, wq!, wk!, wv!, wo!],
    );
    expect(grads[0]!.shape).toEqual(['batch', 'seq', D]);
    // The same graph at another batch and sequence length, in ORT and the evaluator.
    const feeds = { ...params, x: randomTensor(r, [1, 5, D]), t: randomTensor(r, [1, 5, D]) };
    const got = await runOrt(b.graph, feeds);
    expect(got['grad.x']!.shape).toEqual([1, 5, D]);
    await expectOrtMatches(b.graph, feeds);
  });
});

describe('2-layer MLP with LoRA adapters', () => {
  function mlp() {
    const b = new GraphBuilder('lora-mlp');
    const x = b.input('x', 'float32', ['n', 4]);
    const y = b.input('y', 'float32', ['n', 3]);
    const p = (name: string, shape: number[]) => b.input(name, 'float32', shape);
    const [w1, b1, a1, bb1, w2, b2, a2, bb2] = [
      p('w1', [4, 8]),
      p('b1', [8]),
      p('lora_A1', [4, 2]),
      p('lora_B1', [2, 8]),
      p('w2', [8, 3]),
      p('b2', [3]),
      p('lora_A2', [8, 2]),
      p('lora_B2', [2, 3]),
    ] as Value[];
    const lora = (h: Value, a: Value, bb: Value) => b.mul(b.matmul(b.matmul(h, a), bb), 0.5);
    const h = b.tanh(b.add(b.add(b.matmul(x, w1!), b1!), lora(x, a1!, bb1!)));
    const out = b.add(b.add(b.matmul(h, w2!), b2!), lora(h, a2!, bb2!));
    const d = b.sub(out, y);
    const loss = b.reduceMean(b.mul(d, d));
    return { b, loss, frozen: [w1!, b1!, w2!, b2!, x], lora: [a1!, bb1!, a2!, bb2!] };
  }
  const feeds = () => {
    const r = testRandom(9);
    const shapes: Record<string, number[]> = {
      x: [5, 4],
      y: [5, 3],
      w1: [4, 8],
      b1: [8],
      lora_A1: [4, 2],
      lora_B1: [2, 8],
      w2: [8, 3],
      b2: [3],
      lora_A2: [8, 2],
      lora_B2: [2, 3],
    };
    return Object.fromEntries(Object.entries(shapes).map(([n, s]) => [n, randomTensor(r, s)]));
  };

  it('gradients of the LoRA parameters only, by finite differences and in ORT', async () => {
    const { b, loss, lora } = mlp();
    await check(b, feeds(), loss, lora);
    expect(b.graph.outputs.map((o) => o.name)).toEqual([
      'grad.lora_A1',
      'grad.lora_B1',
      'grad.lora_A2',
      'grad.lora_B2',
      'loss',
    ]);
  });

  it('builds no gradient for the frozen weights (fewer nodes than differentiating everything)', () => {
    const only = mlp();
    only.b.grad(only.loss, only.lora);
    const all = mlp();
    all.b.grad(all.loss, [...all.lora, ...all.frozen]);
    const count = (g: GraphBuilder) => g.graph.prune().nodes.length;
    expect(count(only.b)).toBeLessThan(count(all.b));
    // No backward MatMul produces a [4, 8] (w1) or [8, 3] (w2) gradient.
    const backward = only.b.graph.nodes.filter(
      (n) => n.name.includes('.grad/') && n.op === 'MatMul',
    );
    for (const n of backward) {
      expect(n.outputs[0]!.shape).not.toEqual([4, 8]);
      expect(n.outputs[0]!.shape).not.toEqual([8, 3]);
    }
  });
});

describe('stop-gradient (GradOptions.stop)', () => {
  it('a stopped value is a constant: d/dx Σ x·sg(x) = x, and exp(x − sg(x)) = 1 with gradient 1', async () => {
    // The PPO ratio of an on-policy step: the old log-probs are the forward's own, detached.
    const b = new GraphBuilder('stop_gradient');
    const x = b.input('x', 'float32', [2, 3]);
    const sx = b.identity(x);
    const ratio = b.exp(b.sub(x, sx));
    const loss = b.add(b.reduceSum(b.mul(x, sx)), b.reduceSum(ratio));
    const [g] = b.grad(loss, [x], { stop: [sx] });
    b.output(loss, 'loss');
    b.output(ratio, 'ratio');
    const xs = [0.5, -1, 2, 0.25, 3, -0.75];
    const feeds = { x: tensor('float32', [2, 3], xs) };
    const out = evaluate(b.graph, feeds, [g!, ratio]);
    // By hand: d/dx Σ x·c = c = x (not 2x, as without the stop); d/dx Σ exp(x − c) = exp(0) = 1.
    expect(Array.from(out[g!.name]!.data)).toEqual(xs.map((v) => v + 1));
    expect(Array.from(out[ratio.name]!.data)).toEqual([1, 1, 1, 1, 1, 1]);
    const ort = await runOrt(b.graph, feeds);
    expect(Array.from(ort['grad.x']!.data)).toEqual(xs.map((v) => v + 1));
    // Without the stop the same graph differentiates through both factors: 2x.
    const free = new GraphBuilder('no_stop');
    const y = free.input('x', 'float32', [2, 3]);
    const [gy] = free.grad(free.reduceSum(free.mul(y, free.identity(y))), [y]);
    expect(Array.from(evaluate(free.graph, feeds, [gy!])[gy!.name]!.data)).toEqual(
      xs.map((v) => 2 * v),
    );
  });
});
