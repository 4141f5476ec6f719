export interface ChunkOptions {
  /** Largest chunk in characters; default 1000. */
  chunkSize?: number;
  /** Characters shared by consecutive chunks; default 200. */
  overlap?: number;
}

/**
 * Splits text into chunks of at most `chunkSize` characters, consecutive chunks sharing about
 * `overlap` characters. A chunk ends at the last whitespace in its final fifth when there is one,
 * so words are rarely cut.
 */
export function chunkText(text: string, options: ChunkOptions = {}): string[] {
  const size = options.chunkSize ?? 1000;
  const overlap = options.overlap ?? 200;
  if (!(size > 0) || overlap < 0 || overlap >= size) {
    throw new RangeError(`chunkSize must be > overlap >= 0 (got ${size}, ${overlap})`);
  }
  const chunks: string[] = [];
  let start = 0;
  while (start < text.length) {
    let end = Math.min(start + size, text.length);
    if (end < text.length) {
      const window = text.slice(start + Math.floor(size * 0.8), end);
      const ws = window.search(/\s\S*$/);
      if (ws >= 0) end = start + Math.floor(size * 0.8) + ws + 1;
    }
    const chunk = text.slice(start, end).trim();
    if (chunk) chunks.push(chunk);
    if (end >= text.length) break;
    let next = Math.max(end - overlap, start + 1);
    // Start the next chunk at a word boundary when one is near (within the overlap).
    const boundary = text.slice(next, end).search(/(?<=\s)\S/);
    if (boundary > 0) next += boundary;
    start = next;
  }
  return chunks;
}
