import type { ChatMessage } from '@flowgrpo/core';
import { HfTokenizer, type HfTokenizerConfig } from './hf-tokenizer.js';
import type { ChatTemplateOptions, DecodeOptions, EncodeOptions, Tokenizer } from './tokenizer.js';

// The tokenizer of generated tiny models: id b is the byte b (0–255), then a few special tokens.
// It is written out as a real HF tokenizer.json — a byte-level BPE with no merges, so every byte
// stays its own token — which @huggingface/tokenizers and transformers load as they load Qwen's.
// The class also encodes natively (no dependency, a few lines) with identical ids.

export const BYTE_LEVEL_SPECIAL_TOKENS = ['<|endoftext|>', '<|im_start|>', '<|im_end|>'] as const;

/** ChatML, as Qwen2.5's template renders it when no tools are given (no default system turn). */
export const CHATML_TEMPLATE =
  "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}{%- endfor %}" +
  "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";

/**
 * GPT-2's byte-to-unicode table, which ByteLevel pre-tokenizers use: printable Latin-1 bytes map
 * to themselves, the other 68 bytes to U+0100 onwards, in byte order.
 */
export function bytesToUnicode(): string[] {
  const printable = (b: number) =>
    (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
  const out: string[] = [];
  let n = 0;
  for (let b = 0; b < 256; b++) out.push(String.fromCharCode(printable(b) ? b : 256 + n++));
  return out;
}

export interface ByteLevelTokenizerOptions {
  /** Special tokens after the 256 bytes, in id order (default `<|endoftext|>`, `<|im_start|>`, `<|im_end|>`). */
  specialTokens?: readonly string[];
  /** End-of-sequence token (default `<|im_end|>`, the end of a chat turn). */
  eosToken?: string;
  /** Padding token (default `<|endoftext|>`). */
  padToken?: string;
  chatTemplate?: string;
}

export class ByteLevelTokenizer implements Tokenizer {
  readonly vocabSize: number;
  readonly bosTokenId = undefined;
  readonly eosTokenId: number | undefined;
  readonly padTokenId: number | undefined;
  readonly specialTokens: ReadonlyMap<string, number>;
  readonly chatTemplate: string;
  private readonly specialById = new Map<number, string>();
  // Longest first, so a special token that prefixes another cannot shadow it.
  private readonly specialsByLength: string[];
  private readonly specialFirstChars: Set<string>;
  private hf: HfTokenizer | undefined;

  constructor(options: ByteLevelTokenizerOptions = {}) {
    const specials = options.specialTokens ?? BYTE_LEVEL_SPECIAL_TOKENS;
    const map = new Map<string, number>();
    specials.forEach((s, i) => {
      if (s.length === 0 || map.has(s))
        throw new RangeError(`invalid or duplicate special token '${s}'`);
      map.set(s, 256 + i);
      this.specialById.set(256 + i, s);
    });
    this.specialTokens = map;
    this.specialsByLength = [...specials].sort((a, b) => b.length - a.length);
    this.specialFirstChars = new Set(specials.map((s) => s[0]!));
    this.vocabSize = 256 + specials.length;
    this.eosTokenId = map.get(options.eosToken ?? '<|im_end|>');
    this.padTokenId = map.get(options.padToken ?? '<|endoftext|>');
    this.chatTemplate = options.chatTemplate ?? CHATML_TEMPLATE;
  }

  /** UTF-8 bytes as ids, special tokens written in the text as their ids. No BOS exists. */
  encode(text: string, _options: EncodeOptions = {}): Int32Array {
    const out: number[] = [];
    const enc = new TextEncoder();
    let start = 0;
    const flush = (end: number) => {
      for (const b of enc.encode(text.slice(start, end))) out.push(b);
    };
    for (let i = 0; i < text.length; ) {
      const special = this.specialFirstChars.has(text[i]!)
        ? this.specialsByLength.find((s) => text.startsWith(s, i))
        : undefined;
      if (special === undefined) {
        i++;
        continue;
      }
      flush(i);
      out.push(this.specialTokens.get(special)!);
      i += special.length;
      start = i;
    }
    flush(text.length);
    return Int32Array.from(out);
  }

  decode(ids: ArrayLike<number>, options: DecodeOptions = {}): string {
    let text = '';
    let bytes: number[] = [];
    const flush = () => {
      text += new TextDecoder('utf-8').decode(Uint8Array.from(bytes));
      bytes = [];
    };
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i]!;
      if (id >= 0 && id < 256) {
        bytes.push(id);
        continue;
      }
      const special = this.specialById.get(id);
      if (special === undefined)
        throw new RangeError(`token id ${id} outside [0, ${this.vocabSize})`);
      flush();
      if (!options.skipSpecialTokens) text += special;
    }
    flush();
    return text;
  }

  applyChatTemplate(messages: readonly ChatMessage[], options: ChatTemplateOptions): string {
    this.hf ??= new HfTokenizer(this.toTokenizerJson(), this.toTokenizerConfig());
    return this.hf.applyChatTemplate(messages, options);
  }

  /** The HF `tokenizer.json`: ByteLevel pre-tokenizer/decoder around a merge-free BPE. */
  toTokenizerJson(): Record<string, unknown> {
    const table = bytesToUnicode();
    const vocab: Record<string, number> = {};
    table.forEach((ch, b) => {
      vocab[ch] = b;
    });
    const byteLevel = {
      type: 'ByteLevel',
      add_prefix_space: false,
      trim_offsets: false,
      use_regex: false,
    };
    return {
      version: '1.0',
      truncation: null,
      padding: null,
      added_tokens: [...this.specialById].map(([id, content]) => ({
        id,
        content,
        single_word: false,
        lstrip: false,
        rstrip: false,
        normalized: false,
        special: true,
      })),
      normalizer: null,
      pre_tokenizer: byteLevel,
      post_processor: byteLevel,
      decoder: byteLevel,
      model: {
        type: 'BPE',
        dropout: null,
        unk_token: null,
        continuing_subword_prefix: null,
        end_of_word_suffix: null,
        fuse_unk: false,
        byte_fallback: false,
        ignore_merges: false,
        vocab,
        merges: [],
      },
    };
  }

  /** The HF `tokenizer_config.json`, with the ChatML chat template. */
  toTokenizerConfig(): HfTokenizerConfig {
    const decoder: Record<string, unknown> = {};
    for (const [id, content] of this.specialById) {
      decoder[String(id)] = {
        content,
        lstrip: false,
        normalized: false,
        rstrip: false,
        single_word: false,
        special: true,
      };
    }
    const text = (id: number | undefined) => (id === undefined ? null : this.specialById.get(id)!);
    return {
      add_bos_token: false,
      add_prefix_space: false,
      added_tokens_decoder: decoder,
      additional_special_tokens: [...this.specialById.values()],
      bos_token: null,
      eos_token: text(this.eosTokenId),
      pad_token: text(this.padTokenId),
      unk_token: null,
      chat_template: this.chatTemplate,
      clean_up_tokenization_spaces: false,
      errors: 'replace',
      model_max_length: 32768,
      split_special_tokens: false,
      tokenizer_class: 'PreTrainedTokenizerFast',
    };
  }
}
