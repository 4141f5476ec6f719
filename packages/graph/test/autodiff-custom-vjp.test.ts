// Hand-written gradients (b.customVjp): a region's nodes are not differentiated, its `vjp` runs
// instead. The example is a log-sum-exp over the columns of h·Wᵀ taken in two halves, with a
// backward written per half (the shape of the chunked LM head in @flowgrpo/models). Expected gradients come from autodiff of the same function written in one
// piece (float64 evaluator), from central finite differences, and from a real ORT session.
import { describe, expect, it } from 'vitest';
import {
  checkGradients,
  evaluate,
  GraphBuilder,
  GraphError,
  type HostTensor,
  type Value,
} from '../src/index.js';
import { randomTensor, testRandom } from '../src/testing/index.js';
import { expectClose, runOrt } from './graph-helpers.js';

const r = testRandom(7);
const feeds: Record<string, HostTensor> = {
  x: randomTensor(r, [3, 4], -2, 2),
  w: randomTensor(r, [6, 4]),
  v: randomTensor(r, [3, 1]),
};

/** loss = Σ v ⊙ log Σ_cols exp(tanh(x)·Wᵀ), with the LSE as a custom-VJP region or not. */
function build(custom: boolean) {
  const b = new GraphBuilder(custom ? 'lse_custom' : 'lse_autodiff');
  const x = b.input('x', 'float32', ['n', 4]);
  const w = b.input('w', 'float32', [6, 4]);
  const v = b.input('v', 'float32', ['n', 1]);
  const h = b.tanh(x); // a gradient flows into the region through h
  let lse: Value;
  if (custom) {
    const halves = [b.slice(w, [0], [3], [0]), b.slice(w, [3], [6], [0])];
    const parts = halves.map((wi) =>
      b.reduceLogSumExp(b.gemm(h, wi, undefined, { transB: true }), [1], true),
    );
    lse = b.reduceLogSumExp(b.concat(parts, 1), [1], true);
    b.customVjp({
      name: 'lse_halves',
      inputs: [h],
      outputs: [lse],
      // dh = gy · Σ_halves softmax_i · W_i (the builder reuses each half's logits: same op, same
      // inputs).
      vjp: ({ b, gy }) => {
        let dh: Value | undefined;
        for (const wi of halves) {
          const z = b.gemm(h, wi, undefined, { transB: true });
          const p = b.exp(b.sub(z, lse));
          const part = b.gemm(p, wi);
          dh = dh ? b.add(dh, part) : part;
        }
        return [b.mul(gy[0]!, dh!)];
      },
    });
  } else {
    lse = b.reduceLogSumExp(b.gemm(h, w, undefined, { transB: true }), [1], true);
  }
  const loss = b.reduceSum(b.mul(v, lse));
  return { b, x, w, v, loss };
}

describe('custom VJP regions (b.customVjp)', () => {
  it('the hand-written backward gives autodiff’s gradient, the finite differences and ORT’s numbers', async () => {
    const ref = build(false);
    const [rx, rv] = ref.b.grad(ref.loss, [ref.x, ref.v], { asOutputs: false });
    const want = evaluate(ref.b.graph, feeds, [rx!, rv!]);

    const got = build(true);
    const grads = got.b.grad(got.loss, [got.x, got.v]);
    const out = evaluate(got.b.graph, feeds, grads);
    // The same function in float64: equal up to summation order.
    expectClose(out[grads[0]!.name]!, want[rx!.name]!, 1e-12, 'grad.x');
    expectClose(out[grads[1]!.name]!, want[rv!.name]!, 1e-12, 'grad.v');
    for (const c of checkGradients(got.b.graph, feeds, got.loss, [got.x, got.v], grads))
      expect(c.maxError, c.name).toBeLessThan(1e-6);

    // Nothing inside the region was differentiated: every backward node is the region's own or
    // belongs to a node outside it (tanh, the weighting by v, the sum).
    const backward = got.b.graph.nodes.filter((n) => n.name.includes('.grad/'));
    const inside = got.b.graph.nodes.filter(
      (n) => n.op === 'ReduceLogSumExp' || n.op === 'Concat' || n.op === 'Slice',
    );
    for (const n of inside)
      expect(
        backward.some((g) => g.name.startsWith(`${n.name}.grad/`)),
        n.name,
      ).toBe(false);
    expect(backward.some((n) => n.name.startsWith('lse_halves.grad/'))).toBe(true);

    got.b.output(got.loss, 'loss');
    const ort = await runOrt(got.b.graph, feeds);
    expectClose(ort['grad.x']!, want[rx!.name]!, 1e-5, 'ORT grad.x');
  });

  it('a region node may read another of its outputs (it is no side input)', () => {
    const b = new GraphBuilder('chain');
    const x = b.input('x', 'float32', [2]);
    const y = b.exp(x);
    const z = b.mul(y, y); // inside the region, reads the output y
    b.customVjp({
      name: 'chain',
      inputs: [x],
      outputs: [y, z],
      // d/dx (y + z) = e^x + 2e^{2x}
      vjp: ({ b, gy }) => [b.add(b.mul(gy[0]!, y), b.mul(b.mul(gy[1]!, z), 2))],
    });
    const [gx] = b.grad(b.reduceSum(b.add(y, z)), [x], { asOutputs: false });
    const f = { x: randomTensor(r, [2]) };
    const want = Float64Array.from(f.x.data, (v) => Math.exp(v) + 2 * Math.exp(2 * v));
    expectClose(evaluate(b.graph, f, [gx!])[gx!.name]!, { ...f.x, data: want }, 1e-12);
  });

  it('an output the loss does not use reaches the vjp as undefined; no gradient w.r.t. w is asked', () => {
    const b = new GraphBuilder('unused_output');
    const x = b.input('x', 'float32', [2, 3]);
    const w = b.input('w', 'float32', [2, 3]);
    const y = b.mul(x, w);
    const unused = b.exp(x);
    const seen: { gy: readonly (Value | undefined)[]; needs: readonly boolean[] }[] = [];
    b.customVjp({
      name: 'pair',
      inputs: [x, w],
      outputs: [y, unused],
      vjp: (c) => {
        seen.push({ gy: c.gy, needs: c.needs });
        return [c.b.mul(c.gy[0]!, w), undefined];
      },
    });
    const [gx] = b.grad(b.reduceSum(y), [x], { asOutputs: false });
    expect(seen).toHaveLength(1);
    expect(seen[0]!.gy[1]).toBeUndefined();
    expect(seen[0]!.needs).toEqual([true, false]);
    const f = { x: randomTensor(r, [2, 3]), w: randomTensor(r, [2, 3]) };
    // d/dx Σ x⊙w = w.
    expectClose(evaluate(b.graph, f, [gx!])[gx!.name]!, f.w, 1e-15);
  });

  it('a malformed region is a GraphError naming what is wrong', () => {
    // A value inside the region used outside it, not listed as an output: its gradient would be lost.
    const a = new GraphBuilder('leak');
    const ax = a.input('x', 'float32', [2]);
    const inner = a.exp(ax);
    const out = a.mul(inner, 2);
    a.customVjp({ name: 'leaky', inputs: [ax], outputs: [out], vjp: ({ gy }) => [gy[0]] });
    expect(() => a.grad(a.reduceSum(a.add(out, inner)), [ax])).toThrow(
      /custom VJP 'leaky': .* is used outside it but is not one of its outputs/,
    );

    // A value carrying a gradient enters the region without being one of its inputs.
    const c = new GraphBuilder('side_door');
    const cx = c.input('x', 'float32', [2]);
    const cy = c.input('y', 'float32', [2]);
    const side = c.exp(cy);
    const cout = c.mul(c.sin(cx), side);
    c.customVjp({ name: 'side', inputs: [cx], outputs: [cout], vjp: ({ gy }) => [gy[0]] });
    expect(() => c.grad(c.reduceSum(cout), [cx, cy])).toThrow(
      /custom VJP 'side': .* carries a gradient into it but is not one of its inputs/,
    );

    // An input computed after the region's first node: its VJP would run before the region's.
    const l = new GraphBuilder('late_input');
    const lx = l.input('x', 'float32', [2]);
    const ly = l.input('y', 'float32', [2]);
    const early = l.exp(lx); // the region's first node
    const late = l.sin(ly); // an input made after it
    const lout = l.mul(early, late);
    l.customVjp({
      name: 'late',
      inputs: [lx, late],
      outputs: [lout],
      vjp: ({ gy }) => [gy[0], gy[0]],
    });
    expect(() => l.grad(l.reduceSum(lout), [lx, ly])).toThrow(
      /custom VJP 'late': its input .* is computed after the region's first node/,
    );

    // An output that does not depend on the inputs.
    const d = new GraphBuilder('detached');
    const dx = d.input('x', 'float32', [2]);
    const dz = d.input('z', 'float32', [2]);
    d.customVjp({ name: 'nothing', inputs: [dx], outputs: [d.exp(dz)], vjp: () => [undefined] });
    const e = (() => {
      try {
        d.grad(d.reduceSum(dx), [dx]);
      } catch (err) {
        return err;
      }
    })();
    expect(GraphError.isInstance(e)).toBe(true);
    expect((e as Error).message).toMatch(
      /custom VJP 'nothing': output .* does not depend on its inputs/,
    );
  });
});
