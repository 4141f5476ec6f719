import { z } from 'zod';
import { HttpRequestError } from './errors.js';
import { type FetchLike, httpJson } from './http.js';

/** Maps texts to vectors (same order). Inject one, or build one with `createOpenAIEmbedder`. */
export type EmbedFunction = (
  texts: string[],
  options?: { signal?: AbortSignal },
) => Promise<number[][]>;

export function cosineSimilarity(a: readonly number[], b: readonly number[]): number {
  if (a.length !== b.length) {
    throw new RangeError(`Vectors differ in length: ${a.length} vs ${b.length}`);
  }
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < a.length; i++) {
    dot += a[i]! * b[i]!;
    na += a[i]! * a[i]!;
    nb += b[i]! * b[i]!;
  }
  return na === 0 || nb === 0 ? 0 : dot / Math.sqrt(na * nb);
}

/** Indices of the `k` vectors most similar to `query`, best first (ties: lower index first). */
export function topKByCosine(
  query: readonly number[],
  vectors: readonly (readonly number[])[],
  k: number,
): { index: number; score: number }[] {
  return vectors
    .map((v, index) => ({ index, score: cosineSimilarity(query, v) }))
    .sort((x, y) => y.score - x.score || x.index - y.index)
    .slice(0, k);
}

export interface OpenAIEmbedderOptions {
  /** Server root including `/v1`, e.g. `https://api.openai.com/v1` or a local vLLM/TEI server. */
  baseUrl: string;
  model: string;
  apiKey?: string;
  fetch?: FetchLike;
  timeoutMs?: number;
  /** Texts per request; default 64. */
  batchSize?: number;
  dimensions?: number;
}

const EmbeddingsResponse = z.object({
  data: z.array(z.object({ embedding: z.array(z.number()), index: z.number().int() })),
});

/** An `EmbedFunction` over an OpenAI-compatible `POST /embeddings` endpoint, with plain fetch. */
export function createOpenAIEmbedder(options: OpenAIEmbedderOptions): EmbedFunction {
  const url = `${options.baseUrl.replace(/\/+$/, '')}/embeddings`;
  const batchSize = options.batchSize ?? 64;
  return async (texts, callOptions = {}) => {
    const out: number[][] = [];
    for (let start = 0; start < texts.length; start += batchSize) {
      const batch = texts.slice(start, start + batchSize);
      const body: Record<string, unknown> = {
        model: options.model,
        input: batch,
        encoding_format: 'float',
      };
      if (options.dimensions !== undefined) body.dimensions = options.dimensions;
      const raw = await httpJson(url, {
        body,
        headers: options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {},
        ...(options.fetch && { fetch: options.fetch }),
        ...(options.timeoutMs !== undefined && { timeoutMs: options.timeoutMs }),
        ...(callOptions.signal && { signal: callOptions.signal }),
        maxBytes: 256 * 1024 * 1024,
      });
      const parsed = EmbeddingsResponse.safeParse(raw);
      if (!parsed.success || parsed.data.data.length !== batch.length) {
        throw new HttpRequestError(
          `Unexpected embeddings response from ${url}: expected ${batch.length} embeddings`,
          { url },
        );
      }
      const sorted = [...parsed.data.data].sort((a, b) => a.index - b.index);
      // Each input exactly once (a repeated index would pair a text with another's vector), and
      // every vector as long as the first: cosine similarity of vectors of different lengths
      // has no meaning, and would fail far from here.
      const dims = out[0]?.length ?? sorted[0]?.embedding.length ?? 0;
      const bad = sorted.findIndex(
        (item, i) => item.index !== i || item.embedding.length !== dims || dims === 0,
      );
      if (bad >= 0) {
        const item = sorted[bad]!;
        throw new HttpRequestError(
          `Unexpected embeddings response from ${url}: ` +
            (item.index !== bad
              ? `the indices are not 0..${batch.length - 1} each once`
              : `embedding ${start + bad} has ${item.embedding.length} dimensions, not ${dims}`),
          { url },
        );
      }
      for (const item of sorted) out.push(item.embedding);
    }
    return out;
  };
}
