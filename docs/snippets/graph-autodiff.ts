// Snippets of packages/graph/docs/autodiff.md (compiled by the test command).
// #region overview
import { encodeModel, GraphBuilder, tensor, toOnnxModel } from '@flowgrpo/graph';

const b = new GraphBuilder('train_step');
const x = b.input('x', 'float32', ['batch', 'seq', 64]); // symbolic dims are strings
const weights = tensor('float32', [64, 64], new Float32Array(64 * 64));
const w = b.initializer('w', weights); // inline; or { external: true }, or b.externalInitializer(...)
const a = b.input('lora_A', 'float32', [64, 8]);
const bb = b.input('lora_B', 'float32', [8, 64]);
const y = b.add(b.matmul(x, w), b.mul(b.matmul(b.matmul(x, a), bb), 0.5));
const loss = b.reduceMean(b.mul(y, y));
b.output(loss, 'loss');
b.grad(loss, [a, bb]); // outputs grad.lora_A, grad.lora_B
const bytes = encodeModel(toOnnxModel(b.graph, { opset: 21 }));
// #endregion overview

// #region custom-vjp
// log Σ exp over the columns of h·Wᵀ, taken in two halves of W, with a hand-written backward:
// ∂lse/∂h = Σ_halves softmax_i · W_i.
const g = new GraphBuilder('lse_halves');
const h = g.input('h', 'float32', ['n', 16]);
const wAll = g.input('w', 'float32', [32, 16]);
const halves = [g.slice(wAll, [0], [16], [0]), g.slice(wAll, [16], [32], [0])];
const logits = halves.map((wi) => g.gemm(h, wi, undefined, { transB: true }));
const parts = logits.map((z) => g.reduceLogSumExp(z, [1], true));
const lse = g.reduceLogSumExp(g.concat(parts, 1), [1], true);
g.customVjp({
  name: 'lse_halves',
  inputs: [h],
  outputs: [lse],
  vjp: ({ b, gy }) => {
    const [d0, d1] = halves.map((wi, i) => b.gemm(b.exp(b.sub(logits[i]!, lse)), wi));
    return [b.mul(gy[0]!, b.add(d0!, d1!))];
  },
});
const [gradH] = g.grad(g.reduceSum(lse), [h]); // the region's nodes get no autodiff VJP
// #endregion custom-vjp

// Uses the regions' results (noUnusedLocals).
export const shown = [bytes, gradH];
