import { createTensor } from '@flowgrpo/core';
import { type ModelWeights, weightAsFloat32 } from '../models/weights/model-weights.js';
import { layerTensorNames } from '../models/weights/tensor-names.js';
import {
  type LoraConfig,
  type LoraTargetModule,
  loraParamSpecs,
  loraScaling,
} from './lora-config.js';
import type { LoraParams } from './lora-weights.js';

// LoRA merged into the base weights, W' = W + scale · (alpha/r) · B·A, as PEFT's
// merge_and_unload does: the result is a plain HF model (no adapter) whose forward equals
// base + adapter. Accumulated in float64, stored as float32.

const WEIGHT_OF: Record<LoraTargetModule, keyof ReturnType<typeof layerTensorNames>> = {
  q_proj: 'qProj',
  k_proj: 'kProj',
  v_proj: 'vProj',
  o_proj: 'oProj',
  gate_proj: 'gateProj',
  up_proj: 'upProj',
  down_proj: 'downProj',
};

/** A copy of `weights` with the adapter merged in (`scale` multiplies the update; default 1). */
export function mergeLora(
  weights: ModelWeights,
  lora: LoraConfig,
  params: LoraParams,
  options: { scale?: number } = {},
): ModelWeights {
  const factor = (options.scale ?? 1) * loraScaling(lora);
  const tensors = new Map(weights.tensors);
  const specs = loraParamSpecs(weights.config, lora);
  for (const a of specs) {
    if (a.which !== 'A') continue;
    const b = specs.find((s) => s.layer === a.layer && s.module === a.module && s.which === 'B')!;
    const A = params.get(a.name);
    const B = params.get(b.name);
    if (!A || !B) throw new RangeError(`the adapter lacks ${A ? b.name : a.name}`);
    const name = layerTensorNames(a.layer)[WEIGHT_OF[a.module]];
    const W = weightAsFloat32(weights, name);
    const [r, inF] = a.shape;
    const outF = b.shape[0];
    const merged = new Float32Array(outF * inF);
    for (let o = 0; o < outF; o++) {
      for (let i = 0; i < inF; i++) {
        let s = 0;
        for (let k = 0; k < r; k++) s += B[o * r + k]! * A[k * inF + i]!;
        merged[o * inF + i] = W[o * inF + i]! + factor * s;
      }
    }
    tensors.set(name, createTensor('F32', [outF, inF], merged));
  }
  return { config: weights.config, tensors };
}
