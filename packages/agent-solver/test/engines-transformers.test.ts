import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError } from '@flowgrpo/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { LLMAbortError, TransformersEngine } from '../src/index.js';

// TransformersEngine against a real ONNX Runtime session through transformers.js, on a model
// folder this test writes itself (no download): a WordPiece tokenizer over a 12-word vocabulary
// and a "bigram" causal LM — logits = onehot(token) · E · W with E = I, so the next-token scores
// are the row of W for the current token. W puts 10 on one successor per token, so greedy
// decoding follows a chain that can be written down by hand:
//   assistant → the → answer → is → four → <eos>.

const VOCAB = [
  '[UNK]',
  '<eos>',
  'user',
  'assistant',
  'system',
  'what',
  'is',
  'two',
  'plus',
  'the',
  'answer',
  'four',
];
// One token whose text is a whole JSON object, for the structured-output path.
const JSON_TOKEN = '{"answer":"four"}';
VOCAB.push(JSON_TOKEN);
const id = (w: string) => VOCAB.indexOf(w);
const NEXT: Record<string, string> = {
  assistant: 'the',
  the: 'answer',
  answer: 'is',
  is: 'four',
  four: '<eos>',
};

// --- a minimal ONNX protobuf writer (field numbers from onnx.proto3) ---
function varint(n: number | bigint): number[] {
  let v = BigInt(n);
  const out: number[] = [];
  do {
    let byte = Number(v & 0x7fn);
    v >>= 7n;
    if (v > 0n) byte |= 0x80;
    out.push(byte);
  } while (v > 0n);
  return out;
}
const key = (field: number, wire: number) => varint((field << 3) | wire);
const vField = (field: number, n: number | bigint) => [...key(field, 0), ...varint(n)];
const bField = (field: number, bytes: number[] | Uint8Array) => [
  ...key(field, 2),
  ...varint(bytes.length),
  ...bytes,
];
const sField = (field: number, s: string) => bField(field, Array.from(new TextEncoder().encode(s)));

function tensorValueInfo(name: string, elemType: number, dims: Array<string | number>): number[] {
  const shape = dims.flatMap((d) => bField(1, typeof d === 'number' ? vField(1, d) : sField(2, d)));
  const tensorType = [...vField(1, elemType), ...bField(2, shape)];
  return [...sField(1, name), ...bField(2, bField(1, tensorType))];
}

function floatInitializer(name: string, dims: number[], data: Float32Array): number[] {
  return [
    ...dims.flatMap((d) => vField(1, d)),
    ...vField(2, 1),
    ...sField(8, name),
    ...bField(9, new Uint8Array(data.buffer)),
  ];
}

function node(op: string, inputs: string[], outputs: string[], attrs: number[][] = []): number[] {
  return [
    ...inputs.flatMap((i) => sField(1, i)),
    ...outputs.flatMap((o) => sField(2, o)),
    ...sField(3, `${op}_0`),
    ...sField(4, op),
    ...attrs.flatMap((a) => bField(5, a)),
  ];
}

function bigramModel(next: Record<string, string>): Uint8Array {
  const V = VOCAB.length;
  const E = new Float32Array(V * V);
  for (let i = 0; i < V; i++) E[i * V + i] = 1;
  const W = new Float32Array(V * V);
  for (const [from, to] of Object.entries(next)) W[id(from) * V + id(to)] = 10;
  const axis0 = [...sField(1, 'axis'), ...vField(3, 0), ...vField(20, 2)];
  const graph = [
    ...bField(1, node('Gather', ['E', 'input_ids'], ['h'], [axis0])),
    ...bField(1, node('MatMul', ['h', 'W'], ['logits'])),
    ...sField(2, 'bigram'),
    ...bField(5, floatInitializer('E', [V, V], E)),
    ...bField(5, floatInitializer('W', [V, V], W)),
    ...bField(11, tensorValueInfo('input_ids', 7, ['batch', 'seq'])),
    ...bField(11, tensorValueInfo('attention_mask', 7, ['batch', 'seq'])),
    ...bField(12, tensorValueInfo('logits', 1, ['batch', 'seq', V])),
  ];
  return Uint8Array.from([
    ...vField(1, 8),
    ...sField(2, 'flowgrpo-test'),
    ...bField(7, graph),
    ...bField(8, [...sField(1, ''), ...vField(2, 17)]),
  ]);
}

let dir: string;
let modelDir: string;
let jsonModelDir: string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'flowgrpo-tjs-'));
  modelDir = join(dir, 'bigram');
  jsonModelDir = join(dir, 'bigram-json');
  writeModelFolder(modelDir, NEXT);
  writeModelFolder(jsonModelDir, { assistant: JSON_TOKEN, [JSON_TOKEN]: '<eos>' });
});

function writeModelFolder(modelDir: string, next: Record<string, string>): void {
  mkdirSync(join(modelDir, 'onnx'), { recursive: true });
  writeFileSync(join(modelDir, 'onnx', 'model.onnx'), bigramModel(next));
  const V = VOCAB.length;
  writeFileSync(
    join(modelDir, 'config.json'),
    JSON.stringify({
      model_type: 'llama',
      architectures: ['LlamaForCausalLM'],
      vocab_size: V,
      hidden_size: V,
      num_hidden_layers: 0,
      num_attention_heads: 1,
      num_key_value_heads: 1,
      bos_token_id: 2,
      eos_token_id: 1,
      pad_token_id: 0,
    }),
  );
  writeFileSync(
    join(modelDir, 'generation_config.json'),
    JSON.stringify({ eos_token_id: 1, pad_token_id: 0 }),
  );
  writeFileSync(
    join(modelDir, 'tokenizer.json'),
    JSON.stringify({
      version: '1.0',
      added_tokens: [
        {
          id: 0,
          content: '[UNK]',
          single_word: false,
          lstrip: false,
          rstrip: false,
          normalized: false,
          special: true,
        },
        {
          id: 1,
          content: '<eos>',
          single_word: false,
          lstrip: false,
          rstrip: false,
          normalized: false,
          special: true,
        },
      ],
      normalizer: null,
      pre_tokenizer: { type: 'Whitespace' },
      post_processor: null,
      decoder: { type: 'WordPiece', prefix: '##', cleanup: true },
      model: {
        type: 'WordPiece',
        unk_token: '[UNK]',
        continuing_subword_prefix: '##',
        max_input_chars_per_word: 100,
        vocab: Object.fromEntries(VOCAB.map((w, i) => [w, i])),
      },
    }),
  );
  writeFileSync(
    join(modelDir, 'tokenizer_config.json'),
    JSON.stringify({
      tokenizer_class: 'PreTrainedTokenizer',
      eos_token: '<eos>',
      unk_token: '[UNK]',
      model_max_length: 512,
      chat_template:
        "{% for m in messages %}{{ m['role'] }} {{ m['content'] }} {% endfor %}{% if add_generation_prompt %}assistant{% endif %}",
    }),
  );
}

afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

describe('TransformersEngine', () => {
  it('refuses a missing folder or an incomplete one with a message naming what is missing', () => {
    expect(() => new TransformersEngine({ modelPath: join(dir, 'nope') })).toThrow(
      /model folder not found: .*nope.*never downloads/,
    );
    const partial = join(dir, 'partial');
    mkdirSync(partial);
    writeFileSync(join(partial, 'config.json'), '{}');
    let caught: unknown;
    try {
      new TransformersEngine({ modelPath: partial });
    } catch (e) {
      caught = e;
    }
    expect(ConfigError.isInstance(caught)).toBe(true);
    expect((caught as Error).message).toContain(
      'lacks tokenizer.json, tokenizer_config.json, onnx/*.onnx',
    );
  });

  it('generates greedily from a local ONNX model, with usage and finish reasons', async () => {
    const engine = new TransformersEngine({ modelPath: modelDir });
    expect(engine.model).toBe('bigram');
    // Prompt "user what is two plus assistant" → 6 tokens; the chain from "assistant" gives
    // "the answer is four" then <eos> (5 new tokens, EOS included).
    const r = await engine.generateText([{ role: 'user', content: 'what is two plus' }], {
      maxTokens: 10,
    });
    expect(r.text).toBe('the answer is four');
    expect(r.finishReason).toBe('stop');
    expect(r.usage).toEqual({ promptTokens: 6, completionTokens: 5, totalTokens: 11 });

    const cut = await engine.generateText([{ role: 'user', content: 'what' }], { maxTokens: 2 });
    expect(cut.text).toBe('the answer');
    expect(cut.finishReason).toBe('length');

    const stopped = await engine.generateText([{ role: 'user', content: 'what' }], {
      maxTokens: 10,
      stop: [' is'],
    });
    expect(stopped.text).toBe('the answer');
    expect(stopped.finishReason).toBe('stop');
    // 11 + (3 prompt + 2 new) + (3 prompt + 5 new).
    expect(engine.usage).toEqual({ promptTokens: 12, completionTokens: 12, totalTokens: 24 });

    const aborted = await engine
      .generateText([{ role: 'user', content: 'what' }], {
        signal: AbortSignal.abort(new Error('stop')),
      })
      .catch((e: unknown) => e);
    expect(LLMAbortError.isInstance(aborted)).toBe(true);
    await engine.dispose();
  });

  it('generateObject puts the schema in the prompt and parses the local reply', async () => {
    const engine = new TransformersEngine({ modelPath: jsonModelDir });
    const r = await engine.generateObject(
      [{ role: 'user', content: 'what is two plus two' }],
      z.object({ answer: z.string() }),
    );
    // The chain from "assistant" emits the single token {"answer":"four"}, then <eos>.
    expect(r.object).toEqual({ answer: 'four' });
    expect(r.usage.completionTokens).toBe(2);
    await engine.dispose();
  });
});
