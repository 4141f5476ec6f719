// Elementwise ops (numpy broadcasting). Gradients of broadcast inputs are summed back to the
// input's shape by `b.unbroadcast`.

import type { Value } from '../ir/graph.js';
import { broadcast, req } from '../ir/shape.js';
import type { ElemType } from '../ir/types.js';
import { mapN } from './nd.js';
import { defineOps, type InferCtx, type OpDef, type ValueType, type VjpCtx } from './op.js';

/** The gradient for input i, built only when needed and reduced to the input's shape. */
const red = (c: VjpCtx, i: number, g: () => Value): Value | undefined =>
  c.needs[i] ? c.b.unbroadcast(g(), c.x[i]!) : undefined;

function sameType(c: InferCtx, from: number, to: number, out?: ElemType): ValueType[] {
  const dts = new Set(
    c.inputs
      .slice(from, to)
      .filter((v) => v)
      .map((v) => v!.dtype),
  );
  if (dts.size > 1) c.fail(`inputs must share one dtype, got ${[...dts].join(', ')}`);
  const shape = broadcast(
    c,
    c.inputs.slice(from, to).map((v) => v?.shape),
  );
  return [{ dtype: out ?? req(c, from).dtype, shape }];
}

const unary = (
  op: string,
  f: (x: number) => number,
  vjp?: (c: VjpCtx, x: Value, y: Value, g: Value) => Value,
): OpDef => ({
  op,
  infer: (c) => [{ dtype: req(c, 0).dtype, shape: req(c, 0).shape }],
  forward: ([x]) => [mapN(x!.dtype, [x!], f)],
  ...(vjp && { diff: [0], vjp: (c: VjpCtx) => [vjp(c, c.x[0]!, c.y[0]!, c.gy[0]!)] }),
});

const binary = (
  op: string,
  f: (a: number, b: number) => number,
  vjp?: OpDef['vjp'],
  out?: ElemType,
): OpDef => ({
  op,
  infer: (c) => sameType(c, 0, 2, out),
  forward: ([a, b]) => [mapN(out ?? a!.dtype, [a!, b!], f)],
  ...(vjp && { diff: [0, 1], vjp }),
});

/** erf to ~1e-15: Taylor series near 0, a continued fraction for erfc in the tails. */
function erf(x: number): number {
  const a = Math.abs(x);
  if (a < 2.5) {
    let term = x;
    let sum = x;
    for (let n = 1; n < 80 && Math.abs(term) > 1e-17 * Math.abs(sum); n++) {
      term *= (-x * x) / n;
      sum += term / (2 * n + 1);
    }
    return (2 / Math.sqrt(Math.PI)) * sum;
  }
  let f = a;
  for (let k = 60; k >= 1; k--) f = a + k / 2 / f;
  const erfc = Math.exp(-a * a) / Math.sqrt(Math.PI) / f;
  return Math.sign(x) * (1 - erfc);
}

const isInt = (d: ElemType) => d.startsWith('int') || d === 'uint8';

/** Min/Max route the gradient to the inputs equal to the result, split evenly at ties. */
const minMaxVjp = (c: VjpCtx): (Value | undefined)[] => {
  const { b } = c;
  const hits = c.x.map((x) => b.cast(b.equal(x!, c.y[0]!), c.y[0]!.dtype));
  const count = hits.reduce((s, h) => b.add(s, h));
  const share = b.div(c.gy[0]!, count);
  return c.x.map((_, i) => red(c, i, () => b.mul(share, hits[i]!)));
};

export const elementwiseOps = defineOps(
  binary(
    'Add',
    (a, b) => a + b,
    (c) => [red(c, 0, () => c.gy[0]!), red(c, 1, () => c.gy[0]!)],
  ),
  binary(
    'Sub',
    (a, b) => a - b,
    (c) => [red(c, 0, () => c.gy[0]!), red(c, 1, () => c.b.neg(c.gy[0]!))],
  ),
  binary(
    'Mul',
    (a, b) => a * b,
    (c) => {
      const [x, y] = c.x as Value[];
      return [red(c, 0, () => c.b.mul(c.gy[0]!, y!)), red(c, 1, () => c.b.mul(c.gy[0]!, x!))];
    },
  ),
  {
    op: 'Div',
    infer: (c) => sameType(c, 0, 2),
    forward: ([a, b]) => [
      mapN(a!.dtype, [a!, b!], isInt(a!.dtype) ? (p, q) => Math.trunc(p / q) : (p, q) => p / q),
    ],
    diff: [0, 1],
    // d(a/b)/da = 1/b; d(a/b)/db = -y/b
    vjp: (c) => {
      const { b } = c;
      const g = c.gy[0]!;
      return [
        red(c, 0, () => b.div(g, c.x[1]!)),
        red(c, 1, () => b.neg(b.div(b.mul(g, c.y[0]!), c.x[1]!))),
      ];
    },
  },
  {
    op: 'Pow',
    infer: (c) => [
      { dtype: req(c, 0).dtype, shape: broadcast(c, [req(c, 0).shape, req(c, 1).shape]) },
    ],
    forward: ([a, b]) => [mapN(a!.dtype, [a!, b!], (p, q) => p ** q)],
    diff: [0, 1],
    // d(a^p)/da = p·a^(p-1); d(a^p)/dp = y·ln(a) (real only for a > 0)
    vjp: (c) => {
      const { b } = c;
      const [x, p] = c.x as Value[];
      const g = c.gy[0]!;
      return [
        red(c, 0, () => {
          const pf = b.cast(p!, x!.dtype);
          return b.mul(g, b.mul(pf, b.pow(x!, b.sub(pf, 1))));
        }),
        red(c, 1, () => b.mul(g, b.mul(c.y[0]!, b.log(x!)))),
      ];
    },
  },
  { ...binary('Min', Math.min), vjp: minMaxVjp, diff: 'all' },
  { ...binary('Max', Math.max), vjp: minMaxVjp, diff: 'all' },
  binary('Equal', (a, b) => +(a === b), undefined, 'bool'),
  binary('Less', (a, b) => +(a < b), undefined, 'bool'),
  binary('Greater', (a, b) => +(a > b), undefined, 'bool'),
  binary('And', (a, b) => +(a !== 0 && b !== 0), undefined, 'bool'),
  binary('Or', (a, b) => +(a !== 0 || b !== 0), undefined, 'bool'),
  binary('GreaterOrEqual', (a, b) => +(a >= b), undefined, 'bool'),
  binary('LessOrEqual', (a, b) => +(a <= b), undefined, 'bool'),
  unary('Not', (x) => +(x === 0)),
  unary(
    'Neg',
    (x) => -x,
    (c, _x, _y, g) => c.b.neg(g),
  ),
  unary('Abs', Math.abs, (c, x, _y, g) => c.b.where(c.b.less(x, 0), c.b.neg(g), g)),
  unary(
    'Identity',
    (x) => x,
    (_c, _x, _y, g) => g,
  ),
  unary('Sqrt', Math.sqrt, (c, _x, y, g) => c.b.div(c.b.mul(g, 0.5), y)),
  unary(
    'Reciprocal',
    (x) => 1 / x,
    (c, _x, y, g) => c.b.neg(c.b.mul(g, c.b.mul(y, y))),
  ),
  unary('Exp', Math.exp, (c, _x, y, g) => c.b.mul(g, y)),
  unary('Log', Math.log, (c, x, _y, g) => c.b.div(g, x)),
  unary(
    'Sigmoid',
    (x) => 1 / (1 + Math.exp(-x)),
    (c, _x, y, g) => c.b.mul(g, c.b.mul(y, c.b.sub(1, y))),
  ),
  unary('Tanh', Math.tanh, (c, _x, y, g) => c.b.mul(g, c.b.sub(1, c.b.mul(y, y)))),
  unary('Sin', Math.sin, (c, x, _y, g) => c.b.mul(g, c.b.cos(x))),
  unary('Cos', Math.cos, (c, x, _y, g) => c.b.neg(c.b.mul(g, c.b.sin(x)))),
  // d erf(x)/dx = 2/√π · exp(−x²)
  unary('Erf', erf, (c, x, _y, g) =>
    c.b.mul(g, c.b.mul(c.b.exp(c.b.neg(c.b.mul(x, x))), 2 / Math.sqrt(Math.PI))),
  ),
  unary(
    'Relu',
    (x) => Math.max(0, x),
    (c, x, _y, g) => c.b.where(c.b.greater(x, 0), g, 0),
  ),
  {
    op: 'Where',
    infer: (c) => {
      if (req(c, 0).dtype !== 'bool') c.fail('condition must be bool');
      const [t] = sameType(c, 1, 3);
      return [
        {
          dtype: t!.dtype,
          shape: broadcast(
            c,
            c.inputs.map((v) => v?.shape),
          ),
        },
      ];
    },
    forward: ([cond, x, y]) => [mapN(x!.dtype, [cond!, x!, y!], (k, p, q) => (k ? p : q))],
    diff: [1, 2],
    vjp: (c) => {
      const { b } = c;
      const [cond] = c.x as Value[];
      const g = c.gy[0]!;
      return [
        undefined,
        red(c, 1, () => b.where(cond!, g, 0)),
        red(c, 2, () => b.where(cond!, 0, g)),
      ];
    },
  },
  {
    // Min/max bounds are treated as constants (not differentiated); at a bound the gradient is
    // passed through, as torch.clamp does.
    op: 'Clip',
    infer: (c) => [{ dtype: req(c, 0).dtype, shape: req(c, 0).shape }],
    forward: ([x, lo, hi]) => [
      mapN(x!.dtype, [x!], (v) =>
        Math.min(Math.max(v, lo ? lo.data[0]! : -Infinity), hi ? hi.data[0]! : Infinity),
      ),
    ],
    diff: [0],
    vjp: (c) => {
      const { b } = c;
      const [x, lo, hi] = c.x;
      let g = c.gy[0]!;
      if (lo) g = b.where(b.less(x!, lo), 0, g);
      if (hi) g = b.where(b.greater(x!, hi), 0, g);
      return [g];
    },
  },
);
