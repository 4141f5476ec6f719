// Token ids as text from a real tokenizer.json: the Qwen tokenizer in ../shared (byte-level BPE).
// Expected pieces come from its vocabulary (read in the test): "<", "answer" and ">" are single
// pieces; id 151645 is the added token <|im_end|> (tokenizer_config.json). A piece that stands for
// one byte of a multi-byte character is no UTF-8 text on its own.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { sharedPath, skipWithoutShared } from '../../../test-utils/shared.js';
import { tokenPieces } from '../src/token-pieces.js';

const skip = skipWithoutShared('token pieces of the Qwen tokenizer');

describe.skipIf(skip)('token pieces of the Qwen tokenizer', () => {
  const qwen = sharedPath('models/qwen3-tokenizer/tokenizer.json');
  const pieces = tokenPieces(readFileSync(qwen, 'utf8'));
  const vocab = (
    JSON.parse(readFileSync(qwen, 'utf8')) as { model: { vocab: Record<string, number> } }
  ).model.vocab;
  /** The id of a piece of the vocabulary. */
  const id = (piece: string) => vocab[piece]!;

  it('shows words, spaces and added tokens as text', () => {
    expect(['<', 'answer', '>'].map((p) => pieces(id(p))).join('')).toBe('<answer>');
    expect(pieces(id('Ġthe'))).toBe(' the');
    expect(pieces(151645)).toBe('<|im_end|>');
  });

  it('shows a lone byte of a multi-byte character, and a control character, as \\xNN', () => {
    // "é" is c3 a9 in UTF-8; byte-level BPE's stand-ins for them are "Ã" and "©".
    expect(pieces(id('Ã'))).toBe('\\xc3');
    expect(pieces(id('Ã©'))).toBe('é');
    // Byte 0x07 (BEL) stands as "ć" (256 + 7).
    expect(pieces(id('ć'))).toBe('\\x07');
    expect(pieces(id('Ċ'))).toBe('\n');
  });

  it('shows an id the vocabulary lacks as ⟨id⟩', () => {
    expect(pieces(10_000_000)).toBe('⟨10000000⟩');
    // With no tokenizer at all, every id.
    expect(tokenPieces(undefined)(42)).toBe('⟨42⟩');
  });
});
