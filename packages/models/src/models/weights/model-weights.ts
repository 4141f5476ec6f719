import { float32ToTensor, type Tensor, tensorToFloat32, ValidationError } from '@flowgrpo/core';
import type { DecoderConfig } from '../config.js';

/** Floating dtypes weights are held in once loaded. */
export type WeightDType = 'F32' | 'F16' | 'BF16';

/**
 * A decoder's weights under their HF names, with the config they were checked against.
 * 16-bit tensors hold raw bit patterns (Uint16Array), as @flowgrpo/core's Tensor does.
 */
export interface ModelWeights {
  config: DecoderConfig;
  tensors: Map<string, Tensor<WeightDType>>;
}

/**
 * How to store tensors on load: a fixed dtype (converted, round-to-nearest-even when narrowing),
 * or `keep` the checkpoint's own float dtype (F64 is narrowed to F32).
 */
export type LoadDType = WeightDType | 'keep';

export function convertWeightTensor(t: Tensor, dtype: LoadDType): Tensor<WeightDType> {
  if (t.dtype !== 'F32' && t.dtype !== 'F16' && t.dtype !== 'BF16' && t.dtype !== 'F64') {
    throw new ValidationError(`weights must be floating point, got ${t.dtype}`, {
      issues: [{ path: 'dtype', message: 'not a float dtype' }],
    });
  }
  const target: WeightDType = dtype === 'keep' ? (t.dtype === 'F64' ? 'F32' : t.dtype) : dtype;
  if (t.dtype === target) return t as Tensor<WeightDType>;
  return float32ToTensor(tensorToFloat32(t), target, [...t.shape]);
}

/** One tensor's values as float32 (a view when it is stored as F32). */
export function weightAsFloat32(weights: ModelWeights, name: string): Float32Array {
  const t = weights.tensors.get(name);
  if (t === undefined) {
    throw new ValidationError(`no weight named '${name}'`, {
      issues: [{ path: name, message: 'missing' }],
    });
  }
  return tensorToFloat32(t);
}
