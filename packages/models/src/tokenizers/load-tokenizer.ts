import { stat } from 'node:fs/promises';
import { isHubName, resolveModelSource } from '@flowgrpo/core';
import { HfTokenizer } from './hf-tokenizer.js';
import { Llama2cTokenizer } from './llama2c-tokenizer.js';
import type { Tokenizer } from './tokenizer.js';

/**
 * A folder with `tokenizer.json` (+ `tokenizer_config.json`) loads as an HfTokenizer; a file as
 * a llama2.c `tok*.bin`, reading at most `vocabSize` tokens (the model's, as run.c does). A hub
 * model name (`org/name[@revision]`, no local path of that name) has its tokenizer files (not
 * its weights) fetched into the HF cache.
 */
export async function loadTokenizer(
  pathOrHubName: string,
  options: { vocabSize?: number } = {},
): Promise<Tokenizer> {
  const path = isHubName(pathOrHubName)
    ? await resolveModelSource(pathOrHubName, { tokenizerOnly: true })
    : pathOrHubName;
  if ((await stat(path)).isDirectory()) return HfTokenizer.fromDir(path);
  return Llama2cTokenizer.load(path, options.vocabSize);
}
