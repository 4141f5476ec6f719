// llama2.c's tokenizer: run.c's encode/decode rules on a hand-built vocabulary (expected ids
// derived by hand from the rules), and on the real tok512.bin (ids from run.c's own output files).
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { sharedPath, skipWithoutShared } from '../../../test-utils/shared.js';
import { Llama2cTokenizer } from '../src/index.js';

/** A tok*.bin image: ids 0–2 control, 3–258 bytes, then the given pieces and scores. */
function tokFile(extra: [string, number][]): Uint8Array {
  const pieces: [Uint8Array, number][] = [
    [new TextEncoder().encode('<unk>'), 0],
    [new TextEncoder().encode('\n<s>\n'), 0],
    [new TextEncoder().encode('\n</s>\n'), 0],
  ];
  for (let b = 0; b < 256; b++) {
    pieces.push([
      new TextEncoder().encode(`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`),
      0,
    ]);
  }
  for (const [p, s] of extra) pieces.push([new TextEncoder().encode(p), s]);
  const size = 4 + pieces.reduce((a, [p]) => a + 8 + p.length, 0);
  const out = new Uint8Array(size);
  const v = new DataView(out.buffer);
  v.setInt32(0, 8, true);
  let o = 4;
  for (const [p, s] of pieces) {
    v.setFloat32(o, s, true);
    v.setInt32(o + 4, p.length, true);
    out.set(p, o + 8);
    o += 8 + p.length;
  }
  return out;
}

describe('Llama2cTokenizer on a hand-built vocabulary', () => {
  // 259 ' ', 260 'a', 261 'b', 262 'c', 263 'ab' (-1), 264 'bc' (-0.5), 265 ' a' (-2), 266 'abc' (-3)
  const tok = Llama2cTokenizer.parse(
    tokFile([
      [' ', 0],
      ['a', 0],
      ['b', 0],
      ['c', 0],
      ['ab', -1],
      ['bc', -0.5],
      [' a', -2],
      ['abc', -3],
    ]),
  );

  it('merges the best-scoring pair first, then again until nothing merges', () => {
    // [' ', a, b, c]: candidates ' a' -2, 'ab' -1, 'bc' -0.5 → bc; then ' a' -2 beats 'abc' -3
    // → [' a', 'bc']; ' abc' is not a token, so encoding stops there.
    expect(Array.from(tok.encode('abc'))).toEqual([265, 264]);
    expect(Array.from(tok.encode('abc', { addBos: true }))).toEqual([1, 265, 264]);
  });

  it('empty text: no dummy prefix, BOS only when asked', () => {
    expect(Array.from(tok.encode(''))).toEqual([]);
    expect(Array.from(tok.encode('', { addBos: true }))).toEqual([1]);
  });

  it('falls back to byte tokens (byte + 3) for a code point not in the vocabulary', () => {
    // 'é' = C3 A9 → 0xC3 + 3 = 198, 0xA9 + 3 = 172; after the dummy prefix ' ' (259).
    expect(Array.from(tok.encode('é'))).toEqual([259, 198, 172]);
    // '😀' = F0 9F 98 80 (four bytes, one code point).
    expect(Array.from(tok.encode('a😀'))).toEqual([265, 243, 162, 155, 131]);
  });

  it('decodes like run.c: leading space dropped after BOS, <0xNN> as raw bytes, BOS/EOS silent', () => {
    expect(tok.decode([1, 265, 264, 2])).toBe('abc');
    expect(tok.decode([265, 264])).toBe(' abc');
    expect(tok.decode([1, 259, 198, 172])).toBe('é');
    expect(Array.from(tok.pieceBytes(1, 265))).toEqual([0x61]);
    expect(Array.from(tok.pieceBytes(260, 265))).toEqual([0x20, 0x61]);
    for (const s of ['abc cab', 'é😀 x', 'c\n\tb'])
      expect(tok.decode(tok.encode(s, { addBos: true }))).toBe(s);
  });

  it('rejects a truncated file', () => {
    const bytes = tokFile([]);
    expect(() => Llama2cTokenizer.parse(bytes.subarray(0, bytes.length - 3))).toThrow(
      /invalid length|ends inside/,
    );
  });
});

describe.skipIf(skipWithoutShared('tok512.bin'))('Llama2cTokenizer on tok512.bin', () => {
  it('encodes the prompts of run.c reference outputs to the ids run.c used', async () => {
    const dir = sharedPath('models', 'stories260K');
    const tok = await Llama2cTokenizer.load(`${dir}/tok512.bin`, 512);
    expect(tok.vocabSize).toBe(512);
    const logits = JSON.parse(readFileSync(`${dir}/logits-once-upon-a-time.json`, 'utf8'));
    expect(Array.from(tok.encode(logits.prompt, { addBos: true }))).toEqual(logits.tokens);
    for (const e of JSON.parse(readFileSync(`${dir}/greedy.json`, 'utf8')) as {
      prompt: string;
      ids: number[];
    }[]) {
      const p = tok.encode(e.prompt, { addBos: true });
      expect(e.ids.slice(0, p.length)).toEqual(Array.from(p));
    }
    // '中' is not a piece of this 512-token vocabulary: dummy prefix ' ' then bytes E4 B8 AD + 3.
    const space = Array.from({ length: 512 }, (_, id) => id).find((id) => {
      const p = tok.piece(id);
      return p.length === 1 && p[0] === 0x20;
    })!;
    expect(space).toBeDefined();
    expect(Array.from(tok.encode('中'))).toEqual([space, 0xe4 + 3, 0xb8 + 3, 0xad + 3]);
    expect(tok.decode(tok.encode('Lily liked 中文 ☀', { addBos: true }))).toBe('Lily liked 中文 ☀');
  });
});
