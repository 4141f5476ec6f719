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

// Uses the region's result (noUnusedLocals).
export const shown = bytes;
