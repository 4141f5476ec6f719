// Model shapes for the benchmarks: random weights of a given config (a shape, not a model), and
// the Qwen2.5-0.5B config with a chosen number of layers.
import { createTensor, type Tensor } from '@flowgrpo/core';
import type { DecoderConfig } from '../src/models/config.js';
import type { ModelWeights, WeightDType } from '../src/models/weights/model-weights.js';
import { expectedTensorShapes } from '../src/models/weights/tensor-names.js';

/** Random weights fast (xorshift uniform · 0.02; norms 1): a shape, not a model. */
export function randomWeights(config: DecoderConfig): ModelWeights {
  const tensors = new Map<string, Tensor<WeightDType>>();
  let s = 0x9e3779b9 >>> 0;
  for (const [name, shape] of expectedTensorShapes(config)) {
    const n = shape.reduce((a, b) => a * b, 1);
    const v = new Float32Array(n);
    if (name.endsWith('norm.weight')) v.fill(1);
    else
      for (let i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >>> 17;
        s ^= s << 5;
        v[i] = ((s >>> 0) / 2 ** 32 - 0.5) * 0.04;
      }
    tensors.set(name, createTensor('F32', shape, v));
  }
  return { config, tensors };
}

export const qwen05: (layers: number) => DecoderConfig = (layers) => ({
  modelType: 'qwen2',
  vocabSize: 151936,
  hiddenSize: 896,
  intermediateSize: 4864,
  numHiddenLayers: layers,
  numAttentionHeads: 14,
  numKeyValueHeads: 2,
  headDim: 64,
  ropeTheta: 1000000,
  rmsNormEps: 1e-6,
  tieWordEmbeddings: true,
  qkvBias: true,
  oBias: false,
  mlpBias: false,
  qkNorm: false,
  maxPositionEmbeddings: 32768,
  torchDtype: 'float32',
  initializerRange: 0.02,
  bosTokenId: undefined,
  eosTokenId: 151645,
});
