import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import {
  DEFAULT_OPSET,
  GraphBuilder,
  toOnnxModel,
  WeightsFileWriter,
  writeModel,
} from '@flowgrpo/graph';
import type { ModelWeights } from '@flowgrpo/models';
import {
  addDecoderInputs,
  addTargetInputs,
  decoderForward,
  targetLogprobs,
  useWeightInputs,
  writeBaseWeights,
} from '@flowgrpo/models';
import { buildTrainStepGraph } from './train-step-graph.js';

// The two graphs of full fine-tuning — train_step (objective + gradients w.r.t. every weight) and
// logprobs — with the model's weights as graph inputs rather than initializers, so the trainer
// feeds the weights it is updating. Only the RoPE tables live in the side file.

export interface FullTrainingGraphs {
  trainStep: string;
  logprobs: string;
  /** Every trained weight: HF names and shapes, in graph-input order. */
  params: { name: string; shape: number[] }[];
}

/**
 * Writes train_step.onnx, logprobs.onnx and their weights.data into `dir`; `vocabChunkSize` and
 * `gradientCheckpointing` as buildTrainingArtifacts takes them.
 */
export function buildFullTrainingGraphs(
  weights: ModelWeights,
  dir: string,
  options: {
    maxPositions?: number | undefined;
    vocabChunkSize?: number | undefined;
    gradientCheckpointing?: boolean | undefined;
  } = {},
): FullTrainingGraphs {
  mkdirSync(dir, { recursive: true });
  const writer = new WeightsFileWriter(join(dir, 'weights.data'));
  try {
    const base = writeBaseWeights(weights, writer, { maxPositions: options.maxPositions });
    const { vocabChunkSize, gradientCheckpointing } = options;
    const train = buildTrainStepGraph(base, 'full', { vocabChunkSize, gradientCheckpointing });
    const lb = new GraphBuilder('logprobs');
    useWeightInputs(lb);
    const inputs = addDecoderInputs(lb, base, 'logprobs');
    const targets = addTargetInputs(lb);
    const forward = decoderForward(lb, base, inputs);
    lb.output(targetLogprobs(lb, base, forward, targets, { vocabChunkSize }).logprobs, 'logprobs');
    for (const [file, graph] of [
      ['train_step.onnx', train.graph],
      ['logprobs.onnx', lb.graph],
    ] as const)
      writeModel(toOnnxModel(graph, { opset: DEFAULT_OPSET }), {
        dir,
        fileName: file,
        weights: writer,
      });
    const params = train.graph.inputs
      .filter((v) => base.refs.has(v.name))
      .map((v) => ({ name: v.name, shape: [...(v.shape as number[])] }));
    return {
      trainStep: join(dir, 'train_step.onnx'),
      logprobs: join(dir, 'logprobs.onnx'),
      params,
    };
  } finally {
    writer.close();
  }
}
