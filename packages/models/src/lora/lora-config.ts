import { ConfigError } from '@flowgrpo/core';
import type { DecoderConfig } from '../models/config.js';

// LoRA on the linear layers of a Llama / Qwen2 decoder, named as PEFT names them, so an adapter
// saved here loads in PEFT and vLLM: `base_model.model.model.layers.{i}.self_attn.q_proj.lora_A.weight`
// ([r, in]) and `…lora_B.weight` ([out, r]); the update is W·x + scaling · B·(A·x).

export const LORA_TARGET_MODULES = [
  'q_proj',
  'k_proj',
  'v_proj',
  'o_proj',
  'gate_proj',
  'up_proj',
  'down_proj',
] as const;
export type LoraTargetModule = (typeof LORA_TARGET_MODULES)[number];

export interface LoraConfig {
  /** Rank r. */
  r: number;
  /** lora_alpha; scaling = alpha / r (alpha / √r with useRslora). */
  alpha: number;
  targetModules: readonly LoraTargetModule[];
  /** rsLoRA scaling alpha / √r (PEFT's `use_rslora`). */
  useRslora?: boolean;
  /** Layers that carry adapters (PEFT's `layers_to_transform`); default all. */
  layers?: readonly number[];
}

export interface LoraParamSpec {
  /** PEFT tensor name; also the graph input name. */
  name: string;
  layer: number;
  module: LoraTargetModule;
  which: 'A' | 'B';
  /** A: [r, in]; B: [out, r]. */
  shape: [number, number];
}

export function loraScaling(lora: LoraConfig): number {
  return lora.useRslora ? lora.alpha / Math.sqrt(lora.r) : lora.alpha / lora.r;
}

/**
 * `lora` fits graphs built with `built`: the same rank, scaling (alpha, rsLoRA) and target
 * modules — the graphs bake the scale in and take inputs for their own modules only.
 */
export function loraFitsBuilt(lora: LoraConfig, built: LoraConfig & { scaling: number }): boolean {
  return (
    lora.r === built.r &&
    loraScaling(lora) === built.scaling &&
    lora.targetModules.length === built.targetModules.length &&
    lora.targetModules.every((m) => built.targetModules.includes(m))
  );
}

const PARENT: Record<LoraTargetModule, 'self_attn' | 'mlp'> = {
  q_proj: 'self_attn',
  k_proj: 'self_attn',
  v_proj: 'self_attn',
  o_proj: 'self_attn',
  gate_proj: 'mlp',
  up_proj: 'mlp',
  down_proj: 'mlp',
};

/** PEFT's name for one adapter matrix. */
export function loraTensorName(layer: number, module: LoraTargetModule, which: 'A' | 'B'): string {
  return `base_model.model.model.layers.${layer}.${PARENT[module]}.${module}.lora_${which}.weight`;
}

/** [in, out] features of a target module under a config. */
export function moduleFeatures(config: DecoderConfig, module: LoraTargetModule): [number, number] {
  const h = config.hiddenSize;
  const q = config.numAttentionHeads * config.headDim;
  const kv = config.numKeyValueHeads * config.headDim;
  const f = config.intermediateSize;
  switch (module) {
    case 'q_proj':
      return [h, q];
    case 'k_proj':
    case 'v_proj':
      return [h, kv];
    case 'o_proj':
      return [q, h];
    case 'gate_proj':
    case 'up_proj':
      return [h, f];
    case 'down_proj':
      return [f, h];
  }
}

export function validateLoraConfig(config: DecoderConfig, lora: LoraConfig): void {
  if (!Number.isInteger(lora.r) || lora.r < 1)
    throw new ConfigError(`LoRA rank r must be a positive integer, got ${lora.r}`, { key: 'r' });
  if (!(lora.alpha > 0))
    throw new ConfigError(`lora_alpha must be positive, got ${lora.alpha}`, { key: 'alpha' });
  if (lora.targetModules.length === 0)
    throw new ConfigError('LoRA needs at least one target module', { key: 'targetModules' });
  for (const m of lora.targetModules)
    if (!(LORA_TARGET_MODULES as readonly string[]).includes(m))
      throw new ConfigError(
        `unknown LoRA target module '${m}' (known: ${LORA_TARGET_MODULES.join(', ')})`,
        { key: 'targetModules' },
      );
  for (const l of lora.layers ?? [])
    if (!Number.isInteger(l) || l < 0 || l >= config.numHiddenLayers)
      throw new ConfigError(`LoRA layer ${l} outside [0, ${config.numHiddenLayers})`, {
        key: 'layers',
      });
}

/** Every adapter matrix, layer by layer, in LORA_TARGET_MODULES order, A before B. */
export function loraParamSpecs(config: DecoderConfig, lora: LoraConfig): LoraParamSpec[] {
  validateLoraConfig(config, lora);
  const layers = lora.layers ?? Array.from({ length: config.numHiddenLayers }, (_, i) => i);
  const out: LoraParamSpec[] = [];
  for (const layer of [...layers].sort((a, b) => a - b)) {
    for (const module of LORA_TARGET_MODULES) {
      if (!lora.targetModules.includes(module)) continue;
      const [inF, outF] = moduleFeatures(config, module);
      out.push({
        name: loraTensorName(layer, module, 'A'),
        layer,
        module,
        which: 'A',
        shape: [lora.r, inF],
      });
      out.push({
        name: loraTensorName(layer, module, 'B'),
        layer,
        module,
        which: 'B',
        shape: [outF, lora.r],
      });
    }
  }
  return out;
}
