// AdamW graph against hand-computed steps of PyTorch's documented algorithm
// (torch.optim.AdamW: p ← p − lr·wd·p; m ← β1 m + (1−β1) g; v ← β2 v + (1−β2) g²;
// p ← p − lr/(1−β1^t) · m / (√v/√(1−β2^t) + ε)) and torch.nn.utils.clip_grad_norm_
// (g ← g · min(1, max_norm/(‖g‖+1e-6)) over all parameters together).
import { describe, expect, it } from 'vitest';
import {
  appendAdamW,
  buildAdamWGraph,
  evaluate,
  GraphBuilder,
  GraphError,
  type HostTensor,
  tensor,
} from '../src/index.js';
import { randomTensor, testRandom } from '../src/testing/index.js';
import { expectClose, runOrt } from './graph-helpers.js';

const f64 = (shape: number[], xs: number[]) => tensor('float64', shape, xs);

describe('AdamW graph', () => {
  it('three steps equal the hand-computed PyTorch AdamW updates', () => {
    // lr 0.1, betas (0.9, 0.999), eps 1e-8, weight_decay 0.01, p0 = [1, −2], no clipping.
    // t=1, g=[0.5, −1]: p·(1−0.001) = [0.999, −1.998]; m = [0.05, −0.1]; v = [2.5e-4, 1e-3];
    //   bc1 = 0.1, √bc2 = √0.001; denom = √v/√bc2 + ε = [0.50000001, 1.00000001];
    //   p = [0.999 − 1·0.05/0.50000001, −1.998 + 1·0.1/1.00000001] = [0.899000002, −1.898000001].
    // t=2, g=[0.1, 0.2]: m = [0.055, −0.07]; v = [2.5975e-4, 1.039e-3]; bc1 = 0.19, bc2 = 0.001999;
    //   denom = [0.360471881281, 0.720943752562]; p = [0.817796906383, −1.844999393989].
    // t=3, g=[−0.3, 0]: m = [0.0195, −0.063]; v = [3.4949025e-4, 1.037961e-3]; bc1 = 0.271,
    //   bc2 = 0.002997001; denom = [0.341486941600, 0.588500832237]; p = [0.795907814855, −1.803651931389].
    const { graph } = buildAdamWGraph({ params: [{ name: 'w', shape: [2] }], dtype: 'float64' });
    let p = f64([2], [1, -2]);
    let m = f64([2], [0, 0]);
    let v = f64([2], [0, 0]);
    const grads = [
      [0.5, -1],
      [0.1, 0.2],
      [-0.3, 0],
    ];
    const want = [
      { m: [0.05, -0.1], v: [2.5e-4, 1e-3], p: [0.899000002, -1.898000001] },
      { m: [0.055, -0.07], v: [2.5975e-4, 1.039e-3], p: [0.8177969063826517, -1.8449993939894944] },
      {
        m: [0.0195, -0.063],
        v: [3.4949025e-4, 1.037961e-3],
        p: [0.7959078148551253, -1.8036519313891806],
      },
    ];
    grads.forEach((g, i) => {
      const out = evaluate(graph, {
        lr: f64([], [0.1]),
        step: tensor('float32', [], [i + 1]),
        w: p,
        'grad.w': f64([2], g),
        'm.w': m,
        'v.w': v,
      });
      p = out['new.w']!;
      m = out['new.m.w']!;
      v = out['new.v.w']!;
      for (const [got, exp] of [
        [p, want[i]!.p],
        [m, want[i]!.m],
        [v, want[i]!.v],
      ] as const) {
        for (const [k, x] of got.data.entries()) expect(x).toBeCloseTo(exp[k]!, 12);
      }
      expect(out.grad_norm!.data[0]).toBeCloseTo(Math.hypot(...g), 12);
    });
  });

  it('clips the global norm over all parameters and reports the pre-clip norm', () => {
    // g1 = [3, 4], g2 = [12]: ‖g‖ = √(9+16+144) = 13; max_norm 1.3 → scale 1.3/(13+1e-6);
    // m = (1−β1)·scale·g, v = (1−β2)·(scale·g)²; lr 0.01, wd 0 so p − lr·m̂/(√v̂+ε) with
    // m̂ = scale·g, √v̂ = scale·|g| → p − 0.01·sign(g) (up to ε).
    const { graph } = buildAdamWGraph({
      params: [
        { name: 'a', shape: [2] },
        { name: 'b', shape: [1] },
      ],
      dtype: 'float64',
      weightDecay: 0,
      maxGradNorm: 1.3,
      stepDtype: 'int64',
    });
    const out = evaluate(graph, {
      lr: f64([], [0.01]),
      step: tensor('int64', [], [1]),
      a: f64([2], [1, 1]),
      'grad.a': f64([2], [3, 4]),
      'm.a': f64([2], [0, 0]),
      'v.a': f64([2], [0, 0]),
      b: f64([1], [0]),
      'grad.b': f64([1], [12]),
      'm.b': f64([1], [0]),
      'v.b': f64([1], [0]),
    });
    const scale = 1.3 / (13 + 1e-6);
    expect(out.grad_norm!.data[0]).toBeCloseTo(13, 12);
    expect(Array.from(out['new.m.a']!.data)).toEqual(
      [0.1 * scale * 3, 0.1 * scale * 4].map((x) => expect.closeTo(x, 14)),
    );
    expect(out['new.v.b']!.data[0]).toBeCloseTo(0.001 * (scale * 12) ** 2, 14);
    const pa = out['new.a']!.data;
    expect(pa[0]).toBeCloseTo(1 - (0.01 * (scale * 3)) / (scale * 3 + 1e-8), 12);
    expect(out['new.b']!.data[0]).toBeCloseTo(-0.01, 8);
  });

  it('hyper-parameters as inputs, float step, ORT float32 equals a plain-TS PyTorch AdamW over 5 steps', async () => {
    const r = testRandom(7);
    const shapes = { w: [3, 2], bias: [2] };
    const { graph } = buildAdamWGraph({
      params: Object.entries(shapes).map(([name, shape]) => ({ name, shape })),
      beta1: 'input',
      beta2: 'input',
      eps: 'input',
      weightDecay: 'input',
      maxGradNorm: 'input',
      stepDtype: 'float32',
    });
    const hp = {
      beta1: 0.8,
      beta2: 0.95,
      eps: 1e-6,
      weight_decay: 0.1,
      max_grad_norm: 0.5,
      lr: 0.05,
    };
    // Independent reference: the algorithm elementwise in float64.
    const ref: Record<string, { p: number[]; m: number[]; v: number[] }> = {};
    const cur: Record<string, HostTensor> = {};
    for (const [n, s] of Object.entries(shapes)) {
      const k = s.reduce((a, d) => a * d, 1);
      const p = Array.from({ length: k }, () => Math.fround(r() * 2 - 1));
      ref[n] = { p, m: new Array(k).fill(0), v: new Array(k).fill(0) };
      cur[n] = tensor('float32', s, p);
      cur[`m.${n}`] = tensor('float32', s, 0);
      cur[`v.${n}`] = tensor('float32', s, 0);
    }
    for (let t = 1; t <= 5; t++) {
      const g: Record<string, number[]> = {};
      for (const [n, s] of Object.entries(shapes)) {
        g[n] = Array.from({ length: s.reduce((a, d) => a * d, 1) }, () => Math.fround(r() * 2 - 1));
      }
      const norm = Math.sqrt(
        Object.values(g)
          .flat()
          .reduce((a, x) => a + x * x, 0),
      );
      const clip = Math.min(1, hp.max_grad_norm / (norm + 1e-6));
      for (const n of Object.keys(shapes)) {
        const st = ref[n]!;
        st.p = st.p.map((x, i) => {
          const gi = g[n]![i]! * clip;
          st.m[i] = hp.beta1 * st.m[i]! + (1 - hp.beta1) * gi;
          st.v[i] = hp.beta2 * st.v[i]! + (1 - hp.beta2) * gi * gi;
          const denom = Math.sqrt(st.v[i]!) / Math.sqrt(1 - hp.beta2 ** t) + hp.eps;
          return (
            x * (1 - hp.lr * hp.weight_decay) - (hp.lr / (1 - hp.beta1 ** t)) * (st.m[i]! / denom)
          );
        });
      }
      const feeds: Record<string, HostTensor> = { ...cur, step: tensor('float32', [], t) };
      for (const [k, x] of Object.entries(hp)) feeds[k] = tensor('float32', [], Math.fround(x));
      for (const [n, s] of Object.entries(shapes)) feeds[`grad.${n}`] = tensor('float32', s, g[n]!);
      const out = await runOrt(graph, feeds);
      expect(out.grad_norm!.data[0]).toBeCloseTo(norm, 5);
      for (const [n, s] of Object.entries(shapes)) {
        expectClose(out[`new.${n}`]!, tensor('float64', s, ref[n]!.p), 1e-5, n);
        cur[n] = out[`new.${n}`]!;
        cur[`m.${n}`] = out[`new.m.${n}`]!;
        cur[`v.${n}`] = out[`new.v.${n}`]!;
      }
    }
  });

  it('appendAdamW after grad makes one train+update graph equal to the two-graph route', () => {
    // Reference: the standalone optimizer graph fed with the train-step gradients (tested above).
    const r = testRandom(3);
    const feeds: Record<string, HostTensor> = {
      x: randomTensor(r, [4, 3]),
      w: randomTensor(r, [3, 2]),
      'm.w': randomTensor(r, [3, 2], 0, 0.1),
      'v.w': randomTensor(r, [3, 2], 0, 0.1),
      lr: tensor('float32', [], 0.01),
      step: tensor('float32', [], 3),
    };
    const b = new GraphBuilder('train_and_update');
    const x = b.input('x', 'float32', [4, 3]);
    const w = b.input('w', 'float32', [3, 2]);
    const y = b.tanh(b.matmul(x, w));
    const loss = b.reduceMean(b.mul(y, y));
    const [g] = b.grad(loss, [w], { asOutputs: false });
    const state = {
      param: w,
      grad: g!,
      m: b.input('m.w', 'float32', [3, 2]),
      v: b.input('v.w', 'float32', [3, 2]),
    };
    const upd = appendAdamW(
      b,
      [state],
      b.input('lr', 'float32', []),
      b.input('step', 'float32', []),
      { maxGradNorm: 0.1 },
    );
    b.output(upd.params[0]!, 'new.w');
    b.output(upd.gradNorm, 'grad_norm');
    const fused = evaluate(b.graph, feeds);

    const gOnly = new GraphBuilder('grads');
    const x2 = gOnly.input('x', 'float32', [4, 3]);
    const w2 = gOnly.input('w', 'float32', [3, 2]);
    const y2 = gOnly.tanh(gOnly.matmul(x2, w2));
    gOnly.grad(gOnly.reduceMean(gOnly.mul(y2, y2)), [w2]);
    const grads = evaluate(gOnly.graph, feeds);
    const { graph } = buildAdamWGraph({ params: [{ name: 'w', shape: [3, 2] }], maxGradNorm: 0.1 });
    const twoStep = evaluate(graph, { ...feeds, 'grad.w': grads['grad.w']! });
    expectClose(fused['new.w']!, twoStep['new.w']!, 1e-12);
    expectClose(fused.grad_norm!, twoStep.grad_norm!, 1e-12);
  });

  it('rejects an empty parameter list', () => {
    expect(() => buildAdamWGraph({ params: [] })).toThrow(GraphError);
  });
});
