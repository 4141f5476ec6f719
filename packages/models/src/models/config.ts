import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ValidationError } from '@flowgrpo/core';
import { z } from 'zod';
import { UnsupportedArchitectureError } from './errors.js';

// Decoder configs of the Llama / Qwen2 / Qwen3 families, read from a HF `config.json`.
// Defaults follow transformers' LlamaConfig / Qwen2Config / Qwen3Config where a field is absent.

export const SUPPORTED_MODEL_TYPES = ['llama', 'qwen2', 'qwen3'] as const;
export type DecoderModelType = (typeof SUPPORTED_MODEL_TYPES)[number];

/** Everything the reference forward and the graph builders need, in one validated object. */
export interface DecoderConfig {
  modelType: DecoderModelType;
  vocabSize: number;
  hiddenSize: number;
  intermediateSize: number;
  numHiddenLayers: number;
  numAttentionHeads: number;
  /** GQA: query heads share key/value heads in groups of numAttentionHeads / numKeyValueHeads. */
  numKeyValueHeads: number;
  headDim: number;
  ropeTheta: number;
  rmsNormEps: number;
  tieWordEmbeddings: boolean;
  /** q_proj, k_proj and v_proj carry a bias (always for Qwen2, `attention_bias` for the others). */
  qkvBias: boolean;
  /** o_proj carries a bias (Llama's `attention_bias`; never for Qwen2). */
  oBias: boolean;
  /** gate/up/down_proj carry a bias (Llama's `mlp_bias`). */
  mlpBias: boolean;
  /** Per-head RMSNorm of q and k before RoPE (Qwen3's q_norm / k_norm). */
  qkNorm: boolean;
  maxPositionEmbeddings: number;
  /** The checkpoint's storage dtype as config.json names it (`bfloat16`, `float32`, …). */
  torchDtype: string | undefined;
  initializerRange: number;
  bosTokenId: number | undefined;
  /** HF allows a list (several end tokens); the first one is the primary. */
  eosTokenId: number | number[] | undefined;
}

const positiveInt = z.number().int().positive();
const tokenId = z.number().int().nonnegative();

/** The subset of a HF `config.json` we read; other fields are kept but not used. */
export const HfDecoderConfigSchema = z.looseObject({
  model_type: z.string(),
  vocab_size: positiveInt,
  hidden_size: positiveInt,
  intermediate_size: positiveInt,
  num_hidden_layers: positiveInt,
  num_attention_heads: positiveInt,
  num_key_value_heads: positiveInt.nullish(),
  head_dim: positiveInt.nullish(),
  rope_theta: z.number().positive().optional(),
  rms_norm_eps: z.number().positive().optional(),
  tie_word_embeddings: z.boolean().optional(),
  attention_bias: z.boolean().optional(),
  mlp_bias: z.boolean().optional(),
  max_position_embeddings: positiveInt.optional(),
  torch_dtype: z.string().nullish(),
  dtype: z.string().nullish(),
  initializer_range: z.number().nonnegative().optional(),
  bos_token_id: tokenId.nullish(),
  eos_token_id: z.union([tokenId, z.array(tokenId).nonempty()]).nullish(),
  hidden_act: z.string().optional(),
  rope_scaling: z.record(z.string(), z.unknown()).nullish(),
  use_sliding_window: z.boolean().optional(),
});
export type HfDecoderConfig = z.infer<typeof HfDecoderConfigSchema>;

function isSupported(t: string): t is DecoderModelType {
  return (SUPPORTED_MODEL_TYPES as readonly string[]).includes(t);
}

/**
 * Validates a parsed HF `config.json` and turns it into a DecoderConfig. Throws
 * UnsupportedArchitectureError for another model_type or a feature we do not implement
 * (rope_scaling, sliding windows, an activation other than SiLU), ValidationError for bad fields.
 */
export function parseDecoderConfig(json: unknown): DecoderConfig {
  const modelType =
    typeof json === 'object' && json !== null && 'model_type' in json
      ? String((json as { model_type: unknown }).model_type)
      : undefined;
  if (modelType !== undefined && !isSupported(modelType)) {
    throw new UnsupportedArchitectureError({ modelType, supported: SUPPORTED_MODEL_TYPES });
  }
  const parsed = HfDecoderConfigSchema.safeParse(json);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => ({
      path: i.path.join('.'),
      message: i.message,
    }));
    throw new ValidationError(
      `invalid decoder config.json: ${issues.map((i) => `${i.path}: ${i.message}`).join('; ')}`,
      { issues, value: json },
    );
  }
  const c = parsed.data;
  const type = c.model_type as DecoderModelType;
  const unsupported = (feature: string, detail?: string) =>
    new UnsupportedArchitectureError({
      modelType: type,
      supported: SUPPORTED_MODEL_TYPES,
      feature,
      ...(detail === undefined ? {} : { detail }),
    });
  if (c.hidden_act !== undefined && c.hidden_act !== 'silu') {
    throw unsupported(`hidden_act '${c.hidden_act}'`, 'only silu (SwiGLU) is implemented');
  }
  if (c.rope_scaling) {
    const kind = c.rope_scaling.rope_type ?? c.rope_scaling.type;
    if (kind !== 'default') throw unsupported(`rope_scaling ${JSON.stringify(c.rope_scaling)}`);
  }
  if (c.use_sliding_window === true) throw unsupported('use_sliding_window');

  const heads = c.num_attention_heads;
  const kvHeads = c.num_key_value_heads ?? heads;
  if (heads % kvHeads !== 0) {
    throw new ValidationError(
      `num_attention_heads (${heads}) must be a multiple of num_key_value_heads (${kvHeads})`,
      { issues: [{ path: 'num_key_value_heads', message: 'does not divide num_attention_heads' }] },
    );
  }
  let headDim = c.head_dim;
  if (headDim == null) {
    if (c.hidden_size % heads !== 0) {
      throw new ValidationError(
        `hidden_size (${c.hidden_size}) is not a multiple of num_attention_heads (${heads}) and head_dim is absent`,
        { issues: [{ path: 'head_dim', message: 'required when hidden_size % heads != 0' }] },
      );
    }
    headDim = c.hidden_size / heads;
  }
  if (headDim % 2 !== 0) {
    throw new ValidationError(`head_dim must be even for RoPE, got ${headDim}`, {
      issues: [{ path: 'head_dim', message: 'odd' }],
    });
  }
  // Qwen2 always has a q/k/v bias and no o bias; Llama and Qwen3 put `attention_bias` on all
  // four projections. transformers' other defaults agree across the three families except for
  // the context length.
  const attentionBias = c.attention_bias ?? false;
  const defaultMaxPositions = type === 'llama' ? 2048 : 32768;
  return {
    modelType: type,
    vocabSize: c.vocab_size,
    hiddenSize: c.hidden_size,
    intermediateSize: c.intermediate_size,
    numHiddenLayers: c.num_hidden_layers,
    numAttentionHeads: heads,
    numKeyValueHeads: kvHeads,
    headDim,
    ropeTheta: c.rope_theta ?? 10000,
    rmsNormEps: c.rms_norm_eps ?? 1e-6,
    tieWordEmbeddings: c.tie_word_embeddings ?? false,
    qkvBias: type === 'qwen2' ? true : attentionBias,
    oBias: type === 'qwen2' ? false : attentionBias,
    mlpBias: type === 'llama' ? (c.mlp_bias ?? false) : false,
    qkNorm: type === 'qwen3',
    maxPositionEmbeddings: c.max_position_embeddings ?? defaultMaxPositions,
    torchDtype: c.torch_dtype ?? c.dtype ?? undefined,
    initializerRange: c.initializer_range ?? 0.02,
    bosTokenId: c.bos_token_id ?? undefined,
    eosTokenId: c.eos_token_id ?? undefined,
  };
}

/** Reads and validates `<dir>/config.json`. */
export async function loadDecoderConfig(dir: string): Promise<DecoderConfig> {
  const path = join(dir, 'config.json');
  let json: unknown;
  try {
    json = JSON.parse(await readFile(path, 'utf8'));
  } catch (cause) {
    throw new ValidationError(
      `${path}: cannot read config.json: ${(cause as Error).message}`,
      { issues: [{ path: 'config.json', message: 'unreadable or not JSON' }] },
      { cause },
    );
  }
  return parseDecoderConfig(json);
}

const ARCHITECTURES: Record<DecoderModelType, string> = {
  llama: 'LlamaForCausalLM',
  qwen2: 'Qwen2ForCausalLM',
  qwen3: 'Qwen3ForCausalLM',
};

/** The HF `config.json` object for a DecoderConfig (what transformers would write). */
export function toHfConfigJson(config: DecoderConfig): Record<string, unknown> {
  const out: Record<string, unknown> = {
    architectures: [ARCHITECTURES[config.modelType]],
    model_type: config.modelType,
    vocab_size: config.vocabSize,
    hidden_size: config.hiddenSize,
    intermediate_size: config.intermediateSize,
    num_hidden_layers: config.numHiddenLayers,
    num_attention_heads: config.numAttentionHeads,
    num_key_value_heads: config.numKeyValueHeads,
    head_dim: config.headDim,
    hidden_act: 'silu',
    rope_theta: config.ropeTheta,
    rope_scaling: null,
    rms_norm_eps: config.rmsNormEps,
    tie_word_embeddings: config.tieWordEmbeddings,
    max_position_embeddings: config.maxPositionEmbeddings,
    initializer_range: config.initializerRange,
    use_cache: true,
  };
  if (config.modelType !== 'qwen2') out.attention_bias = config.qkvBias;
  if (config.modelType === 'llama') out.mlp_bias = config.mlpBias;
  if (config.modelType === 'qwen2') {
    out.use_sliding_window = false;
    out.attention_dropout = 0;
  }
  if (config.torchDtype !== undefined) out.torch_dtype = config.torchDtype;
  if (config.bosTokenId !== undefined) out.bos_token_id = config.bosTokenId;
  if (config.eosTokenId !== undefined) out.eos_token_id = config.eosTokenId;
  return out;
}

/** The first end-of-sequence id, or every one when the config lists several. */
export function eosTokenIds(config: DecoderConfig): number[] {
  const e = config.eosTokenId;
  return e === undefined ? [] : Array.isArray(e) ? e : [e];
}
