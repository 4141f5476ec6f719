// '@flowgrpo/models/testing': independent references to check a decoder's ONNX graphs against.
// ReferenceDecoder runs the same architecture as plain float64 loops over the weights (llama2.c's
// run.c, transcribed) and shares no code with the graph builder, so agreement between the two is
// evidence; use it in your own tests of custom models, adapters or exports.
export {
  argmax,
  type GreedyOptions,
  type GreedyResult,
  generateGreedy,
  type KvCache,
  ReferenceDecoder,
  referenceSequenceLogprobs,
  referenceTokenLogprob,
} from '../models/reference/index.js';
export { qwen3StyleConfig } from './qwen3-style.js';
