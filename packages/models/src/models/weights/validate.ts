import type { DecoderConfig } from '../config.js';
import { WeightsMismatchError } from '../errors.js';
import { expectedTensorShapes, LM_HEAD } from './tensor-names.js';

// Buffers some exporters save next to the parameters; they are recomputed, never loaded.
const IGNORED = /\.rotary_emb\.inv_freq$/;

/**
 * Checks a checkpoint's tensor shapes against the config before anything is read or built:
 * every expected tensor present with its exact shape, and nothing unknown. A tied checkpoint
 * that still carries `lm_head.weight` is accepted (transformers ignores it too) when its shape fits.
 * Returns the names to load, in HF order.
 */
export function checkTensorShapes(
  config: DecoderConfig,
  actual: ReadonlyMap<string, readonly number[]>,
  file?: string,
): string[] {
  const expected = expectedTensorShapes(config);
  const where = file === undefined ? {} : { file };
  for (const [name, shape] of expected) {
    const got = actual.get(name);
    if (got === undefined || got.length !== shape.length || got.some((d, i) => d !== shape[i])) {
      throw new WeightsMismatchError({ tensor: name, expected: shape, actual: got, ...where });
    }
  }
  for (const [name, got] of actual) {
    if (expected.has(name) || IGNORED.test(name)) continue;
    if (name === LM_HEAD && config.tieWordEmbeddings) {
      const shape = [config.vocabSize, config.hiddenSize];
      if (got.length === 2 && got[0] === shape[0] && got[1] === shape[1]) continue;
      throw new WeightsMismatchError({ tensor: name, expected: shape, actual: got, ...where });
    }
    throw new WeightsMismatchError({ tensor: name, expected: undefined, actual: got, ...where });
  }
  return [...expected.keys()];
}
