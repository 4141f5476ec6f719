// Shared by the tests of the memory preflight and its switches (memory-preflight, shared-weights,
// gradient-checkpointing, sampling-weights): a Qwen2.5-0.5B-shaped GRPO run (24 layers, 896 wide,
// vocabulary 151,936 in chunks) with rollouts on a server, the GRPO keys the estimate reads (one
// micro-batch of 512 tokens), and two layers of that shape for the measured peaks.
import { type DecoderConfig, LORA_TARGET_MODULES, tinyQwen2Config } from '@flowgrpo/models';

export const QWEN05_FACTS = {
  config: tinyQwen2Config({
    seed: 0,
    vocabSize: 151936,
    hiddenSize: 896,
    layers: 24,
    heads: 14,
    kvHeads: 2,
    intermediateSize: 4864,
    maxPositionEmbeddings: 2048,
  }),
  lora: { r: 16, targetModules: LORA_TARGET_MODULES },
  headChunk: 16384,
  maxPositions: 2048,
  promptTokens: 200,
  localRollouts: false,
};

export const QWEN05_GRPO = {
  max_tokens_per_microbatch: 512,
  max_completion_length: 256,
  max_turns: 1,
  num_generations: 8,
  queries_per_step: 8,
  rollout_concurrency: 64,
};

/** Two layers of Qwen2.5-0.5B's shape at its real vocabulary (151,936; the head tied). */
export function twoQwen05Layers(maxPositions: number): DecoderConfig {
  return tinyQwen2Config({
    seed: 0,
    vocabSize: 151936,
    hiddenSize: 896,
    layers: 2,
    heads: 14,
    kvHeads: 2,
    intermediateSize: 4864,
    maxPositionEmbeddings: maxPositions,
  });
}
