import {
  type ArtifactGraphBuilders,
  type ArtifactsManifest,
  type BuildArtifactsOptions,
  buildDecoderArtifacts,
  type ModelWeights,
} from '@flowgrpo/models';
import { buildTrainStepGraph } from './train-step-graph.js';

// The artifacts a training run opens: @flowgrpo/models' inference graphs (prefill, decode,
// logprobs, generate) and, on top of them in the same folder and weights.data, this package's
// train_step graph. models builds the folder and takes train_step's builder from here, so models
// never imports the trainer and the folder's format is the one the inference side reads.

/** The graph kinds the trainer adds to an artifacts folder, by kind. */
export const TRAINING_GRAPH_BUILDERS: ArtifactGraphBuilders = {
  train_step: (base, lora, options) => {
    if (!lora) throw new RangeError('the train_step graph needs a LoRA config');
    return buildTrainStepGraph(base, lora, options);
  },
};

/**
 * Writes the artifacts folder of a training run into `dir` (created, or replaced whole): with
 * `graphs` left out, every inference graph and, with `lora`, train_step.
 */
export function buildTrainingArtifacts(
  weights: ModelWeights,
  dir: string,
  options: BuildArtifactsOptions = {},
): ArtifactsManifest {
  // train_step by default only with a LoRA config; asked for by name without one, its builder
  // says it needs one.
  const training = options.lora !== undefined || options.graphs?.includes('train_step');
  return buildDecoderArtifacts(weights, dir, {
    ...options,
    builders: training ? { ...TRAINING_GRAPH_BUILDERS, ...options.builders } : options.builders,
  });
}
