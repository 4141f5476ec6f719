import type { DecoderConfig } from '../config.js';

// HF transformers' parameter names for LlamaForCausalLM / Qwen2ForCausalLM / Qwen3ForCausalLM,
// and the shape the config implies for each. Linear weights are [out_features, in_features].

export const EMBED_TOKENS = 'model.embed_tokens.weight';
export const FINAL_NORM = 'model.norm.weight';
export const LM_HEAD = 'lm_head.weight';

/** Names of one layer's tensors (those the config does not use are still named). */
export function layerTensorNames(i: number) {
  const p = `model.layers.${i}`;
  return {
    inputNorm: `${p}.input_layernorm.weight`,
    qProj: `${p}.self_attn.q_proj.weight`,
    qBias: `${p}.self_attn.q_proj.bias`,
    kProj: `${p}.self_attn.k_proj.weight`,
    kBias: `${p}.self_attn.k_proj.bias`,
    vProj: `${p}.self_attn.v_proj.weight`,
    vBias: `${p}.self_attn.v_proj.bias`,
    oProj: `${p}.self_attn.o_proj.weight`,
    oBias: `${p}.self_attn.o_proj.bias`,
    qNorm: `${p}.self_attn.q_norm.weight`,
    kNorm: `${p}.self_attn.k_norm.weight`,
    postAttentionNorm: `${p}.post_attention_layernorm.weight`,
    gateProj: `${p}.mlp.gate_proj.weight`,
    gateBias: `${p}.mlp.gate_proj.bias`,
    upProj: `${p}.mlp.up_proj.weight`,
    upBias: `${p}.mlp.up_proj.bias`,
    downProj: `${p}.mlp.down_proj.weight`,
    downBias: `${p}.mlp.down_proj.bias`,
  };
}

/** Every tensor a checkpoint of this config must hold, with its shape, in HF's module order. */
export function expectedTensorShapes(config: DecoderConfig): Map<string, number[]> {
  const h = config.hiddenSize;
  const q = config.numAttentionHeads * config.headDim;
  const kv = config.numKeyValueHeads * config.headDim;
  const f = config.intermediateSize;
  const out = new Map<string, number[]>();
  out.set(EMBED_TOKENS, [config.vocabSize, h]);
  for (let i = 0; i < config.numHiddenLayers; i++) {
    const n = layerTensorNames(i);
    out.set(n.qProj, [q, h]);
    if (config.qkvBias) out.set(n.qBias, [q]);
    out.set(n.kProj, [kv, h]);
    if (config.qkvBias) out.set(n.kBias, [kv]);
    out.set(n.vProj, [kv, h]);
    if (config.qkvBias) out.set(n.vBias, [kv]);
    out.set(n.oProj, [h, q]);
    if (config.oBias) out.set(n.oBias, [h]);
    if (config.qkNorm) {
      out.set(n.qNorm, [config.headDim]);
      out.set(n.kNorm, [config.headDim]);
    }
    out.set(n.gateProj, [f, h]);
    if (config.mlpBias) out.set(n.gateBias, [f]);
    out.set(n.upProj, [f, h]);
    if (config.mlpBias) out.set(n.upBias, [f]);
    out.set(n.downProj, [h, f]);
    if (config.mlpBias) out.set(n.downBias, [h]);
    out.set(n.inputNorm, [h]);
    out.set(n.postAttentionNorm, [h]);
  }
  out.set(FINAL_NORM, [h]);
  if (!config.tieWordEmbeddings) out.set(LM_HEAD, [config.vocabSize, h]);
  return out;
}
