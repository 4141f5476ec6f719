import type { ChatMessage } from '@flowgrpo/core';

export interface EncodeOptions {
  /** Prepend the BOS token (when the tokenizer has one). Default false. */
  addBos?: boolean;
}

export interface DecodeOptions {
  /** Drop special tokens (BOS, EOS, chat markers) from the text. Default false. */
  skipSpecialTokens?: boolean;
}

export interface ChatTemplateOptions {
  /** End with the header of an assistant turn, so the model writes the reply. */
  addGenerationPrompt: boolean;
  /** Extra variables for the template (e.g. `enable_thinking: false` for Qwen3). */
  variables?: Record<string, unknown>;
}

/**
 * One interface over the tokenizers the trainer uses: llama2.c's sentencepiece export, HF
 * `tokenizer.json`, and the tiny byte-level tokenizer of generated models. It fits
 * @flowgrpo/agent's PolicyTokenizer, so a trainer-side policy can expose it as is.
 */
export interface Tokenizer {
  readonly vocabSize: number;
  readonly bosTokenId: number | undefined;
  readonly eosTokenId: number | undefined;
  readonly padTokenId: number | undefined;
  /** Special tokens by their text. */
  readonly specialTokens: ReadonlyMap<string, number>;
  encode(text: string, options?: EncodeOptions): Int32Array;
  decode(ids: ArrayLike<number>, options?: DecodeOptions): string;
  /** Renders messages with the model's chat template; absent when the tokenizer has none. */
  applyChatTemplate?(messages: readonly ChatMessage[], options: ChatTemplateOptions): string;
}
