import { stat } from 'node:fs/promises';
import { HfTokenizer } from './hf-tokenizer.js';
import { Llama2cTokenizer } from './llama2c-tokenizer.js';
import type { Tokenizer } from './tokenizer.js';

/**
 * A folder with `tokenizer.json` (+ `tokenizer_config.json`) loads as an HfTokenizer; a file as
 * a llama2.c `tok*.bin`, reading at most `vocabSize` tokens (the model's, as run.c does).
 */
export async function loadTokenizer(
  path: string,
  options: { vocabSize?: number } = {},
): Promise<Tokenizer> {
  if ((await stat(path)).isDirectory()) return HfTokenizer.fromDir(path);
  return Llama2cTokenizer.load(path, options.vocabSize);
}
