import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createRng, createTensor, float32ToTensor, type Tensor } from '@flowgrpo/core';
import { ByteLevelTokenizer } from '../tokenizers/byte-level-tokenizer.js';
import type { DecoderConfig } from './config.js';
import { saveHfModel } from './weights/hf-folder.js';
import type { ModelWeights, WeightDType } from './weights/model-weights.js';
import { EMBED_TOKENS, expectedTensorShapes } from './weights/tensor-names.js';

// A tiny Qwen2-architecture model created from a seed, written as a real HF folder (config.json,
// model.safetensors, generation_config.json, tokenizer.json, tokenizer_config.json). It is the
// embedded default policy and the fixture of model tests: small, deterministic and loadable by
// anything that loads Qwen2.

export interface TinyQwen2Options {
  seed: number | bigint | string;
  hiddenSize?: number;
  layers?: number;
  heads?: number;
  kvHeads?: number;
  intermediateSize?: number;
  /** Rows of the embedding; at least the tokenizer's 259 (default: exactly that). */
  vocabSize?: number;
  headDim?: number;
  ropeTheta?: number;
  rmsNormEps?: number;
  tieWordEmbeddings?: boolean;
  maxPositionEmbeddings?: number;
  initializerRange?: number;
  /**
   * Std of the token embeddings (default: initializerRange). With tied embeddings it also sets
   * the logit range a model with untrained norms can reach: max logit ≈ hidden · std.
   */
  embeddingInitRange?: number;
  /** Storage dtype of model.safetensors and of the returned weights (default F32). */
  dtype?: WeightDType;
}

export interface TinyModel {
  dir: string;
  weights: ModelWeights;
  tokenizer: ByteLevelTokenizer;
}

/** The DecoderConfig createTinyQwen2 builds from its options. */
export function tinyQwen2Config(
  options: TinyQwen2Options,
  tokenizer = new ByteLevelTokenizer(),
): DecoderConfig {
  const hiddenSize = options.hiddenSize ?? 64;
  const heads = options.heads ?? 4;
  const vocabSize = options.vocabSize ?? tokenizer.vocabSize;
  if (vocabSize < tokenizer.vocabSize) {
    throw new RangeError(
      `vocabSize ${vocabSize} is smaller than the tokenizer's ${tokenizer.vocabSize}`,
    );
  }
  return {
    modelType: 'qwen2',
    vocabSize,
    hiddenSize,
    intermediateSize: options.intermediateSize ?? 4 * hiddenSize,
    numHiddenLayers: options.layers ?? 2,
    numAttentionHeads: heads,
    numKeyValueHeads: options.kvHeads ?? heads,
    headDim: options.headDim ?? hiddenSize / heads,
    ropeTheta: options.ropeTheta ?? 1_000_000,
    rmsNormEps: options.rmsNormEps ?? 1e-6,
    tieWordEmbeddings: options.tieWordEmbeddings ?? true,
    qkvBias: true,
    oBias: false,
    mlpBias: false,
    qkNorm: false,
    maxPositionEmbeddings: options.maxPositionEmbeddings ?? 2048,
    torchDtype: undefined,
    initializerRange: options.initializerRange ?? 0.02,
    bosTokenId: tokenizer.padTokenId,
    eosTokenId: tokenizer.eosTokenId,
  };
}

/**
 * Weights initialised as transformers' `_init_weights` does for Qwen2: every Linear and the
 * embedding ~ normal(0, initializer_range), RMSNorm weights 1, biases 0. Each tensor draws from
 * its own stream, `createRng(seed).fork(name)`, so a tensor does not depend on the others.
 */
export function initTinyWeights(
  config: DecoderConfig,
  seed: number | bigint | string,
  options: { embeddingInitRange?: number } = {},
): ModelWeights {
  const root = createRng(seed);
  const tensors = new Map<string, Tensor<WeightDType>>();
  for (const [name, shape] of expectedTensorShapes(config)) {
    const n = shape.reduce((a, b) => a * b, 1);
    const values = new Float32Array(n);
    if (name.endsWith('norm.weight')) values.fill(1);
    else if (!name.endsWith('.bias')) {
      const rng = root.fork(name);
      const std =
        name === EMBED_TOKENS
          ? (options.embeddingInitRange ?? config.initializerRange)
          : config.initializerRange;
      for (let i = 0; i < n; i++) values[i] = rng.normal() * std;
    }
    tensors.set(name, createTensor('F32', shape, values));
  }
  return { config, tensors };
}

/** Creates the model, writes its HF folder to `dir`, and returns what it wrote. */
export async function createTinyQwen2(dir: string, options: TinyQwen2Options): Promise<TinyModel> {
  const tokenizer = new ByteLevelTokenizer();
  const dtype = options.dtype ?? 'F32';
  const torchDtype = { F32: 'float32', F16: 'float16', BF16: 'bfloat16' }[dtype];
  const config = { ...tinyQwen2Config(options, tokenizer), torchDtype };
  const init = initTinyWeights(config, options.seed, {
    ...(options.embeddingInitRange !== undefined && {
      embeddingInitRange: options.embeddingInitRange,
    }),
  });
  const weights: ModelWeights = {
    config,
    tensors: new Map(
      [...init.tensors].map(([name, t]) => [
        name,
        dtype === 'F32' ? t : float32ToTensor(t.data as Float32Array, dtype, [...t.shape]),
      ]),
    ),
  };
  await mkdir(dir, { recursive: true });
  await saveHfModel(dir, weights, {
    dtype,
    extraJson: {
      'generation_config.json': {
        bos_token_id: config.bosTokenId,
        eos_token_id: [tokenizer.eosTokenId, tokenizer.padTokenId],
        pad_token_id: tokenizer.padTokenId,
        do_sample: false,
      },
    },
  });
  await writeFile(
    join(dir, 'tokenizer.json'),
    `${JSON.stringify(tokenizer.toTokenizerJson(), null, 2)}\n`,
  );
  await writeFile(
    join(dir, 'tokenizer_config.json'),
    `${JSON.stringify(tokenizer.toTokenizerConfig(), null, 2)}\n`,
  );
  return { dir, weights, tokenizer };
}
