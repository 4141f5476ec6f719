// Decoder configs from HF config.json (the field values of published checkpoints' config.json
// files: Qwen2.5-0.5B-Instruct, TinyLlama-1.1B-Chat-v1.0, Qwen3-0.6B) and the shape checks that
// run against a checkpoint's safetensors headers before any weight is read.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ValidationError, writeSafetensors } from '@flowgrpo/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  loadHfModel,
  parseDecoderConfig,
  toHfConfigJson,
  UnsupportedArchitectureError,
  WeightsMismatchError,
} from '../src/index.js';
import { expectedTensorShapes } from '../src/models/weights/tensor-names.js';

const QWEN25_05B = {
  architectures: ['Qwen2ForCausalLM'],
  attention_dropout: 0.0,
  bos_token_id: 151643,
  eos_token_id: 151645,
  hidden_act: 'silu',
  hidden_size: 896,
  initializer_range: 0.02,
  intermediate_size: 4864,
  max_position_embeddings: 32768,
  max_window_layers: 21,
  model_type: 'qwen2',
  num_attention_heads: 14,
  num_hidden_layers: 24,
  num_key_value_heads: 2,
  rms_norm_eps: 1e-6,
  rope_theta: 1000000.0,
  sliding_window: 32768,
  tie_word_embeddings: true,
  torch_dtype: 'bfloat16',
  transformers_version: '4.43.1',
  use_cache: true,
  use_sliding_window: false,
  vocab_size: 151936,
};

const TINYLLAMA = {
  architectures: ['LlamaForCausalLM'],
  bos_token_id: 1,
  eos_token_id: 2,
  hidden_act: 'silu',
  hidden_size: 2048,
  initializer_range: 0.02,
  intermediate_size: 5632,
  max_position_embeddings: 2048,
  model_type: 'llama',
  num_attention_heads: 32,
  num_hidden_layers: 22,
  num_key_value_heads: 4,
  pretraining_tp: 1,
  rms_norm_eps: 1e-5,
  rope_scaling: null,
  rope_theta: 10000.0,
  tie_word_embeddings: false,
  torch_dtype: 'bfloat16',
  use_cache: true,
  vocab_size: 32000,
};

const QWEN3_06B = {
  architectures: ['Qwen3ForCausalLM'],
  attention_bias: false,
  bos_token_id: 151643,
  eos_token_id: 151645,
  head_dim: 128,
  hidden_act: 'silu',
  hidden_size: 1024,
  intermediate_size: 3072,
  max_position_embeddings: 40960,
  model_type: 'qwen3',
  num_attention_heads: 16,
  num_hidden_layers: 28,
  num_key_value_heads: 8,
  rms_norm_eps: 1e-6,
  rope_scaling: null,
  rope_theta: 1000000,
  tie_word_embeddings: true,
  torch_dtype: 'bfloat16',
  vocab_size: 151936,
};

describe('parseDecoderConfig', () => {
  it('Qwen2.5-0.5B: GQA 14/2, head_dim 896/14 = 64, q/k/v bias but no o bias, tied', () => {
    const c = parseDecoderConfig(QWEN25_05B);
    expect(c).toMatchObject({
      modelType: 'qwen2',
      hiddenSize: 896,
      numAttentionHeads: 14,
      numKeyValueHeads: 2,
      headDim: 64,
      ropeTheta: 1e6,
      rmsNormEps: 1e-6,
      tieWordEmbeddings: true,
      qkvBias: true,
      oBias: false,
      qkNorm: false,
      torchDtype: 'bfloat16',
      bosTokenId: 151643,
      eosTokenId: 151645,
    });
    const shapes = expectedTensorShapes(c);
    expect(shapes.get('model.layers.0.self_attn.k_proj.weight')).toEqual([128, 896]);
    expect(shapes.get('model.layers.0.self_attn.k_proj.bias')).toEqual([128]);
    expect(shapes.has('model.layers.0.self_attn.o_proj.bias')).toBe(false);
    expect(shapes.has('lm_head.weight')).toBe(false);
    // 3 + 7 + 2 per layer (q/k/v w+b, o, gate, up, down, two norms) + embed + final norm.
    expect(shapes.size).toBe(24 * 12 + 2);
    // Parameter count of Qwen2.5-0.5B as published: 494,032,768.
    let params = 0;
    for (const s of shapes.values()) params += s.reduce((a, b) => a * b, 1);
    expect(params).toBe(494_032_768);
  });

  it('TinyLlama: no biases, untied lm_head, eps 1e-5', () => {
    const c = parseDecoderConfig(TINYLLAMA);
    expect(c).toMatchObject({
      modelType: 'llama',
      headDim: 64,
      qkvBias: false,
      oBias: false,
      tieWordEmbeddings: false,
    });
    const shapes = expectedTensorShapes(c);
    expect(shapes.get('lm_head.weight')).toEqual([32000, 2048]);
    let params = 0;
    for (const s of shapes.values()) params += s.reduce((a, b) => a * b, 1);
    expect(params).toBe(1_100_048_384); // TinyLlama-1.1B's published parameter count
  });

  it('Qwen3: explicit head_dim 128 (≠ 1024/16), q_norm/k_norm per head', () => {
    const c = parseDecoderConfig(QWEN3_06B);
    expect(c).toMatchObject({ modelType: 'qwen3', headDim: 128, qkNorm: true, qkvBias: false });
    const shapes = expectedTensorShapes(c);
    expect(shapes.get('model.layers.0.self_attn.q_proj.weight')).toEqual([2048, 1024]);
    expect(shapes.get('model.layers.0.self_attn.q_norm.weight')).toEqual([128]);
  });

  it('round-trips through toHfConfigJson', () => {
    for (const raw of [QWEN25_05B, TINYLLAMA, QWEN3_06B]) {
      const c = parseDecoderConfig(raw);
      expect(parseDecoderConfig(JSON.parse(JSON.stringify(toHfConfigJson(c))))).toEqual(c);
    }
  });

  it('rejects other architectures and unimplemented features with UnsupportedArchitectureError', () => {
    let err: unknown;
    try {
      parseDecoderConfig({ ...TINYLLAMA, model_type: 'gpt2' });
    } catch (e) {
      err = e;
    }
    expect(UnsupportedArchitectureError.isInstance(err)).toBe(true);
    expect((err as UnsupportedArchitectureError).modelType).toBe('gpt2');
    expect((err as UnsupportedArchitectureError).supported).toEqual(['llama', 'qwen2', 'qwen3']);
    expect(() =>
      parseDecoderConfig({ ...TINYLLAMA, rope_scaling: { rope_type: 'llama3', factor: 8 } }),
    ).toThrow(/rope_scaling/);
    expect(() => parseDecoderConfig({ ...QWEN25_05B, use_sliding_window: true })).toThrow(
      UnsupportedArchitectureError,
    );
    expect(() => parseDecoderConfig({ ...TINYLLAMA, hidden_act: 'gelu' })).toThrow(/hidden_act/);
  });

  it('rejects invalid fields with ValidationError', () => {
    const { hidden_size: _, ...noHidden } = TINYLLAMA;
    expect(() => parseDecoderConfig(noHidden)).toThrow(ValidationError);
    expect(() => parseDecoderConfig({ ...TINYLLAMA, num_key_value_heads: 5 })).toThrow(/multiple/);
    expect(() => parseDecoderConfig({ ...TINYLLAMA, vocab_size: -1 })).toThrow(ValidationError);
  });
});

describe('loadHfModel shape checks', () => {
  // A 1-layer llama: hidden 8, 2 heads, 1 kv head (head_dim 4), ffn 16, vocab 10, tied.
  const config = {
    model_type: 'llama',
    vocab_size: 10,
    hidden_size: 8,
    intermediate_size: 16,
    num_hidden_layers: 1,
    num_attention_heads: 2,
    num_key_value_heads: 1,
    tie_word_embeddings: true,
  };
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'weights-check-'));
    await writeFile(join(dir, 'config.json'), JSON.stringify(config));
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  const tensors = (override: Record<string, number[] | null>) => {
    const shapes = new Map(expectedTensorShapes(parseDecoderConfig(config)));
    for (const [name, shape] of Object.entries(override)) {
      if (shape === null) shapes.delete(name);
      else shapes.set(name, shape);
    }
    return [...shapes].map(([name, shape]) => {
      const data = new Float32Array(shape.reduce((a, b) => a * b, 1)).fill(0.5);
      return [name, { dtype: 'F32' as const, shape, data }] as const;
    });
  };
  const expectMismatch = async (
    tensor: string,
    expected: number[] | undefined,
    actual: number[] | undefined,
  ) => {
    const err = await loadHfModel(dir).catch((e: unknown) => e);
    expect(WeightsMismatchError.isInstance(err)).toBe(true);
    const m = err as WeightsMismatchError;
    expect([m.tensor, m.expected, m.actual]).toEqual([tensor, expected, actual]);
  };

  it('loads a matching checkpoint, converting to the requested dtype', async () => {
    await writeSafetensors(join(dir, 'model.safetensors'), tensors({}));
    const w = await loadHfModel(dir);
    expect(w.tensors.get('model.layers.0.self_attn.k_proj.weight')?.shape).toEqual([4, 8]);
    expect(w.tensors.get('model.norm.weight')?.dtype).toBe('F32');
    const half = await loadHfModel(dir, { dtype: 'BF16' });
    // 0.5 is exact in bfloat16: sign 0, exponent 126, mantissa 0 → 0x3f00.
    expect(half.tensors.get('model.norm.weight')?.data[0]).toBe(0x3f00);
  });

  it('names the tensor, the expected and the actual shape', async () => {
    await writeSafetensors(
      join(dir, 'model.safetensors'),
      tensors({ 'model.layers.0.self_attn.k_proj.weight': [8, 8] }),
    );
    await expectMismatch('model.layers.0.self_attn.k_proj.weight', [4, 8], [8, 8]);
    await writeSafetensors(
      join(dir, 'model.safetensors'),
      tensors({ 'model.layers.0.mlp.up_proj.weight': null }),
    );
    await expectMismatch('model.layers.0.mlp.up_proj.weight', [16, 8], undefined);
    await writeSafetensors(
      join(dir, 'model.safetensors'),
      tensors({ 'model.layers.0.self_attn.q_proj.bias': [8] }),
    );
    await expectMismatch('model.layers.0.self_attn.q_proj.bias', undefined, [8]);
    // A tied checkpoint may still carry lm_head.weight (some exporters save it): accepted.
    await writeSafetensors(join(dir, 'model.safetensors'), tensors({ 'lm_head.weight': [10, 8] }));
    await expect(loadHfModel(dir)).resolves.toBeDefined();
  });
});
