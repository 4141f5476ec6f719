// The smallest complete use of flowgrpo's trainer foundation: a loss written with the graph
// builder, gradients from reverse-mode autodiff, AdamW as a second ONNX graph, both run by ONNX
// Runtime with parameters and optimizer state kept on the device between steps.
import { createRng } from '@flowgrpo/core';
import { encodeModel, GraphBuilder, toOnnxModel, type Value } from '@flowgrpo/graph';
import type { DeviceRequest } from '@flowgrpo/models';
import { TrainStepRunner } from '@flowgrpo/trainer';
import * as ort from 'onnxruntime-node';

export interface FitOptions {
  steps?: number;
  lr?: number;
  hidden?: number;
  device?: DeviceRequest;
  seed?: number;
  onStep?: (step: number, loss: number, gradNorm: number) => void;
}

export interface FitResult {
  device: string;
  losses: number[];
  /** The exported train-step graph (forward + backward), for inspection in Netron. */
  trainStepOnnx: Uint8Array;
}

const N = 64; // samples
const D = 2; // input features

/** y = sin(3·x0)·x1: a smooth target a tanh MLP fits quickly. */
function makeData(seed: number): { x: Float32Array; y: Float32Array } {
  const rng = createRng(seed).fork('data');
  const x = Float32Array.from({ length: N * D }, () => rng.next() * 2 - 1);
  const y = Float32Array.from({ length: N }, (_, n) => Math.sin(3 * x[n * D]!) * x[n * D + 1]!);
  return { x, y };
}

/** Mean squared error of a one-hidden-layer tanh MLP. */
function mlpLoss(b: GraphBuilder, p: Readonly<Record<string, Value>>): Value {
  const x = b.input('x', 'float32', [N, D]);
  const y = b.input('y', 'float32', [N, 1]);
  const h = b.tanh(b.add(b.matmul(x, p.w1!), p.b1!));
  const out = b.add(b.matmul(h, p.w2!), p.b2!);
  const err = b.sub(out, y);
  return b.reduceMean(b.mul(err, err));
}

function initParams(hidden: number, seed: number): Record<string, ort.Tensor> {
  const rng = createRng(seed).fork('init');
  // Glorot-uniform weights, zero biases.
  const glorot = (fanIn: number, fanOut: number) => {
    const a = Math.sqrt(6 / (fanIn + fanOut));
    return Float32Array.from({ length: fanIn * fanOut }, () => (rng.next() * 2 - 1) * a);
  };
  return {
    w1: new ort.Tensor('float32', glorot(D, hidden), [D, hidden]),
    b1: new ort.Tensor('float32', new Float32Array(hidden), [hidden]),
    w2: new ort.Tensor('float32', glorot(hidden, 1), [hidden, 1]),
    b2: new ort.Tensor('float32', new Float32Array(1), [1]),
  };
}

export async function fitMlp(options: FitOptions = {}): Promise<FitResult> {
  const { steps = 200, lr = 0.02, hidden = 32, device = 'cpu', seed = 0 } = options;
  const { x, y } = makeData(seed);
  const runner = await TrainStepRunner.create({
    device,
    trainStep: mlpLoss,
    params: initParams(hidden, seed),
    optimizer: { weightDecay: 0, maxGradNorm: 1 },
  });
  const batch = {
    x: new ort.Tensor('float32', x, [N, D]),
    y: new ort.Tensor('float32', y, [N, 1]),
  };
  const losses: number[] = [];
  try {
    for (let t = 1; t <= steps; t++) {
      const r = await runner.step(batch, { lr });
      losses.push(r.loss);
      options.onStep?.(t, r.loss, r.gradNorm);
    }
  } finally {
    await runner.release();
  }
  return { device: runner.device, losses, trainStepOnnx: trainStepModel(hidden) };
}

/** The forward + backward graph on its own, as the runner builds it. */
function trainStepModel(hidden: number): Uint8Array {
  const shapes: Record<string, number[]> = {
    w1: [D, hidden],
    b1: [hidden],
    w2: [hidden, 1],
    b2: [1],
  };
  const b = new GraphBuilder('mlp_train_step');
  const params = Object.fromEntries(
    Object.entries(shapes).map(([name, shape]) => [name, b.input(name, 'float32', shape)]),
  );
  const loss = mlpLoss(b, params);
  b.output(loss, 'loss');
  b.grad(loss, Object.values(params));
  return encodeModel(toOnnxModel(b.graph));
}
