// Model shapes for the benchmarks: random weights of a given config (a shape, not a model), and
// the Qwen2.5-0.5B and 1.5B configs with a chosen number of layers.
import { createTensor, type Tensor } from '@flowgrpo/core';
import type { DecoderConfig, ModelWeights, WeightDType } from '@flowgrpo/models';
import { expectedTensorShapes } from '@flowgrpo/models';
import * as ort from 'onnxruntime-node';

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

/** Qwen2.5-1.5B's shape: 0.5B's but 1,536 wide, an MLP of 8,960 and 12 heads of 128. */
export const qwen15: (layers: number) => DecoderConfig = (layers) => ({
  ...qwen05(layers),
  hiddenSize: 1536,
  intermediateSize: 8960,
  numAttentionHeads: 12,
  headDim: 128,
});

/**
 * Feeds of a train_step graph for a batch of B rows × T tokens, every position after the first
 * a target: ids from a fixed pattern; LoRA matrices small and non-zero; accumulators zero;
 * per-target weights uniform (a mean loss); other scalars and vectors at plausible values (old /
 * reference logprobs −5, advantages 1, clip ranges 0.2). The graph's own input list decides which
 * of these exist.
 */
export function trainStepFeeds(
  inputs: readonly { name: string; shape?: readonly (number | string)[] }[],
  B: number,
  T: number,
  vocabSize: number,
): Record<string, ort.Tensor> {
  const K = T - 1;
  const int64 = (n: number, f: (i: number) => number, dims: number[]) =>
    new ort.Tensor(
      'int64',
      BigInt64Array.from({ length: n }, (_, i) => BigInt(f(i))),
      dims,
    );
  const feeds: Record<string, ort.Tensor> = {
    input_ids: int64(B * T, (i) => (i * 7919 + 13) % vocabSize, [B, T]),
    attention_mask: int64(B * T, () => 1, [B, T]),
    position_ids: int64(B * T, (i) => i % T, [B, T]),
    // One example per row (the anchor does not pack); read only by graphs that take packed rows.
    segment_ids: int64(B * T, () => 0, [B, T]),
    target_positions: int64(B * K, (i) => i % K, [B, K]),
    target_ids: int64(B * K, (i) => ((i + 1) * 7919 + 13) % vocabSize, [B, K]),
  };
  const names = new Set(inputs.map((s) => s.name));
  for (const name of Object.keys(feeds)) if (!names.has(name)) delete feeds[name];
  for (const spec of inputs) {
    if (feeds[spec.name]) continue;
    const dims = (spec.shape ?? []).map((d) =>
      typeof d === 'number' ? d : d === 'batch' ? B : d === 'seq' ? T : K,
    );
    const n = dims.reduce((a, b) => a * b, 1);
    const name = spec.name;
    if (name === 'on_policy' || name === 'is_weighted' || name === 'is_mask') {
      // The fed old log-probs (−5) are used, as train_step.py's loss takes its old ones; no
      // token is importance-weighted (the anchor's rollouts are its own).
      feeds[name] = new ort.Tensor('bool', new Uint8Array(n), dims);
      continue;
    }
    const value = name.startsWith('acc.')
      ? 0
      : name.includes('.lora_')
        ? 0.01
        : name.startsWith('epsilon')
          ? 0.2
          : name.endsWith('weights') || name === 'loss_mask'
            ? 1 / (B * K)
            : name.endsWith('logprobs')
              ? -5
              : name === 'beta' || name === 'kl_coeffs'
                ? 0
                : 1;
    feeds[name] = new ort.Tensor('float32', new Float32Array(n).fill(value), dims);
  }
  return feeds;
}
