import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ChatMessage } from '@flowgrpo/core';
import { ByteLevelTokenizer, createTinyQwen2 } from '@flowgrpo/models';
import type { TinyShape } from './templates.js';
import { fitTokenizer } from './tokenizer.js';

// The model `flowgrpo init` creates when no --model is given: a tiny Qwen2 from the seed, its
// tokenizer fit to the template's SFT text (tokenizer.ts: numbers and tags one token each, words
// merged), so its few hundred thousand weights learn the template's task in minutes.

/** Word merges of the template tokenizer: enough for the templates' prompts and replies. */
const WORD_MERGES = 400;

/** The text of an SFT row as the trainer renders it (ChatML for messages, prompt + completion). */
function rowText(row: object): string {
  if ('messages' in row)
    return new ByteLevelTokenizer().applyChatTemplate(row.messages as ChatMessage[], {
      addGenerationPrompt: false,
    });
  const { prompt, completion } = row as { prompt: string; completion: string };
  return `${prompt}${completion}`;
}

/** Writes the model folder `dir`: weights from `seed`, the tokenizer fit to `sftRows`. */
export async function createTemplateModel(
  dir: string,
  seed: number,
  shape: TinyShape,
  sftRows: readonly object[],
): Promise<void> {
  const { tokenizerJson, tokenizerConfig, vocabSize } = fitTokenizer(sftRows.map(rowText), {
    merges: WORD_MERGES,
  });
  await createTinyQwen2(dir, { seed, ...shape, vocabSize });
  // The byte tokenizer createTinyQwen2 wrote gives way to the fitted one: same special ids.
  for (const [file, json] of [
    ['tokenizer.json', tokenizerJson],
    ['tokenizer_config.json', tokenizerConfig],
  ] as const)
    await writeFile(join(dir, file), `${JSON.stringify(json, null, 2)}\n`);
}
