// Snippets of docs/guides/graph.md (compiled by the test command).
import { evaluate, GraphBuilder, tensor, toOnnxModel, writeModel } from '@flowgrpo/graph';

export function lossAndGradients(): void {
  // #region grad
  // y = x·W, loss = mean(y²); differentiate w.r.t. W and check it with the float64 evaluator.
  const b = new GraphBuilder('tiny');
  const x = b.input('x', 'float32', ['batch', 3]); // a symbolic batch dimension
  const w = b.input('w', 'float32', [3, 2]);
  const loss = b.reduceMean(b.mul(b.matmul(x, w), b.matmul(x, w)));
  b.output(loss, 'loss');
  const [gw] = b.grad(loss, [w]); // appends the backward graph; output 'grad.w'
  const out = evaluate(b.graph, {
    x: tensor('float32', [1, 3], [1, 2, 3]),
    w: tensor('float32', [3, 2], [1, 0, 0, 1, 1, 1]),
  });
  console.log(out.loss!.data, out[gw!.name]!.data);
  // Standard ai.onnx ops only: any ONNX Runtime build runs the file.
  writeModel(toOnnxModel(b.graph), { dir: 'out/graph', fileName: 'tiny.onnx' });
  // #endregion grad
}
