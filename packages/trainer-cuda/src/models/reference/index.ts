export {
  argmax,
  type GreedyOptions,
  type GreedyResult,
  generateGreedy,
  type KvCache,
  ReferenceDecoder,
} from './reference-decoder.js';
