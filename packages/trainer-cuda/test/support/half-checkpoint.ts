// A half-precision checkpoint for the tests of half-precision projections (half-weights,
// sampling-weights): a config's random weights rounded to bf16 or fp16 values, held as such.
import { float32ToTensor, tensorToFloat32 } from '@flowgrpo/core';
import { type DecoderConfig, initTinyWeights, type ModelWeights } from '@flowgrpo/models';

/** `config`'s random weights rounded to half values, held as such (a bf16 or fp16 checkpoint). */
export function halfWeights(
  config: DecoderConfig,
  seed: number,
  dtype: 'BF16' | 'F16' = 'BF16',
): ModelWeights {
  const w = initTinyWeights(config, seed);
  for (const [name, t] of w.tensors)
    w.tensors.set(name, float32ToTensor(tensorToFloat32(t), dtype, [...t.shape]));
  return w;
}
