// Snippets of packages/trainer-cuda/docs/train-loop.md (compiled by the test command).
import { TrainStepRunner, type TrainStepRunnerOptions } from '@flowgrpo/trainer';
import * as ort from 'onnxruntime-node';

export async function fitLine(xs: Float32Array, ys: Float32Array): Promise<number> {
  // #region create
  const runner = await TrainStepRunner.create({
    device: 'webgpu', // or 'cpu' / 'cuda' / 'auto' (default)
    session: { disableCpuFallback: true }, // optional: refuse graphs with CPU-EP nodes
    // or a finished Graph / ONNX path / bytes; p: the parameter inputs the runner made
    trainStep: (b, p) => {
      const x = b.input('x', 'float32', ['batch', 4]);
      const err = b.sub(b.add(b.matmul(x, p.w!), p.bias!), b.input('y', 'float32', ['batch', 1]));
      return b.reduceMean(b.mul(err, err)); // mean squared error of y ≈ x·w + bias
    },
    params: {
      w: new ort.Tensor('float32', new Float32Array(4), [4, 1]), // float32 ort.Tensors
      bias: new ort.Tensor('float32', new Float32Array(1), [1]),
    },
    optimizer: { weightDecay: 0, maxGradNorm: 1 },
  });
  const batch = {
    x: new ort.Tensor('float32', xs, [ys.length, 4]),
    y: new ort.Tensor('float32', ys, [ys.length, 1]),
  };
  const { loss, gradNorm, step } = await runner.step(batch, { lr: 1e-3 });
  // #endregion create
  await runner.release();
  return loss + gradNorm + step;
}

export async function resume(runner: TrainStepRunner, options: TrainStepRunnerOptions) {
  // #region resume
  const s = await runner.exportState(); // save s.params / s.m / s.v and s.step
  const resumed = await TrainStepRunner.create({ ...options, params: s.params, state: s });
  // #endregion resume
  return resumed;
}
