import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { type ChatMessage, DataFormatError } from '@flowgrpo/core';
import { Template } from '@huggingface/jinja';
import { Tokenizer as HfTokenizersJs } from '@huggingface/tokenizers';
import type { ChatTemplateOptions, DecodeOptions, EncodeOptions, Tokenizer } from './tokenizer.js';

// A HF `tokenizer.json` + `tokenizer_config.json` pair, encoded and decoded by
// @huggingface/tokenizers (pure JS, offline) and chat templates rendered by @huggingface/jinja,
// the same two libraries transformers.js uses.

/** `bos_token` & co. in tokenizer_config.json: a string, an AddedToken object, or null. */
type TokenField = string | { content: string } | null | undefined;

export interface HfTokenizerConfig {
  bos_token?: TokenField;
  eos_token?: TokenField;
  pad_token?: TokenField;
  unk_token?: TokenField;
  chat_template?: string | { name: string; template: string }[] | null;
  [key: string]: unknown;
}

function tokenText(field: TokenField): string | undefined {
  if (field === null || field === undefined) return undefined;
  return typeof field === 'string' ? field : field.content;
}

function chatTemplateOf(config: HfTokenizerConfig): string | undefined {
  const t = config.chat_template;
  if (t === null || t === undefined) return undefined;
  if (typeof t === 'string') return t;
  return (t.find((x) => x.name === 'default') ?? t[0])?.template;
}

export class HfTokenizer implements Tokenizer {
  readonly vocabSize: number;
  readonly bosTokenId: number | undefined;
  readonly eosTokenId: number | undefined;
  readonly padTokenId: number | undefined;
  readonly specialTokens: ReadonlyMap<string, number>;
  /** The chat template source, when tokenizer_config.json has one. */
  readonly chatTemplate: string | undefined;
  // The @huggingface/tokenizers instance stays private: its types must not leak into our .d.ts.
  readonly #inner: HfTokenizersJs;
  private readonly config: HfTokenizerConfig;
  private template: Template | undefined;

  /** The id of a token's text (a vocabulary entry or an added token), if any. */
  tokenToId(token: string): number | undefined {
    return this.#inner.token_to_id(token) ?? undefined;
  }

  constructor(tokenizerJson: object, tokenizerConfig: HfTokenizerConfig) {
    this.#inner = new HfTokenizersJs(tokenizerJson, tokenizerConfig);
    this.config = tokenizerConfig;
    let maxId = -1;
    for (const id of this.#inner.get_vocab(true).values()) if (id > maxId) maxId = id;
    this.vocabSize = maxId + 1;
    const special = new Map<string, number>();
    for (const [id, t] of this.#inner.get_added_tokens_decoder())
      if (t.special) special.set(t.content, id);
    this.specialTokens = special;
    const idOf = (field: TokenField) => {
      const text = tokenText(field);
      return text === undefined ? undefined : this.#inner.token_to_id(text);
    };
    this.bosTokenId = idOf(tokenizerConfig.bos_token);
    this.eosTokenId = idOf(tokenizerConfig.eos_token);
    this.padTokenId = idOf(tokenizerConfig.pad_token);
    this.chatTemplate = chatTemplateOf(tokenizerConfig);
  }

  /** Loads `<dir>/tokenizer.json` and `<dir>/tokenizer_config.json` (the latter optional). */
  static async fromDir(dir: string): Promise<HfTokenizer> {
    const read = async (name: string, required: boolean): Promise<object | undefined> => {
      const path = join(dir, name);
      let text: string;
      try {
        text = await readFile(path, 'utf8');
      } catch (cause) {
        if (!required) return undefined;
        throw new DataFormatError(
          `cannot read ${name}: ${(cause as Error).message}`,
          { file: path },
          { cause },
        );
      }
      try {
        return JSON.parse(text) as object;
      } catch (cause) {
        throw new DataFormatError(
          `${name} is not JSON: ${(cause as Error).message}`,
          { file: path },
          { cause },
        );
      }
    };
    const tokenizerJson = (await read('tokenizer.json', true))!;
    const config = ((await read('tokenizer_config.json', false)) ?? {}) as HfTokenizerConfig;
    if (config.chat_template == null) {
      // transformers ≥ 4.43 may save the template as its own file instead.
      const template = await readFile(join(dir, 'chat_template.jinja'), 'utf8').catch(
        () => undefined,
      );
      if (template !== undefined) config.chat_template = template;
    }
    return new HfTokenizer(tokenizerJson, config);
  }

  /**
   * Encodes without the post-processor's special tokens (as `add_special_tokens=False`); special
   * tokens written in the text (e.g. `<|im_start|>`) become their ids. BOS is added on request.
   */
  encode(text: string, options: EncodeOptions = {}): Int32Array {
    const ids = this.#inner.encode(text, { add_special_tokens: false }).ids;
    if (options.addBos && this.bosTokenId !== undefined && ids[0] !== this.bosTokenId) {
      return Int32Array.from([this.bosTokenId, ...ids]);
    }
    return Int32Array.from(ids);
  }

  /** An empty list decodes to '' (an empty completion: the first sampled token was EOS). */
  decode(ids: ArrayLike<number>, options: DecodeOptions = {}): string {
    // @huggingface/tokenizers throws on an empty list; transformers' decode([]) is ''.
    if (ids.length === 0) return '';
    return this.#inner.decode(Array.from(ids), {
      skip_special_tokens: options.skipSpecialTokens ?? false,
    });
  }

  /** Renders the chat template with the variables transformers passes to it. */
  applyChatTemplate(messages: readonly ChatMessage[], options: ChatTemplateOptions): string {
    if (this.chatTemplate === undefined) {
      throw new DataFormatError('this tokenizer has no chat_template in tokenizer_config.json');
    }
    this.template ??= new Template(this.chatTemplate);
    return this.template.render({
      bos_token: tokenText(this.config.bos_token) ?? '',
      eos_token: tokenText(this.config.eos_token) ?? '',
      pad_token: tokenText(this.config.pad_token) ?? '',
      unk_token: tokenText(this.config.unk_token) ?? '',
      ...options.variables,
      messages: messages.map((m) => ({ ...m })),
      add_generation_prompt: options.addGenerationPrompt,
    });
  }
}
