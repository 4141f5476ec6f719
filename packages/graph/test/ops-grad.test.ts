// Finite-difference gradient check of every differentiable op, several shapes and broadcasting
// cases each. Expected values: central differences (ε = 1e-6) of the loss Σ(y ⊙ R) computed by the
// reference evaluator in float64, against the autodiff gradients evaluated the same way. Each
// graph (forward + backward) is also exported and run in a real onnxruntime-node session, whose
// float32 results must equal the evaluator's (relative 1e-5): that checks the forwards too.
import { describe, expect, it } from 'vitest';
import {
  checkGradients,
  type ElemType,
  evaluate,
  GraphBuilder,
  type HostTensor,
  tensor,
  type Value,
} from '../src/index.js';
import { OPS } from '../src/ops/registry.js';
import { testRandom } from '../src/testing/index.js';
import { expectOrtMatches } from './graph-helpers.js';

/** Op types that appeared in a checked forward graph. */
const covered = new Set<string>();

type Spec = {
  shape: number[];
  lo?: number;
  hi?: number;
  dtype?: ElemType;
  values?: number[];
  diff?: boolean;
};

/** Builds y = f(inputs), loss = Σ(y ⊙ R) with a fixed random R, checks d loss / d inputs. */
async function gradCheck(
  specs: Record<string, Spec>,
  f: (b: GraphBuilder, x: Record<string, Value>) => Value,
  seed = 1,
) {
  const r = testRandom(seed);
  const b = new GraphBuilder('check');
  const xs: Record<string, Value> = {};
  const feeds: Record<string, HostTensor> = {};
  for (const [name, s] of Object.entries(specs)) {
    const dtype = s.dtype ?? 'float32';
    xs[name] = b.input(name, dtype, s.shape);
    const n = s.shape.reduce((p, d) => p * d, 1);
    const lo = s.lo ?? -1;
    const hi = s.hi ?? 1;
    feeds[name] = tensor(
      dtype,
      s.shape,
      s.values ?? Array.from({ length: n }, () => lo + (hi - lo) * r()),
    );
  }
  const y = f(b, xs);
  for (const n of b.graph.nodes) covered.add(n.op);
  const yShape = evaluate(b.graph, feeds, [y])[y.name]!.shape;
  const weights = b.input('R', y.dtype, yShape);
  feeds.R = tensor(
    y.dtype,
    yShape,
    Array.from({ length: yShape.reduce((p, d) => p * d, 1) }, () => r() * 2 - 1),
  );
  const loss = b.reduceSum(b.mul(y, weights));
  const wrt = Object.entries(specs)
    .filter(([, s]) => s.diff !== false && (s.dtype ?? 'float32') === 'float32')
    .map(([n]) => xs[n]!);
  const grads = b.grad(loss, wrt);
  const results = checkGradients(b.graph, feeds, loss, wrt, grads);
  for (const res of results) expect(res.maxError, `${res.name}`).toBeLessThan(1e-6);
  b.output(y, '__y');
  b.output(loss, '__loss');
  await expectOrtMatches(b.graph, feeds);
  return results;
}

const pos = { lo: 0.5, hi: 2 };
const int64 = (shape: number[], values: number[]): Spec => ({
  shape,
  dtype: 'int64',
  values,
  diff: false,
});

describe('elementwise ops (float64 finite differences)', () => {
  const shapes: [number[], number[]][] = [
    [
      [2, 3],
      [2, 3],
    ],
    [[2, 3], [3]],
    [
      [2, 1, 4],
      [3, 1],
    ],
    [[], [2, 3]],
    [
      [2, 3],
      [1, 1],
    ],
  ];
  for (const op of ['add', 'sub', 'mul', 'div', 'pow', 'min', 'max'] as const) {
    it.each(shapes)(`${op} %j ⊕ %j`, async (sa, sb) => {
      const spec = op === 'div' || op === 'pow' ? pos : {};
      await gradCheck(
        { a: { shape: sa, ...spec }, b: { shape: sb, ...spec } },
        (b, x) => b[op](x.a!, x.b!),
        sa.length + 7 * sb.length,
      );
    });
  }
  it('pow with an integer exponent tensor (exponent not differentiated)', async () => {
    await gradCheck({ x: { shape: [2, 3], ...pos }, e: int64([3], [2, 3, -1]) }, (b, x) =>
      b.pow(x.x!, x.e!),
    );
  });
  const unary: [string, (b: GraphBuilder, x: Value) => Value, Partial<Spec>][] = [
    ['neg', (b, x) => b.neg(x), {}],
    ['abs', (b, x) => b.abs(x), {}],
    ['sqrt', (b, x) => b.sqrt(x), pos],
    ['reciprocal', (b, x) => b.reciprocal(x), pos],
    ['exp', (b, x) => b.exp(x), {}],
    ['log', (b, x) => b.log(x), pos],
    ['sigmoid', (b, x) => b.sigmoid(x), { lo: -3, hi: 3 }],
    ['tanh', (b, x) => b.tanh(x), { lo: -2, hi: 2 }],
    ['relu', (b, x) => b.relu(x), {}],
    ['sin', (b, x) => b.sin(x), { lo: -3, hi: 3 }],
    ['cos', (b, x) => b.cos(x), { lo: -3, hi: 3 }],
    ['erf', (b, x) => b.erf(x), { lo: -3, hi: 3 }],
    ['identity', (b, x) => b.identity(x), {}],
  ];
  for (const [name, f, spec] of unary) {
    it.each([[[5]], [[2, 3]], [[2, 1, 3]]])(`${name} %j`, async (shape) => {
      await gradCheck({ x: { shape, ...spec } }, (b, x) => f(b, x.x!));
    });
  }
  it('where with a broadcast condition (cond not differentiable)', async () => {
    await gradCheck({ x: { shape: [2, 3] }, y: { shape: [3] }, m: { shape: [2, 3] } }, (b, x) =>
      b.where(b.greater(x.m!, 0), x.x!, x.y!),
    );
    await gradCheck({ x: { shape: [2, 1] }, y: { shape: [1, 3] }, m: { shape: [3] } }, (b, x) =>
      b.where(b.less(x.m!, 0), x.x!, x.y!),
    );
  });
  it('comparisons, or, argMax carry no gradient; their results select values', async () => {
    await gradCheck({ x: { shape: [2, 3] }, y: { shape: [3] } }, (b, x) =>
      b.where(b.or(b.greaterOrEqual(x.x!, x.y!), b.lessOrEqual(x.x!, -0.5)), x.x!, b.mul(x.y!, 2)),
    );
    await gradCheck({ x: { shape: [3, 4] } }, (b, x) =>
      b.gatherElements(x.x!, b.argMax(x.x!, 1, true), 1),
    );
  });
  it('clip with min and max, and with min only', async () => {
    await gradCheck({ x: { shape: [3, 4], lo: -2, hi: 2 } }, (b, x) => b.clip(x.x!, -0.7, 0.9));
    await gradCheck({ x: { shape: [7] } }, (b, x) => b.clip(x.x!, 0.1));
  });
  it('cast float32 → float64 → float32 passes the gradient through', async () => {
    await gradCheck({ x: { shape: [2, 3] } }, (b, x) =>
      b.cast(b.mul(b.cast(x.x!, 'float64'), b.cast(x.x!, 'float64')), 'float32'),
    );
  });
});

describe('matmul, gemm, softmax', () => {
  const mm: [number[], number[]][] = [
    [
      [3, 4],
      [4, 5],
    ],
    [
      [2, 3, 4],
      [4, 5],
    ],
    [
      [2, 1, 3, 4],
      [3, 4, 2],
    ],
    [[4], [4, 5]],
    [[3, 4], [4]],
    [[4], [4]],
    [[2, 3, 4], [4]],
    [
      [2, 3, 4],
      [2, 4, 1],
    ],
  ];
  it.each(mm)('matmul %j × %j', async (sa, sb) => {
    await gradCheck({ a: { shape: sa }, b: { shape: sb } }, (b, x) => b.matmul(x.a!, x.b!));
  });
  it.each<[(number | string)[], number[]]>([
    [
      [3, 4],
      [4, 5],
    ],
    [
      [2, 3, 4],
      [4, 5],
    ],
    [[2, 3, 4], [4]],
    [
      ['batch', 'seq', 4],
      [4, 5],
    ],
  ])('matmul %j × %j backward: Gemm with transA/transB, no Transpose', (sa, sb) => {
    // A 2-D (or lifted 1-D) operand is read transposed by Gemm; only batched operands need a
    // Transpose node (checked by the finite-difference cases above).
    const b = new GraphBuilder('mm');
    const a = b.input('a', 'float32', [...sa]);
    const w = b.input('w', 'float32', [...sb]);
    b.grad(b.reduceSum(b.matmul(a, w)), [a, w]);
    const backward = b.graph.nodes.filter((n) => n.name.includes('.grad/')).map((n) => n.op);
    expect(backward).not.toContain('Transpose');
    expect(backward.filter((op) => op === 'Gemm')).toHaveLength(2);
  });
  const gemm: [boolean, boolean, number[] | null][] = [
    [false, false, [5]],
    [true, false, [3, 5]],
    [false, true, []],
    [true, true, [3, 1]],
    [false, false, null],
  ];
  it.each(gemm)('gemm transA=%s transB=%s C=%j', async (tA, tB, cs) => {
    const specs: Record<string, Spec> = {
      a: { shape: tA ? [4, 3] : [3, 4] },
      w: { shape: tB ? [5, 4] : [4, 5] },
    };
    if (cs) specs.c = { shape: cs };
    await gradCheck(specs, (b, x) =>
      b.gemm(x.a!, x.w!, x.c, { alpha: 0.7, beta: 1.3, transA: tA, transB: tB }),
    );
  });
  it.each([[-1], [0], [1]])('softmax axis %i', async (axis) => {
    await gradCheck({ x: { shape: [2, 3, 4], lo: -2, hi: 2 } }, (b, x) => b.softmax(x.x!, axis));
  });
});

describe('reductions and cumsum', () => {
  const cases: [number[] | undefined, boolean][] = [
    [[1], false],
    [[1], true],
    [[0, 2], false],
    [[-1], true],
    [undefined, false],
    [undefined, true],
  ];
  for (const op of ['reduceSum', 'reduceMean', 'reduceMax', 'reduceLogSumExp'] as const) {
    it.each(cases)(`${op} axes=%j keepdims=%s`, async (axes, keep) => {
      await gradCheck({ x: { shape: [2, 3, 4], lo: -2, hi: 2 } }, (b, x) =>
        b[op](x.x!, axes, keep),
      );
    });
  }
  it.each([
    [[0, 2], false],
    [[1], true],
    [undefined, false],
  ] as [number[] | undefined, boolean][])(
    'reduceMean over symbolic dims, axes=%j keepdims=%s: g/n with n counted in float, FD',
    async (axes, keep) => {
      // The count of a symbolic reduced dim is a ReduceSum of ones, not Size + Cast(int64→float)
      // (CPU-only under WebGPU). Hand derivation: d Σ(mean(x)·R)/dx = R broadcast / n.
      const r = testRandom(7);
      const b = new GraphBuilder('mean_sym');
      const x = b.input('x', 'float32', ['n', 3, 'm']);
      const y = b.reduceMean(x, axes, keep);
      const weights = b.input('R', 'float32', y.shape!);
      const loss = b.reduceSum(b.mul(y, weights));
      const [g] = b.grad(loss, [x]);
      const ops = b.graph.nodes.filter((n) => n.name.includes('.grad/')).map((n) => n.op);
      expect(ops).not.toContain('Size');
      expect(ops).not.toContain('Cast');
      const xs = [2, 3, 4];
      const reduced = axes ?? [0, 1, 2];
      const ys = xs.map((d, i) => (reduced.includes(i) ? 1 : d));
      const rShape = keep ? ys : xs.filter((_, i) => !reduced.includes(i));
      const feeds = {
        x: tensor(
          'float32',
          xs,
          Array.from({ length: 24 }, () => r() * 2 - 1),
        ),
        R: tensor(
          'float32',
          rShape,
          Array.from({ length: rShape.reduce((p, d) => p * d, 1) }, () => r() * 2 - 1),
        ),
      };
      const n = reduced.reduce((p, a) => p * xs[a]!, 1);
      const got = evaluate(b.graph, feeds, [g!])[g!.name]!;
      for (let i = 0; i < 24; i++) {
        const idx = [Math.floor(i / 12), Math.floor(i / 4) % 3, i % 4];
        const ri = idx.reduce((acc, v, k) => acc * ys[k]! + (reduced.includes(k) ? 0 : v), 0);
        expect(got.data[i]).toBeCloseTo(feeds.R.data[ri]! / n, 12);
      }
      for (const res of checkGradients(b.graph, feeds, loss, [x], [g!]))
        expect(res.maxError).toBeLessThan(1e-6);
      b.output(loss, 'loss');
      await expectOrtMatches(b.graph, feeds);
    },
  );
  it('reduceMax shares the gradient at ties (torch.amax convention)', async () => {
    // x = [1, 3, 3]: the max 3 is hit twice, each gets half of dL/dy (hand derivation).
    const b = new GraphBuilder();
    const x = b.input('x', 'float32', [3]);
    const [g] = b.grad(b.reduceMax(x, [0]), [x]);
    const out = evaluate(b.graph, { x: tensor('float32', [3], [1, 3, 3]) }, [g!]);
    expect(Array.from(out[g!.name]!.data)).toEqual([0, 0.5, 0.5]);
  });
  it.each([
    [0, false, false],
    [1, true, false],
    [-1, false, true],
    [1, true, true],
  ])('cumsum axis=%i exclusive=%s reverse=%s', async (axis, exclusive, reverse) => {
    await gradCheck({ x: { shape: [3, 4] } }, (b, x) =>
      b.cumsum(x.x!, axis, { exclusive, reverse }),
    );
  });
});

describe('indexing ops (integer indices are not differentiated)', () => {
  it('gather axis 0 with repeated 2-D indices (embedding lookup)', async () => {
    await gradCheck({ e: { shape: [5, 3] }, i: int64([2, 3], [0, 4, 4, 1, 0, -1]) }, (b, x) =>
      b.gather(x.e!, x.i!, 0),
    );
  });
  it('gather axis 1, scalar index, and axis -1', async () => {
    await gradCheck({ e: { shape: [2, 4, 3] }, i: int64([3], [3, 0, 3]) }, (b, x) =>
      b.gather(x.e!, x.i!, 1),
    );
    await gradCheck({ e: { shape: [2, 4, 3] }, i: int64([], [2]) }, (b, x) =>
      b.gather(x.e!, x.i!, 1),
    );
    await gradCheck({ e: { shape: [2, 4] }, i: int64([2, 2], [1, 1, 3, 0]) }, (b, x) =>
      b.gather(x.e!, x.i!, -1),
    );
  });
  it('gatherElements axis 0 and 1 with repeats', async () => {
    await gradCheck({ e: { shape: [3, 4] }, i: int64([2, 4], [0, 1, 2, 2, 2, 2, 0, 1]) }, (b, x) =>
      b.gatherElements(x.e!, x.i!, 0),
    );
    await gradCheck({ e: { shape: [3, 4] }, i: int64([3, 1], [3, 0, -1]) }, (b, x) =>
      b.gatherElements(x.e!, x.i!, 1),
    );
  });
  it('gatherND of rows and of elements', async () => {
    await gradCheck({ e: { shape: [3, 4] }, i: int64([2, 1], [2, 2]) }, (b, x) =>
      b.gatherND(x.e!, x.i!),
    );
    await gradCheck({ e: { shape: [3, 4] }, i: int64([3, 2], [0, 1, 2, 3, 0, 1]) }, (b, x) =>
      b.gatherND(x.e!, x.i!),
    );
  });
  it.each(['add', 'none'] as const)(
    'scatterElements reduction=%s (data and updates)',
    async (reduction) => {
      const i = reduction === 'add' ? [0, 2, 2, 1, 0, 0] : [0, 2, 1, 1, 0, 2];
      await gradCheck({ d: { shape: [3, 3] }, i: int64([2, 3], i), u: { shape: [2, 3] } }, (b, x) =>
        b.scatterElements(x.d!, x.i!, x.u!, 0, reduction),
      );
      await gradCheck(
        { d: { shape: [2, 4] }, i: int64([2, 2], [3, 0, 1, 2]), u: { shape: [2, 2] } },
        (b, x) => b.scatterElements(x.d!, x.i!, x.u!, 1, reduction),
      );
    },
  );
  it.each(['add', 'none'] as const)('scatterND reduction=%s', async (reduction) => {
    const rows = reduction === 'add' ? [1, 1] : [2, 0];
    await gradCheck(
      { d: { shape: [3, 4] }, i: int64([2, 1], rows), u: { shape: [2, 4] } },
      (b, x) => b.scatterND(x.d!, x.i!, x.u!, reduction),
    );
  });
  it.each([
    [true, 0],
    [false, 0],
    [true, 1],
    [false, -1],
  ])('trilu upper=%s k=%i', async (upper, k) => {
    await gradCheck({ x: { shape: [2, 3, 4] } }, (b, x) => b.trilu(x.x!, { upper, k }));
  });
});

describe('shape ops', () => {
  it('reshape with -1 and 0', async () => {
    await gradCheck({ x: { shape: [2, 3, 4] } }, (b, x) => b.reshape(x.x!, [0, -1]));
    await gradCheck({ x: { shape: [2, 3, 4] } }, (b, x) =>
      b.mul(b.reshape(x.x!, [4, 6]), b.reshape(x.x!, [4, -1])),
    );
  });
  it('transpose default and explicit perm', async () => {
    await gradCheck({ x: { shape: [2, 3, 4] } }, (b, x) => b.transpose(x.x!));
    await gradCheck({ x: { shape: [2, 3, 4] } }, (b, x) => b.transpose(x.x!, [1, 2, 0]));
  });
  it('concat of three inputs on axes 1 and -1', async () => {
    await gradCheck(
      { a: { shape: [2, 1, 3] }, b: { shape: [2, 2, 3] }, c: { shape: [2, 4, 3] } },
      (b, x) => b.concat([x.a!, x.b!, x.c!], 1),
    );
    await gradCheck({ a: { shape: [2, 2] }, b: { shape: [2, 3] } }, (b, x) =>
      b.concat([x.a!, x.b!, x.a!], -1),
    );
  });
  it('split into equal parts and given sizes (some outputs unused)', async () => {
    await gradCheck({ x: { shape: [6, 2] } }, (b, x) => {
      const [p, q, r] = b.split(x.x!, 3, 0);
      return b.add(b.mul(p!, q!), r!);
    });
    await gradCheck({ x: { shape: [2, 5] } }, (b, x) => b.split(x.x!, [1, 4], 1)[1]!);
  });
  it('slice: unit steps, negative indices, steps 2 and −1', async () => {
    await gradCheck({ x: { shape: [4, 5] } }, (b, x) => b.slice(x.x!, [1, -4], [3, 100], [0, 1]));
    await gradCheck({ x: { shape: [4, 6] } }, (b, x) => b.slice(x.x!, [0], [6], [1], [2]));
    await gradCheck({ x: { shape: [4, 6] } }, (b, x) =>
      b.slice(x.x!, [-1, 4], [-100, 0], [0, -1], [-1, -2]),
    );
  });
  it('unsqueeze, squeeze, expand', async () => {
    await gradCheck({ x: { shape: [3, 1] } }, (b, x) => b.unsqueeze(x.x!, [0, -1]));
    await gradCheck({ x: { shape: [3, 1, 2] } }, (b, x) => b.squeeze(x.x!, [1]));
    await gradCheck({ x: { shape: [1, 3, 1] } }, (b, x) => b.squeeze(x.x!));
    await gradCheck({ x: { shape: [3, 1] } }, (b, x) => b.expand(x.x!, [2, 3, 4]));
    await gradCheck({ x: { shape: [2, 3] } }, (b, x) => b.expand(x.x!, [1, 3]));
  });
  it('pad with zeros', async () => {
    await gradCheck({ x: { shape: [2, 3] } }, (b, x) => b.pad(x.x!, [1, 0, 2, 3], 0.5));
  });
});

describe('coverage', () => {
  it('every registered op with a VJP was gradient-checked above', () => {
    const differentiable = Object.values(OPS)
      .filter((d) => d.vjp)
      .map((d) => d.op);
    expect(differentiable.filter((op) => !covered.has(op))).toEqual([]);
  });
});
