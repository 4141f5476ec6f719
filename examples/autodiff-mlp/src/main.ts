// Fits a small MLP through flowgrpo's ONNX training graphs and writes the train-step graph.
//   pnpm example autodiff-mlp [--quick] [--device cpu|webgpu|cuda|auto] [--steps N]
import { mkdirSync, writeFileSync } from 'node:fs';
import { parseCommandLine } from '@flowgrpo/core';
import type { DeviceRequest } from '@flowgrpo/models';
import { fitMlp } from './fit-mlp.js';

const usage = `Usage: pnpm example autodiff-mlp [flags]

Fits y = sin(3·x0)·x1 with a 2-layer tanh MLP through flowgrpo's ONNX training graphs (loss and
gradients from reverse-mode autodiff, AdamW as a second graph) and writes the train-step graph.

  --device cpu|webgpu|cuda|auto   execution provider (default cpu)
  --steps N                       optimizer steps (default 200)
  --out DIR                       where train_step.onnx goes (default out/autodiff-mlp)
  --quick                         40 steps
  --help                          this text`;

const { values } = parseCommandLine(usage, {
  options: {
    device: { type: 'string', default: 'cpu' },
    steps: { type: 'string', default: '200' },
    out: { type: 'string', default: 'out/autodiff-mlp' },
    // 40 steps instead of 200 (every example has a --quick path).
    quick: { type: 'boolean', default: false },
  },
});
const result = await fitMlp({
  device: values.device as DeviceRequest,
  steps: values.quick ? 40 : Number(values.steps),
  onStep: (t, loss, norm) => {
    if (t === 1 || t % 20 === 0)
      console.log(
        `step ${String(t).padStart(4)}  loss ${loss.toFixed(6)}  grad-norm ${norm.toFixed(4)}`,
      );
  },
});
mkdirSync(values.out, { recursive: true });
writeFileSync(`${values.out}/train_step.onnx`, result.trainStepOnnx);
console.log(
  `device ${result.device}: loss ${result.losses[0]!.toFixed(4)} → ${result.losses.at(-1)!.toFixed(4)}; train-step graph written to ${values.out}/train_step.onnx`,
);
