import type { ChatMessage, LLMEngine } from '@flowgrpo/core';
import { Bm25Index } from './bm25.js';
import { type EmbedFunction, topKByCosine } from './embeddings.js';

export interface RankedChunk {
  index: number;
  text: string;
  score: number;
}

/**
 * The `topK` chunks most relevant to `query`: by embedding cosine when `embed` is given,
 * otherwise by BM25 over the chunks (an offline fallback).
 */
export async function rankChunks(
  query: string,
  chunks: readonly string[],
  options: { topK: number; embed?: EmbedFunction | undefined; signal?: AbortSignal | undefined },
): Promise<RankedChunk[]> {
  if (chunks.length === 0) return [];
  if (options.embed) {
    const [q, ...vectors] = await options.embed([query, ...chunks], {
      ...(options.signal && { signal: options.signal }),
    });
    return topKByCosine(q!, vectors, options.topK).map((r) => ({
      index: r.index,
      text: chunks[r.index]!,
      score: r.score,
    }));
  }
  const index = new Bm25Index();
  for (const c of chunks) index.add(c);
  const ranked = index.search(query, options.topK).map((m) => ({
    index: m.doc,
    text: chunks[m.doc]!,
    score: m.score,
  }));
  // With no term in common BM25 ranks nothing; the opening chunks are the best guess left.
  if (ranked.length === 0) {
    return chunks.slice(0, options.topK).map((text, index) => ({ index, text, score: 0 }));
  }
  return ranked;
}

export function referenceBlock(chunks: readonly { text: string }[]): string {
  return chunks.map((c, i) => `[${i + 1}] ${c.text}`).join('\n\n');
}

/** Messages asking an LLM to answer `query` from the numbered reference passages only. */
export function synthesisMessages(
  query: string,
  chunks: readonly { text: string }[],
): ChatMessage[] {
  return [
    {
      role: 'system',
      content:
        'You answer questions using only the reference passages you are given. Find the passages ' +
        'that bear on the question, pull out the facts and figures that answer it, and write one ' +
        'concise paragraph. If the passages do not contain the answer, say so plainly.',
    },
    {
      role: 'user',
      content: `Question:\n${query}\n\nReference passages:\n${referenceBlock(chunks)}\n\nAnswer:`,
    },
  ];
}

export async function synthesizeAnswer(
  engine: LLMEngine,
  query: string,
  chunks: readonly { text: string }[],
  signal?: AbortSignal,
): Promise<string> {
  const result = await engine.generateText(synthesisMessages(query, chunks), {
    temperature: 0,
    ...(signal && { signal }),
  });
  return result.text.trim();
}
