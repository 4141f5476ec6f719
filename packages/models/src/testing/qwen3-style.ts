import type { DecoderConfig } from '../models/config.js';
import { type TinyQwen2Options, tinyQwen2Config } from '../models/tiny-factory.js';

/**
 * A tiny config with every optional part of the decoder on: Qwen3's q/k norms, o and MLP biases
 * (Llama's `o_bias`/`mlp_bias`), no q/k/v bias, an untied head — for tests that must cover each
 * kind of projection and norm, not only Qwen2's.
 */
export function qwen3StyleConfig(options: TinyQwen2Options): DecoderConfig {
  return {
    ...tinyQwen2Config(options),
    modelType: 'qwen3',
    qkvBias: false,
    qkNorm: true,
    oBias: true,
    mlpBias: true,
    tieWordEmbeddings: false,
  };
}
