export {
  argmax,
  type GreedyOptions,
  type GreedyResult,
  generateGreedy,
  type KvCache,
  ReferenceDecoder,
  referenceSequenceLogprobs,
  referenceTokenLogprob,
} from './reference-decoder.js';
