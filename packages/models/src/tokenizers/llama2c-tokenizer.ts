import { readFile } from 'node:fs/promises';
import { DataFormatError } from '@flowgrpo/core';
import type { DecodeOptions, EncodeOptions, Tokenizer } from './tokenizer.js';

// llama2.c's tokenizer export (`tok*.bin`): int32 max_token_length, then for each token a
// float32 merge score, an int32 byte length and the token's bytes. Sentencepiece's '▁' is stored
// as a plain space; BOS and EOS are stored as "\n<s>\n" and "\n</s>\n"; byte tokens as the text
// "<0xNN>" at id NN + 3. Encoding and decoding follow run.c's `encode` and `decode`.

const BOS = 1;
const EOS = 2;
const BYTE_OFFSET = 3;
const BYTE_PIECE = /^<0x([0-9A-Fa-f]{2})>$/;

/** Bytes as a string of code units 0–255, so pieces with any bytes can key a Map. */
function latin1(bytes: Uint8Array): string {
  let s = '';
  for (const b of bytes) s += String.fromCharCode(b);
  return s;
}

export class Llama2cTokenizer implements Tokenizer {
  readonly vocabSize: number;
  readonly bosTokenId = BOS;
  readonly eosTokenId = EOS;
  readonly padTokenId = undefined;
  readonly specialTokens: ReadonlyMap<string, number> = new Map([
    ['<unk>', 0],
    ['<s>', BOS],
    ['</s>', EOS],
  ]);
  readonly maxTokenLength: number;
  /** Each token's bytes, as latin1 strings. */
  private readonly pieces: string[];
  private readonly scores: Float32Array;
  private readonly lookup = new Map<string, number>();

  constructor(pieces: Uint8Array[], scores: Float32Array, maxTokenLength: number) {
    this.vocabSize = pieces.length;
    this.maxTokenLength = maxTokenLength;
    this.pieces = pieces.map(latin1);
    this.scores = scores;
    // run.c binary-searches a sorted copy; pieces are unique in every llama2.c export, and the
    // first id wins here should one repeat.
    this.pieces.forEach((p, id) => {
      if (!this.lookup.has(p)) this.lookup.set(p, id);
    });
  }

  static parse(bytes: Uint8Array, vocabSize?: number, file?: string): Llama2cTokenizer {
    const where = file === undefined ? {} : { file };
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    if (bytes.byteLength < 4) throw new DataFormatError('tokenizer file has no header', where);
    const maxTokenLength = view.getInt32(0, true);
    const pieces: Uint8Array[] = [];
    const scores: number[] = [];
    let o = 4;
    while (o < bytes.byteLength && (vocabSize === undefined || pieces.length < vocabSize)) {
      if (o + 8 > bytes.byteLength) {
        throw new DataFormatError(
          `tokenizer file ends inside token ${pieces.length}'s header`,
          where,
        );
      }
      scores.push(view.getFloat32(o, true));
      const len = view.getInt32(o + 4, true);
      o += 8;
      if (len < 0 || o + len > bytes.byteLength) {
        throw new DataFormatError(`token ${pieces.length} has an invalid length ${len}`, where);
      }
      pieces.push(bytes.slice(o, o + len));
      o += len;
    }
    if (vocabSize !== undefined && pieces.length < vocabSize) {
      throw new DataFormatError(
        `tokenizer holds ${pieces.length} tokens, expected ${vocabSize}`,
        where,
      );
    }
    if (pieces.length < BYTE_OFFSET + 256) {
      throw new DataFormatError(
        `a llama2.c tokenizer needs at least 259 tokens, got ${pieces.length}`,
        where,
      );
    }
    return new Llama2cTokenizer(pieces, Float32Array.from(scores), maxTokenLength);
  }

  /** Reads a `tok*.bin`; `vocabSize` (the model's) limits how many tokens are read, as run.c does. */
  static async load(path: string, vocabSize?: number): Promise<Llama2cTokenizer> {
    return Llama2cTokenizer.parse(new Uint8Array(await readFile(path)), vocabSize, path);
  }

  /** The token's bytes as stored in the file (byte tokens are the text "<0xNN>"). */
  piece(id: number): Uint8Array {
    const p = this.pieces[id];
    if (p === undefined) throw new RangeError(`token id ${id} outside [0, ${this.vocabSize})`);
    return Uint8Array.from(p, (ch) => ch.charCodeAt(0));
  }

  score(id: number): number {
    return this.scores[id]!;
  }

  /**
   * run.c's encode: optional BOS; the dummy-prefix token " " when the text is not empty; one
   * token per UTF-8 code point found in the vocabulary, else one byte token per byte (id
   * byte + 3); then repeatedly merge the adjacent pair whose concatenation is the
   * highest-scoring token (the leftmost on ties) until no pair merges.
   */
  encode(text: string, options: EncodeOptions = {}): Int32Array {
    const bytes = new TextEncoder().encode(text);
    const tokens: number[] = [];
    if (options.addBos) tokens.push(BOS);
    if (bytes.length > 0) {
      const prefix = this.lookup.get(' ');
      if (prefix === undefined)
        throw new DataFormatError('the vocabulary has no " " token for the dummy prefix');
      tokens.push(prefix);
    }
    for (let i = 0; i < bytes.length; ) {
      // A code point: the lead byte and its continuation bytes (at most 4 bytes in all).
      let end = i + 1;
      while (end < bytes.length && end - i < 4 && (bytes[end]! & 0xc0) === 0x80) end++;
      const id = this.lookup.get(latin1(bytes.subarray(i, end)));
      if (id !== undefined) tokens.push(id);
      else for (let j = i; j < end; j++) tokens.push(bytes[j]! + BYTE_OFFSET);
      i = end;
    }
    for (;;) {
      let bestScore = -1e10;
      let bestId = -1;
      let bestIdx = -1;
      for (let i = 0; i + 1 < tokens.length; i++) {
        const id = this.lookup.get(this.pieces[tokens[i]!]! + this.pieces[tokens[i + 1]!]!);
        if (id !== undefined && this.scores[id]! > bestScore) {
          bestScore = this.scores[id]!;
          bestId = id;
          bestIdx = i;
        }
      }
      if (bestIdx === -1) break;
      tokens.splice(bestIdx, 2, bestId);
    }
    return Int32Array.from(tokens);
  }

  /**
   * The bytes run.c's decode prints for `id` after `prev`: a leading space is dropped right
   * after BOS, and "<0xNN>" pieces become the raw byte NN.
   */
  pieceBytes(prev: number | undefined, id: number): Uint8Array {
    let p = this.pieces[id];
    if (p === undefined) throw new RangeError(`token id ${id} outside [0, ${this.vocabSize})`);
    if (prev === BOS && p.startsWith(' ')) p = p.slice(1);
    const byte = BYTE_PIECE.exec(p);
    if (byte) return Uint8Array.of(Number.parseInt(byte[1]!, 16));
    return Uint8Array.from(p, (ch) => ch.charCodeAt(0));
  }

  /**
   * Concatenates run.c's decoded pieces and reads them as UTF-8. BOS and EOS are control tokens:
   * sentencepiece renders them as nothing and run.c never prints them, so they are always
   * dropped; `skipSpecialTokens` also drops `<unk>`.
   */
  decode(ids: ArrayLike<number>, options: DecodeOptions = {}): string {
    const parts: Uint8Array[] = [];
    let total = 0;
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i]!;
      if (id === BOS || id === EOS || (options.skipSpecialTokens && id === 0)) continue;
      const b = this.pieceBytes(i > 0 ? ids[i - 1] : undefined, id);
      parts.push(b);
      total += b.length;
    }
    const out = new Uint8Array(total);
    let o = 0;
    for (const p of parts) {
      out.set(p, o);
      o += p.length;
    }
    return new TextDecoder('utf-8').decode(out);
  }
}
