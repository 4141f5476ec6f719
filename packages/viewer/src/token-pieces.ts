// Token ids as the text each one stands for, from a Hugging Face tokenizer.json (the run's
// checkpoints carry a copy): enough to show a rollout token by token without loading the
// tokenizer library itself (the viewer depends on core only). Byte-level BPE vocabularies (GPT-2,
// Qwen: "Ġ" for a space) are mapped back to their bytes; SentencePiece's "▁" is a space. An id the
// vocabulary lacks shows as ⟨id⟩. A token whose bytes are no complete UTF-8 text (a character
// split over two tokens, or stray bytes from an undertrained model) and a control character show
// as \xNN, byte by byte: a "�" would hide which bytes they were.

/** GPT-2's bytes_to_unicode, inverted: the printable stand-in character → the byte. */
function byteLevelDecoder(): Map<string, number> {
  const printable: number[] = [];
  for (let b = 33; b <= 126; b++) printable.push(b);
  for (let b = 161; b <= 172; b++) printable.push(b);
  for (let b = 174; b <= 255; b++) printable.push(b);
  const map = new Map<string, number>();
  let n = 0;
  for (let b = 0; b < 256; b++) {
    if (printable.includes(b)) map.set(String.fromCharCode(b), b);
    else map.set(String.fromCharCode(256 + n++), b);
  }
  return map;
}

export type TokenPieces = (id: number) => string;

const hex = (byte: number) => `\\x${byte.toString(16).padStart(2, '0')}`;

/** Control characters but newline, tab and carriage return as \xNN. */
const visible = (text: string) =>
  // biome-ignore lint/suspicious/noControlCharactersInRegex: matching them is the point
  text.replace(/[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]/g, (c) => hex(c.charCodeAt(0)));

/** Id → text for the vocabulary in `tokenizerJson`; ⟨id⟩ for every id when there is none. */
export function tokenPieces(tokenizerJson: string | undefined): TokenPieces {
  const fallback = (id: number) => `⟨${id}⟩`;
  if (!tokenizerJson) return fallback;
  let parsed: {
    model?: { vocab?: Record<string, number> | [string, number][] };
    added_tokens?: { id: number; content: string }[];
  };
  try {
    parsed = JSON.parse(tokenizerJson);
  } catch {
    return fallback;
  }
  const vocab = parsed.model?.vocab;
  const byId = new Map<number, string>();
  // BPE/WordPiece store {piece: id}; Unigram stores [piece, score] pairs in id order.
  if (Array.isArray(vocab)) for (const [id, [piece]] of vocab.entries()) byId.set(id, piece);
  else for (const [piece, id] of Object.entries(vocab ?? {})) byId.set(id, piece);
  const added = new Set<number>();
  for (const t of parsed.added_tokens ?? []) {
    byId.set(t.id, t.content);
    added.add(t.id);
  }
  const pieces = [...byId.values()];
  const byteLevel = pieces.some((p) => p.includes('Ġ') || p.includes('Ċ'));
  const bytes = byteLevel ? byteLevelDecoder() : undefined;
  const utf8 = new TextDecoder('utf-8', { fatal: true });
  const bytesText = (out: Uint8Array) => {
    try {
      return visible(utf8.decode(out));
    } catch {
      return Array.from(out, (b) => (b >= 0x20 && b < 0x7f ? String.fromCharCode(b) : hex(b))).join(
        '',
      );
    }
  };
  return (id) => {
    const piece = byId.get(id);
    if (piece === undefined) return fallback(id);
    if (added.has(id)) return piece;
    if (bytes) {
      return bytesText(Uint8Array.from(Array.from(piece, (ch) => bytes.get(ch) ?? 63)));
    }
    return visible(piece.replaceAll('▁', ' '));
  };
}
