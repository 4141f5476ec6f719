// HF tokenizers: the real Qwen tokenizer (ids checked against the vocabulary in tokenizer.json
// itself and against the special-token ids Qwen publishes), its chat template (expected text
// written by hand, expected ids assembled from known special ids and piecewise encodings), and
// the byte-level tokenizer of generated models, written as tokenizer.json and loaded back by
// @huggingface/tokenizers.
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { sharedPath, skipWithoutShared } from '../../../test-utils/shared.js';
import { ByteLevelTokenizer, HfTokenizer } from '../src/index.js';
import { bytesToUnicode } from '../src/tokenizers/byte-level-tokenizer.js';

const IM_START = 151644;
const IM_END = 151645;
const ENDOFTEXT = 151643;

describe.skipIf(skipWithoutShared('Qwen tokenizer'))('HfTokenizer on the Qwen tokenizer', () => {
  // Building the 151k-token tokenizer takes seconds: once for the whole suite.
  let loaded: Promise<HfTokenizer> | undefined;
  const load = () => {
    loaded ??= HfTokenizer.fromDir(sharedPath('models', 'qwen3-tokenizer'));
    return loaded;
  };

  it('knows the Qwen special tokens and ids', async () => {
    const tok = await load();
    // Published Qwen2.5/Qwen3 ids: <|endoftext|> 151643, <|im_start|> 151644, <|im_end|> 151645.
    expect(tok.specialTokens.get('<|endoftext|>')).toBe(ENDOFTEXT);
    expect(tok.specialTokens.get('<|im_start|>')).toBe(IM_START);
    expect(tok.specialTokens.get('<|im_end|>')).toBe(IM_END);
    expect(tok.eosTokenId).toBe(IM_END);
    expect(tok.padTokenId).toBe(ENDOFTEXT);
    expect(tok.bosTokenId).toBeUndefined();
    // 151,643 BPE tokens + 26 added tokens (151643..151668).
    expect(tok.vocabSize).toBe(151669);
    expect(Array.from(tok.encode('<|im_start|>user<|im_end|>'))).toEqual([
      IM_START,
      tok.tokenToId('user'),
      IM_END,
    ]);
    expect(tok.decode([IM_START, IM_END], { skipSpecialTokens: true })).toBe('');
    expect(tok.decode([IM_START, IM_END])).toBe('<|im_start|><|im_end|>');
  });

  it('encodes to the pieces of its own vocabulary and round-trips ASCII, Chinese, emoji, code', async () => {
    const tok = await load();
    const vocab = (
      JSON.parse(
        readFileSync(sharedPath('models', 'qwen3-tokenizer', 'tokenizer.json'), 'utf8'),
      ) as {
        model: { vocab: Record<string, number> };
      }
    ).model.vocab;
    // 'Hello' | ',' | ' world' | '!' — the regex split, each a whole vocabulary entry (Ġ = space).
    const pieces = ['Hello', ',', 'Ġworld', '!'];
    expect(Array.from(tok.encode('Hello, world!'))).toEqual(pieces.map((p) => vocab[p]));
    for (const s of [
      'Hello, world!',
      'The quick brown fox jumps over the lazy dog. 1234567890',
      '你好，世界！今天天气很好。',
      'emoji 😀👍🏽 🇫🇷 family 👨‍👩‍👧',
      'def f(x):\n    return x ** 2  # square\n\n\tprint(f(3))\n',
      '  leading and trailing spaces  ',
      'naïve café — “quotes” ½',
    ]) {
      const ids = tok.encode(s);
      expect(ids.length).toBeGreaterThan(0);
      expect(tok.decode(ids)).toBe(s);
    }
  });

  it('renders the ChatML chat template; its ids equal the hand-assembled pieces', async () => {
    const tok = await load();
    const messages = [
      { role: 'system' as const, content: 'You are a helpful assistant.' },
      { role: 'user' as const, content: 'What is 2+2?' },
      { role: 'assistant' as const, content: '4' },
      { role: 'user' as const, content: 'And 3+3?' },
    ];
    const text = tok.applyChatTemplate(messages, { addGenerationPrompt: true });
    const expected =
      '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' +
      '<|im_start|>user\nWhat is 2+2?<|im_end|>\n' +
      '<|im_start|>assistant\n4<|im_end|>\n' +
      '<|im_start|>user\nAnd 3+3?<|im_end|>\n' +
      '<|im_start|>assistant\n';
    expect(text).toBe(expected);
    // Special tokens split the text before BPE, so the ids are the known special ids around the
    // encodings of the plain pieces.
    const ids: number[] = [];
    for (const m of messages) {
      ids.push(IM_START, ...tok.encode(`${m.role}\n${m.content}`), IM_END, ...tok.encode('\n'));
    }
    ids.push(IM_START, ...tok.encode('assistant\n'));
    expect(Array.from(tok.encode(text))).toEqual(ids);
    expect(tok.encode('\n')).toEqual(Int32Array.of(198)); // 'Ċ', the byte-level newline

    // Qwen3's switch: enable_thinking=false closes an empty think block after the prompt.
    const noThink = tok.applyChatTemplate(messages.slice(0, 2), {
      addGenerationPrompt: true,
      variables: { enable_thinking: false },
    });
    expect(noThink.endsWith('<|im_start|>assistant\n<think>\n\n</think>\n\n')).toBe(true);
    const without = tok.applyChatTemplate(messages.slice(0, 2), { addGenerationPrompt: false });
    expect(without.endsWith('What is 2+2?<|im_end|>\n')).toBe(true);
  });
});

describe('ByteLevelTokenizer', () => {
  const tok = new ByteLevelTokenizer();
  const samples = [
    'Hello',
    '<|im_start|>user\nnaïve 中文 😀<|im_end|>\n',
    '\u0000\u0001 control\tbytes\r\n',
    '<|endoftext|><|im_end|><|im_start|>',
    '<|im_start partial <| tokens |>',
  ];

  it('maps each UTF-8 byte to its value and specials to 256, 257, 258 (hand-derived)', () => {
    expect(tok.vocabSize).toBe(259);
    expect(Array.from(tok.encode('Aé'))).toEqual([0x41, 0xc3, 0xa9]);
    expect(Array.from(tok.encode('<|im_start|>hi<|im_end|><|endoftext|>'))).toEqual([
      257, 104, 105, 258, 256,
    ]);
    expect(tok.eosTokenId).toBe(258);
    expect(tok.padTokenId).toBe(256);
    for (const s of samples) expect(tok.decode(tok.encode(s))).toBe(s);
    expect(tok.decode(tok.encode('<|im_start|>x<|im_end|>'), { skipSpecialTokens: true })).toBe(
      'x',
    );
  });

  it('GPT-2 byte table: printable bytes map to themselves, the other 68 to U+0100..U+0143', () => {
    const t = bytesToUnicode();
    expect(new Set(t).size).toBe(256);
    expect(t[0x41]).toBe('A');
    expect(t[0x20]).toBe('Ġ'); // U+0120: space is the 33rd non-printable byte (0x00–0x20)
    expect(t[0x0a]).toBe('Ċ'); // U+010A, as in every GPT-2-style vocabulary
    expect(t[0xad]).toBe(String.fromCharCode(0x143));
  });

  it('written as tokenizer.json it loads in @huggingface/tokenizers and gives the same ids', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'byte-tok-'));
    try {
      await writeFile(join(dir, 'tokenizer.json'), JSON.stringify(tok.toTokenizerJson()));
      await writeFile(join(dir, 'tokenizer_config.json'), JSON.stringify(tok.toTokenizerConfig()));
      const hf = await HfTokenizer.fromDir(dir);
      expect(hf.vocabSize).toBe(259);
      expect(hf.eosTokenId).toBe(258);
      expect(hf.padTokenId).toBe(256);
      expect([...hf.specialTokens]).toEqual([...tok.specialTokens]);
      for (const s of samples) {
        expect(Array.from(hf.encode(s)), s).toEqual(Array.from(tok.encode(s)));
        expect(hf.decode(tok.encode(s))).toBe(s);
      }
      // An empty completion (EOS sampled first) decodes to '' (@huggingface/tokenizers throws).
      expect(hf.decode([])).toBe('');
      expect(tok.decode([])).toBe('');
      const messages = [
        { role: 'system' as const, content: 'Be brief.' },
        { role: 'user' as const, content: 'hi' },
      ];
      const text =
        '<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n';
      expect(hf.applyChatTemplate(messages, { addGenerationPrompt: true })).toBe(text);
      expect(tok.applyChatTemplate(messages, { addGenerationPrompt: true })).toBe(text);
      expect(tok.applyChatTemplate(messages, { addGenerationPrompt: false })).toBe(
        text.slice(0, -'<|im_start|>assistant\n'.length),
      );

      // The same template saved as chat_template.jinja (newer transformers) is found too.
      const { chat_template: template, ...rest } = tok.toTokenizerConfig();
      await writeFile(join(dir, 'tokenizer_config.json'), JSON.stringify(rest));
      await writeFile(join(dir, 'chat_template.jinja'), String(template));
      const fromFile = await HfTokenizer.fromDir(dir);
      expect(fromFile.applyChatTemplate(messages, { addGenerationPrompt: true })).toBe(text);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
