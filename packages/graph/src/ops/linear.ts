// MatMul (numpy semantics, batch broadcasting, 1-D operands), Gemm and Softmax.
import type { Value } from '../ir/graph.js';
import { broadcast, normAxis, req } from '../ir/shape.js';
import type { Dim, HostTensor } from '../ir/types.js';
import { axisSplit, broadcastMap, broadcastShape, make, shapeSize, transposeData } from './nd.js';
import { defineOps, type InferCtx } from './op.js';

function checkK(c: InferCtx, k1: Dim, k2: Dim): void {
  if (typeof k1 === 'number' && typeof k2 === 'number' && k1 !== k2)
    c.fail(`inner dims differ: ${k1} vs ${k2}`);
}

/** Swaps the last two axes. */
const swapLast = (rank: number) => [
  ...Array.from({ length: rank - 2 }, (_, i) => i),
  rank - 1,
  rank - 2,
];

function matmulData(a: HostTensor, b: HostTensor): HostTensor {
  const A = a.shape.length === 1 ? [1, a.shape[0]!] : a.shape;
  const B = b.shape.length === 1 ? [b.shape[0]!, 1] : b.shape;
  const [n, k] = A.slice(-2) as [number, number];
  const m = B[B.length - 1]!;
  const batch = broadcastShape([A.slice(0, -2), B.slice(0, -2)]);
  const nb = shapeSize(batch);
  const o = make(a.dtype, [...batch, n, m]);
  const ma = broadcastMap(batch, A.slice(0, -2));
  const mb = broadcastMap(batch, B.slice(0, -2));
  for (let t = 0; t < nb; t++) {
    const ao = ma[t]! * n * k;
    const bo = mb[t]! * k * m;
    const oo = t * n * m;
    for (let i = 0; i < n; i++)
      for (let p = 0; p < k; p++) {
        const av = a.data[ao + i * k + p]!;
        for (let j = 0; j < m; j++) o.data[oo + i * m + j]! += av * b.data[bo + p * m + j]!;
      }
  }
  const shape = [
    ...batch,
    ...(a.shape.length === 1 ? [] : [n]),
    ...(b.shape.length === 1 ? [] : [m]),
  ];
  return { ...o, shape };
}

export const linearOps = defineOps(
  {
    op: 'MatMul',
    infer: (c) => {
      const a = req(c, 0);
      const b = req(c, 1);
      if (a.dtype !== b.dtype) c.fail(`dtypes differ: ${a.dtype} vs ${b.dtype}`);
      if (!a.shape || !b.shape) return [{ dtype: a.dtype, shape: undefined }];
      if (a.shape.length === 0 || b.shape.length === 0) c.fail('MatMul needs rank >= 1');
      const A = a.shape.length === 1 ? [1, a.shape[0]!] : a.shape;
      const B = b.shape.length === 1 ? [b.shape[0]!, 1] : b.shape;
      checkK(c, A[A.length - 1]!, B[B.length - 2]!);
      const batch = broadcast(c, [A.slice(0, -2), B.slice(0, -2)])!;
      const shape = [
        ...batch,
        ...(a.shape.length === 1 ? [] : [A[A.length - 2]!]),
        ...(b.shape.length === 1 ? [] : [B[B.length - 1]!]),
      ];
      return [{ dtype: a.dtype, shape }];
    },
    forward: ([a, b]) => [matmulData(a!, b!)],
    diff: [0, 1],
    // Y = A·B: dA = G·Bᵀ, dB = Aᵀ·G, summed over broadcast batch dims; 1-D operands are lifted to
    // matrices first and the gradient is reshaped back.
    vjp: (c) => {
      const { b } = c;
      const [a, w] = c.x as Value[];
      const ra = a!.shape!.length;
      const rb = w!.shape!.length;
      let g = c.gy[0]!;
      const A = ra === 1 ? b.unsqueeze(a!, [0]) : a!;
      const B = rb === 1 ? b.unsqueeze(w!, [1]) : w!;
      if (ra === 1 && rb === 1) g = b.reshape(g, [1, 1]);
      else if (ra === 1) g = b.unsqueeze(g, [-2]);
      else if (rb === 1) g = b.unsqueeze(g, [-1]);
      const back = (grad: Value, x: Value, lifted: Value) => {
        const r = b.unbroadcast(grad, lifted);
        return lifted === x ? r : b.reshape(r, b.shape(x));
      };
      // 2-D operands never get a Transpose: Gemm's transA/transB read them transposed in place.
      // x·W with a 2-D weight and a batched x (the common layer) folds x's batch dims into rows:
      // dW = Aᵀ·G over [rows, K]ᵀ·[rows, N] (one GEMM, not a batched product and a ReduceSum) and
      // dA = G·Wᵀ over [rows, N]·[K, N]ᵀ, reshaped back. Only batched operands (attention's
      // per-head products) keep a Transpose: ONNX has no batched MatMul with a transposed operand.
      const rA = A.shape!.length;
      const rB = B.shape!.length;
      const rows = (v: Value, axis: number) =>
        b.reshape(v, b.concat([b.ints([-1]), b.dim(B, axis)], 0));
      const gradA = () => {
        if (rB !== 2) return back(b.matmul(g, b.transpose(B, swapLast(rB))), a!, A);
        if (rA === 2) return back(b.gemm(g, B, undefined, { transB: true }), a!, A);
        return b.reshape(b.gemm(rows(g, 1), B, undefined, { transB: true }), b.shape(a!));
      };
      const gradW = () => {
        if (rB !== 2) return back(b.matmul(b.transpose(A, swapLast(rA)), g), w!, B);
        if (rA === 2) return back(b.gemm(A, g, undefined, { transA: true }), w!, B);
        return back(b.gemm(rows(A, 0), rows(g, 1), undefined, { transA: true }), w!, B);
      };
      return [c.needs[0] ? gradA() : undefined, c.needs[1] ? gradW() : undefined];
    },
  },
  {
    op: 'Gemm',
    attrTypes: { alpha: 'float', beta: 'float', transA: 'int', transB: 'int' },
    infer: (c) => {
      const a = req(c, 0);
      const b = req(c, 1);
      const as = a.shape;
      const bs = b.shape;
      if (as?.length !== 2 || bs?.length !== 2) return c.fail('Gemm needs 2-D A and B');
      const [m, ka] = c.attrs.transA ? [as[1]!, as[0]!] : [as[0]!, as[1]!];
      const [kb, n] = c.attrs.transB ? [bs[1]!, bs[0]!] : [bs[0]!, bs[1]!];
      checkK(c, ka, kb);
      const cs = c.inputs[2]?.shape;
      const shape = cs ? broadcast(c, [[m, n], cs])! : [m, n];
      if (
        shape.length !== 2 ||
        (cs && typeof shape[0] === 'number' && typeof m === 'number' && shape[0] !== m)
      ) {
        c.fail('C must broadcast to [M, N]');
      }
      return [{ dtype: a.dtype, shape: [m, n] }];
    },
    forward: ([a, b, cc], at) => {
      const A = at.transA ? transposeData(a!, [1, 0]) : a!;
      const B = at.transB ? transposeData(b!, [1, 0]) : b!;
      const y = matmulData(A, B);
      const alpha = (at.alpha as number | undefined) ?? 1;
      const beta = (at.beta as number | undefined) ?? 1;
      const mc = cc ? broadcastMap(y.shape, cc.shape) : undefined;
      for (let i = 0; i < y.data.length; i++)
        y.data[i] = alpha * y.data[i]! + (mc ? beta * cc!.data[mc[i]!]! : 0);
      return [y];
    },
    diff: [0, 1, 2],
    // Y = α·op(A)·op(B) + β·C, each gradient is itself one Gemm.
    vjp: (c) => {
      const { b } = c;
      const [a, w, cc] = c.x;
      const g = c.gy[0]!;
      const alpha = (c.attrs.alpha as number | undefined) ?? 1;
      const beta = (c.attrs.beta as number | undefined) ?? 1;
      const tA = !!c.attrs.transA;
      const tB = !!c.attrs.transB;
      return [
        c.needs[0]
          ? tA
            ? b.gemm(w!, g, undefined, { alpha, transA: tB, transB: true })
            : b.gemm(g, w!, undefined, { alpha, transB: !tB })
          : undefined,
        c.needs[1]
          ? tB
            ? b.gemm(g, a!, undefined, { alpha, transA: true, transB: tA })
            : b.gemm(a!, g, undefined, { alpha, transA: !tA })
          : undefined,
        c.needs[2] ? b.unbroadcast(beta === 1 ? g : b.mul(g, beta), cc!) : undefined,
      ];
    },
  },
  {
    op: 'Softmax',
    attrTypes: { axis: 'int' },
    infer: (c) => {
      const x = req(c, 0);
      if (x.shape) normAxis(c, (c.attrs.axis as number | undefined) ?? -1, x.shape.length);
      return [{ dtype: x.dtype, shape: x.shape }];
    },
    forward: ([x], at) => {
      const axis = (at.axis as number | undefined) ?? -1;
      const [outer, len, inner] = axisSplit(x!.shape, axis < 0 ? axis + x!.shape.length : axis);
      const y = make(x!.dtype, x!.shape);
      for (let o = 0; o < outer; o++)
        for (let i = 0; i < inner; i++) {
          const at0 = o * len * inner + i;
          let mx = -Infinity;
          for (let j = 0; j < len; j++) mx = Math.max(mx, x!.data[at0 + j * inner]!);
          let s = 0;
          for (let j = 0; j < len; j++)
            s += y.data[at0 + j * inner] = Math.exp(x!.data[at0 + j * inner]! - mx);
          for (let j = 0; j < len; j++) y.data[at0 + j * inner]! /= s;
        }
      return [y];
    },
    diff: [0],
    // dx = y ⊙ (g − Σ_axis g⊙y)
    vjp: (c) => {
      const { b } = c;
      const y = c.y[0]!;
      const g = c.gy[0]!;
      const axis = (c.attrs.axis as number | undefined) ?? -1;
      return [b.mul(y, b.sub(g, b.reduceSum(b.mul(g, y), [axis], true)))];
    },
  },
);
