// The IR itself: shape/dtype inference and its errors, constant folding, dead-code elimination,
// ONNX export (standard ops only, unique names), the evaluator's feed checks and autodiff's
// handling of fan-out, integer inputs and runtime-only broadcast dims. Expected values are hand
// derivations unless a test says otherwise.
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as ort from 'onnxruntime-node';
import { describe, expect, it } from 'vitest';
import {
  checkGradients,
  decodeModel,
  encodeModel,
  evaluate,
  GraphBuilder,
  GraphError,
  tensor,
  toOnnxModel,
  WeightsFileWriter,
} from '../src/index.js';
import { fromFloat16Bits, tensorBytes, toFloat16Bits } from '../src/ir/tensor.js';
import { randomTensor, testRandom } from '../src/testing/index.js';
import { expectClose, expectOrtMatches, fromOrt, toOrt } from './graph-helpers.js';

describe('shape and dtype inference', () => {
  it('keeps symbolic dims through matmul, reshape of Shape arithmetic, reductions and gathers', () => {
    const b = new GraphBuilder();
    const x = b.input('x', 'float32', ['batch', 'seq', 8]);
    const w = b.input('w', 'float32', [8, 6]);
    const y = b.matmul(x, w);
    expect(y.shape).toEqual(['batch', 'seq', 6]);
    const r = b.reshape(y, b.concat([b.shape(y, 0, 2), b.ints([2, 3])], 0));
    expect(r.shape).toEqual(['batch', 'seq', 2, 3]);
    expect(b.reshape(r, [0, 0, -1]).shape).toEqual(['batch', 'seq', 6]);
    expect(b.reshape(r, [-1, 6]).shape).toHaveLength(2);
    expect(b.reduceSum(r, [1, -1], true).shape).toEqual(['batch', 1, 2, 1]);
    expect(b.reduceMax(r, [1]).shape).toEqual(['batch', 2, 3]);
    const ids = b.input('ids', 'int64', ['batch', 'seq']);
    expect(b.gather(b.input('emb', 'float32', [100, 8]), ids).shape).toEqual(['batch', 'seq', 8]);
    expect(b.transpose(r, [0, 2, 1, 3]).shape).toEqual(['batch', 2, 'seq', 3]);
    expect(b.less(y, 0).dtype).toBe('bool');
    expect(b.add(b.input('a', 'float32', ['n', 1]), b.input('c', 'float32', [5])).shape).toEqual([
      'n',
      5,
    ]);
  });

  it('errors name the node, its op and its input shapes', () => {
    const b = new GraphBuilder();
    const x = b.input('x', 'float32', [2, 3]);
    const w = b.input('w', 'float32', [4, 5]);
    let err: unknown;
    try {
      b.withScope('layer0', () => b.matmul(x, w));
    } catch (e) {
      err = e;
    }
    expect(GraphError.isInstance(err)).toBe(true);
    const ge = err as GraphError;
    expect(ge.code).toBe('GRAPH_ERROR');
    expect(ge.op).toBe('MatMul');
    expect(ge.node).toMatch(/^layer0\/MatMul_\d+$/);
    expect(ge.inputShapes).toEqual([
      [2, 3],
      [4, 5],
    ]);
    expect(ge.message).toContain('inner dims differ: 3 vs 4');
    expect(() => b.add(x, b.input('y', 'float32', [4]))).toThrow(/cannot broadcast dims 3 and 4/);
    expect(() => b.add(x, b.input('i', 'int64', [3]))).toThrow(/share one dtype/);
    expect(() => b.input('x', 'float32', [1])).toThrow(/already used/);
    expect(() => b.softmax(x, 2)).toThrow(/axis 2 is out of range/);
  });
});

describe('constant folding and dead code', () => {
  it('folds shape arithmetic on static dims and ops on constants', () => {
    const b = new GraphBuilder();
    const x = b.input('x', 'float32', [2, 3, 4]);
    const s = b.shape(x);
    expect(s.kind).toBe('constant');
    expect(Array.from(s.data!.data)).toEqual([2, 3, 4]);
    const five = b.add(b.scalar(2), b.scalar(3));
    expect(five.kind).toBe('constant');
    expect(five.data!.data[0]).toBe(5);
    const r = b.reshape(x, b.concat([b.shape(x, 0, 1), b.ints([-1])], 0));
    expect(r.shape).toEqual([2, 12]);
    expect(b.graph.nodes.map((n) => n.op)).toEqual(['Reshape']);
  });

  it('drops nodes the outputs do not need, in export and in prune()', () => {
    const b = new GraphBuilder();
    const x = b.input('x', 'float32', [3]);
    b.exp(x); // unused
    b.output(b.sigmoid(x), 'y');
    expect(toOnnxModel(b.graph).graph.nodes.map((n) => n.opType)).toEqual(['Sigmoid']);
    expect(b.graph.nodes).toHaveLength(2);
    b.graph.prune();
    expect(b.graph.nodes.map((n) => n.op)).toEqual(['Sigmoid']);
    // After pruning, building the dropped op again makes a new node.
    b.output(b.exp(x), 'e');
    expect(Array.from(evaluate(b.graph, { x: tensor('float32', [3], [0, 1, 2]) }).e!.data)).toEqual(
      [1, Math.E, Math.exp(2)],
    );
  });
});

describe('autodiff rules', () => {
  it('fan-out accumulates with Add: d(x·x + x)/dx = 2x + 1, no variadic Sum', () => {
    const b = new GraphBuilder();
    const x = b.input('x', 'float32', [3]);
    const loss = b.reduceSum(b.add(b.mul(x, x), x));
    const [g] = b.grad(loss, [x]);
    const out = evaluate(b.graph, { x: tensor('float32', [3], [1, -2, 0.5]) }, [g!]);
    expect(Array.from(out[g!.name]!.data)).toEqual([3, -3, 2]);
    expect(b.graph.nodes.some((n) => n.op === 'Sum')).toBe(false);
  });

  it('reuses forward values: the backward never recomputes a forward op', () => {
    const b = new GraphBuilder();
    const x = b.input('x', 'float32', [2, 5]);
    const y = b.softmax(b.tanh(b.sigmoid(b.exp(x))), -1);
    const loss = b.reduceLogSumExp(b.sqrt(b.add(b.mul(y, y), 1)), [0, 1]);
    b.grad(loss, [x]);
    const count = (op: string) => b.graph.prune().nodes.filter((n) => n.op === op).length;
    for (const op of ['Softmax', 'Tanh', 'Sigmoid', 'Exp', 'Sqrt', 'ReduceLogSumExp']) {
      // Exp also appears once in the LogSumExp rule, as exp(x − y) of a different input.
      expect(count(op), op).toBe(op === 'Exp' ? 2 : 1);
    }
  });

  it('a gradient rule that cannot apply names the forward node', () => {
    const b = new GraphBuilder();
    const x = b.input('x', 'float32', [2, 3]);
    const axes = b.input('axes', 'int64', [1]);
    const y = b.reduceSum(x, axes, false); // axes known only at run time
    expect(() => b.grad(b.reduceSum(y), [x])).toThrow(
      /ReduceSum_\d+ \(ReduceSum; inputs .*\): gradient: /,
    );
  });

  it('a given seed is the cotangent of a non-scalar loss: d(x²)·s = 2·x·s', () => {
    const b = new GraphBuilder();
    const x = b.input('x', 'float32', [3]);
    const s = b.input('s', 'float32', [3]);
    const [g] = b.grad(b.mul(x, x), [x], { seed: s });
    const out = evaluate(
      b.graph,
      { x: tensor('float32', [3], [1, 2, -3]), s: tensor('float32', [3], [0.5, -1, 2]) },
      [g!],
    );
    expect(Array.from(out[g!.name]!.data)).toEqual([1, -4, -12]);
  });

  it('rejects integer wrt and loss; unconnected parameters get zeros', () => {
    const b = new GraphBuilder();
    const x = b.input('x', 'float32', [2]);
    const i = b.input('i', 'int64', [2]);
    const unused = b.input('u', 'float32', [2, 2]);
    const loss = b.reduceSum(b.mul(x, b.cast(i, 'float32')));
    expect(() => b.grad(loss, [i])).toThrow(GraphError);
    expect(() => b.grad(b.reduceSum(i), [x])).toThrow(/floating point/);
    const [gx, gu] = b.grad(loss, [x, unused]);
    const out = evaluate(
      b.graph,
      { x: tensor('float32', [2], [1, 2]), i: tensor('int64', [2], [3, -4]) },
      [gx!, gu!],
    );
    expect(Array.from(out['grad.x']!.data)).toEqual([3, -4]);
    expect(Array.from(out['grad.u']!.data)).toEqual([0, 0, 0, 0]);
  });

  it('reduces broadcast gradients at run time when two symbolic dims differ', async () => {
    // x: [a], y: [b]; z = x + y needs a = b or one of them 1, unknown at build time.
    const b = new GraphBuilder();
    const x = b.input('x', 'float32', ['a']);
    const y = b.input('y', 'float32', ['b']);
    const z = b.add(x, y);
    const loss = b.reduceSum(b.mul(z, z));
    const grads = b.grad(loss, [x, y]);
    b.output(loss, 'loss');
    const r = testRandom(2);
    for (const [na, nb] of [
      [1, 4],
      [4, 1],
      [4, 4],
    ] as const) {
      const feeds = { x: randomTensor(r, [na]), y: randomTensor(r, [nb]) };
      for (const res of checkGradients(b.graph, feeds, loss, [x, y], grads))
        expect(res.maxError).toBeLessThan(1e-6);
      const out = evaluate(b.graph, feeds);
      expect(out['grad.x']!.shape).toEqual([na]);
      expect(out['grad.y']!.shape).toEqual([nb]);
      await expectOrtMatches(b.graph, feeds);
    }
  });
});

describe('gradients over symbolic dims', () => {
  it('slice, gather and mean along a run-time dim (scatter/Size paths) by FD and in ORT', async () => {
    const b = new GraphBuilder();
    const x = b.input('x', 'float32', ['n', 3]);
    const idx = b.input('idx', 'int64', ['k']);
    const tail = b.slice(x, [1], [2 ** 62], [0]); // rows 1.. of a symbolic n
    const picked = b.gather(x, idx, 0);
    const loss = b.add(b.reduceMean(b.mul(tail, tail)), b.reduceSum(b.mul(picked, b.exp(picked))));
    expect(tail.shape).toEqual([expect.any(String), 3]);
    const grads = b.grad(loss, [x]);
    b.output(loss, 'loss');
    const r = testRandom(12);
    for (const n of [2, 5]) {
      const feeds = { x: randomTensor(r, [n, 3]), idx: tensor('int64', [3], [0, n - 1, 0]) };
      for (const res of checkGradients(b.graph, feeds, loss, [x], grads))
        expect(res.maxError).toBeLessThan(1e-6);
      await expectOrtMatches(b.graph, feeds);
    }
  });
});

describe('slices of a symbolic dim', () => {
  it('an empty range is empty whatever the length (and ORT agrees); others stay symbolic', async () => {
    const b = new GraphBuilder();
    const x = b.input('x', 'float32', ['n', 3]);
    // ONNX clamps both ends to [0, n]: end ≤ start ≥ 0 is empty for every n.
    const none = b.slice(x, [0], [0], [0]);
    const none2 = b.slice(x, [2], [1], [0]);
    expect(none.shape).toEqual([0, 3]);
    expect(none2.shape).toEqual([0, 3]);
    // Not provably empty: a negative start (n − 1), a negative step, a start past n's unknown end.
    expect(b.slice(x, [-1], [0], [0]).shape![0]).toEqual(expect.any(String));
    expect(b.slice(x, [0], [1], [0]).shape![0]).toEqual(expect.any(String));
    expect(b.slice(x, [2], [0], [0], [-1]).shape![0]).toEqual(expect.any(String));
    b.output(b.concat([none, none2], 0), 'y');
    const r = testRandom(3);
    for (const n of [1, 4]) await expectOrtMatches(b.graph, { x: randomTensor(r, [n, 3]) });
  });
});

describe('export and evaluation', () => {
  it('writes unique names, only standard ai.onnx ops, and loads in onnxruntime-node', async () => {
    const b = new GraphBuilder('mlp');
    const x = b.input('x', 'float32', ['n', 4]);
    const w = b.initializer('w', randomTensor(testRandom(1), [4, 3]));
    const labels = b.input('labels', 'int64', ['n']);
    const logits = b.matmul(x, w);
    const loss = b.reduceMean(
      b.sub(
        b.reduceLogSumExp(logits, [1]),
        b.squeeze(b.gatherElements(logits, b.unsqueeze(labels, [1]), 1), [1]),
      ),
    );
    b.grad(loss, [w]);
    b.output(loss, 'loss');
    const model = toOnnxModel(b.graph, { opset: 21 });
    expect(model.opsetImports).toEqual([{ domain: '', version: 21 }]);
    const names = model.graph.nodes.map((n) => n.name);
    expect(new Set(names).size).toBe(names.length);
    const values = [
      ...model.graph.nodes.flatMap((n) => n.outputs),
      ...model.graph.inputs.map((i) => i.name),
      ...model.graph.initializers.map((t) => t.name),
    ];
    expect(new Set(values).size).toBe(values.length);
    for (const n of model.graph.nodes) {
      expect(n.domain ?? '').toBe('');
      expect(['LogSoftmax', 'Sum']).not.toContain(n.opType);
    }
    // The writer's bytes decode to the same node list and run in ORT.
    const bytes = encodeModel(model);
    expect(decodeModel(bytes).graph.nodes.map((n) => n.opType)).toEqual(
      model.graph.nodes.map((n) => n.opType),
    );
    const s = await ort.InferenceSession.create(bytes);
    const feeds = { x: randomTensor(testRandom(2), [2, 4]), labels: tensor('int64', [2], [0, 2]) };
    const out = await s.run({ x: toOrt(feeds.x), labels: toOrt(feeds.labels) });
    expect(out['grad.w']!.dims).toEqual([4, 3]);
    expect(out.loss!.data[0]).toBeCloseTo(evaluate(b.graph, feeds).loss!.data[0]!, 5);
  });

  it('exports external initializers by reference; the evaluator needs them fed', () => {
    const b = new GraphBuilder();
    const w = b.externalInitializer('embed', 'float32', [2, 2], {
      location: 'weights.data',
      offset: 64,
      length: 16,
    });
    b.output(b.neg(w), 'y');
    const init = toOnnxModel(b.graph).graph.initializers[0]!;
    expect(init).toEqual({
      name: 'embed',
      dataType: 1,
      dims: [2, 2],
      external: { location: 'weights.data', offset: 64, length: 16 },
    });
    expect(() => evaluate(b.graph, {})).toThrow(/external data/);
    expect(
      Array.from(evaluate(b.graph, { embed: tensor('float32', [2, 2], [1, 2, 3, 4]) }).y!.data),
    ).toEqual([-1, -2, -3, -4]);
  });

  it('initializers marked external go to one shared weights file that ORT reads', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'flowgrpo-graph-'));
    try {
      const w = randomTensor(testRandom(5), [8, 8]);
      const weights = new WeightsFileWriter(join(dir, 'weights.data'));
      const build = (
        name: string,
        f: (
          b: GraphBuilder,
          y: ReturnType<GraphBuilder['input']>,
        ) => ReturnType<GraphBuilder['input']>,
      ) => {
        const b = new GraphBuilder(name);
        const x = b.input('x', 'float32', [1, 8]);
        b.output(f(b, b.matmul(x, b.initializer('w', w, { external: true }))), 'y');
        return b.graph;
      };
      const g1 = build('a', (b, y) => b.tanh(y));
      const g2 = build('b', (b, y) => b.exp(y));
      const m1 = toOnnxModel(g1, { weights });
      const m2 = toOnnxModel(g2, { weights });
      weights.close();
      // One copy of the 256 bytes, referenced by both graphs at the same offset.
      expect(statSync(join(dir, 'weights.data')).size).toBe(256);
      expect(m1.graph.initializers[0]!.external).toEqual({
        location: 'weights.data',
        offset: 0,
        length: 256,
      });
      expect(m2.graph.initializers[0]!.external).toEqual(m1.graph.initializers[0]!.external);
      const feeds = { x: randomTensor(testRandom(6), [1, 8]) };
      for (const [g, m] of [
        [g1, m1],
        [g2, m2],
      ] as const) {
        writeFileSync(join(dir, `${g.name}.onnx`), encodeModel(m));
        const s = await ort.InferenceSession.create(join(dir, `${g.name}.onnx`));
        const out = await s.run({ x: toOrt(feeds.x) });
        const want = evaluate(g, feeds).y!;
        expectClose(fromOrt(out.y!), want);
        await s.release();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('checks fed shapes and symbolic dims bind consistently', () => {
    const b = new GraphBuilder();
    const x = b.input('x', 'float32', ['n', 2]);
    const y = b.input('y', 'float32', ['n']);
    b.output(b.add(b.reduceSum(x, [1]), y), 'z');
    expect(() =>
      evaluate(b.graph, { x: tensor('float32', [3, 2], 0), y: tensor('float32', [2], 0) }),
    ).toThrow(/n=3/);
    expect(() =>
      evaluate(b.graph, { x: tensor('float32', [3, 3], 0), y: tensor('float32', [3], 0) }),
    ).toThrow(/dim 1 is 3/);
  });

  it('outputs of inputs get an Identity; float16 and bfloat16 bytes round correctly', () => {
    const b = new GraphBuilder();
    const x = b.input('x', 'float32', [1]);
    expect(b.output(x, 'x_out').producer?.op).toBe('Identity');
    // The same value under two names: two outputs, both kept.
    const y = b.exp(x);
    b.output(y, 'y1');
    b.output(y, 'y2');
    expect(b.graph.outputs.map((o) => o.name)).toEqual(['x_out', 'y1', 'y2']);
    // Repeated identical ops are built once.
    expect(b.exp(x)).toBe(y);
    expect(toFloat16Bits(1)).toBe(0x3c00);
    expect(toFloat16Bits(65504)).toBe(0x7bff);
    expect(toFloat16Bits(1e6)).toBe(0x7c00);
    expect(toFloat16Bits(-2)).toBe(0xc000);
    expect(fromFloat16Bits(toFloat16Bits(0.1))).toBe(0.0999755859375);
    expect(fromFloat16Bits(toFloat16Bits(2 ** -24))).toBe(2 ** -24);
    expect(Array.from(tensorBytes(tensor('bfloat16', [1], [1])))).toEqual([0x80, 0x3f]);
  });
});

describe('symbolic dims as monomials', () => {
  it('names products and sums canonically, so broadcasts of equal sizes need no run-time test', () => {
    const b = new GraphBuilder('monomials');
    const x = b.input('x', 'float32', ['batch', 'seq', 8]);
    const flat = b.reshape(x, [-1, 8]); // batch·seq rows
    expect(flat.shape).toEqual(['batch*seq', 8]);
    const back = b.reshape(flat, [0, 4, -1]); // (batch·seq·8) / (batch·seq·4) = 2
    expect(back.shape).toEqual(['batch*seq', 4, 2]);
    const pos = b.input('p', 'float32', ['seq']);
    const twice = b.concat([pos, pos], 0);
    expect(twice.shape).toEqual(['2*seq']);
    const heads = b.reshape(x, [0, 0, 2, 4]); // [batch, seq, 2, 4]
    const stacked = b.reshape(b.transpose(heads, [0, 2, 1, 3]), [0, -1, 4]); // [batch, 2·seq, 4]
    expect(stacked.shape).toEqual(['batch', '2*seq', 4]);
    // scores [batch, 2·seq, seq] + bias [batch, 1 → broadcast, seq]: the gradient of the add
    // w.r.t. the scores is the incoming gradient itself, with no Where/Slice un-broadcast test.
    const keys = b.input('k', 'float32', ['batch', 'seq', 4]);
    const scores = b.matmul(stacked, b.transpose(keys, [0, 2, 1])); // [batch, 2·seq, seq]
    const bias = b.unsqueeze(b.concat([pos, pos], 0), [0, 2]); // [1, 2·seq, 1]
    const loss = b.reduceSum(b.add(scores, bias));
    b.grad(loss, [x]);
    const grads = b.graph.nodes.filter((n) => n.name.includes('.grad'));
    expect(
      grads.some((n) => n.name.includes('Add') && (n.op === 'Where' || n.op === 'Slice')),
    ).toBe(false);
  });
});
