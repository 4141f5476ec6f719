import { z } from 'zod';
import { HttpRequestError } from './errors.js';
import { type FetchLike, httpJson } from './http.js';
import type { SearchHit, SearchOptions, SearchProvider } from './search.js';

export interface RetrievalServerOptions {
  /** Full endpoint URL, e.g. `http://localhost:5001/retrieve` (AReaL / Search-R1 servers). */
  url: string;
  fetch?: FetchLike;
  /** Default 120 s, as the AReaL notebook allows its server. */
  timeoutMs?: number;
  /** Hits when the call gives no topK; default 3 (as the AReaL agent asks). */
  defaultTopK?: number;
  /** Ask the server for scores (`return_scores: true`). Default true. */
  returnScores?: boolean;
}

const Doc = z.looseObject({
  id: z.union([z.string(), z.number()]).optional(),
  contents: z.string().optional(),
  text: z.string().optional(),
  title: z.string().optional(),
  wikipedia_title: z.string().optional(),
  url: z.string().optional(),
});
const Item = z.union([z.object({ document: Doc, score: z.number().optional() }), Doc]);
const RetrieveResponse = z.object({ result: z.array(z.array(Item)) });

/** A document as retrieval servers return it. */
export interface RetrievedDoc {
  id?: string | number | undefined;
  contents?: string | undefined;
  text?: string | undefined;
  title?: string | undefined;
  wikipedia_title?: string | undefined;
  url?: string | undefined;
}

/**
 * A corpus document → hit. FlashRAG-style `contents` start with the quoted title on its own line
 * ("\"Title\"\ntext"); AReaL's server adds `wikipedia_title`.
 */
export function retrievedDocToHit(doc: RetrievedDoc, score?: number): SearchHit {
  let text = doc.contents ?? doc.text ?? '';
  let title = doc.wikipedia_title ?? doc.title ?? '';
  const m = /^"([^\n]*)"\n/.exec(text);
  if (m) {
    if (!title) title = m[1]!;
    text = text.slice(m[0].length);
  }
  const hit: SearchHit = { title, text };
  if (doc.id !== undefined) hit.id = String(doc.id);
  if (doc.url) hit.url = doc.url;
  if (score !== undefined) hit.score = score;
  return hit;
}

/**
 * Client of a local retrieval server's `POST /retrieve`: request `{queries, topk, return_scores}`,
 * response `{result: [[doc…] per query]}` where a doc is `{id, contents}` (or
 * `{document: {...}, score}` with scores).
 */
export class RetrievalServerProvider implements SearchProvider {
  readonly name = 'retrieval-server';
  readonly #options: RetrievalServerOptions;

  constructor(options: RetrievalServerOptions) {
    this.#options = options;
  }

  async searchMany(queries: string[], options: SearchOptions = {}): Promise<SearchHit[][]> {
    const url = this.#options.url;
    const raw = await httpJson(url, {
      body: {
        queries,
        topk: options.topK ?? this.#options.defaultTopK ?? 3,
        return_scores: this.#options.returnScores ?? true,
      },
      ...(this.#options.fetch && { fetch: this.#options.fetch }),
      timeoutMs: options.timeoutMs ?? this.#options.timeoutMs ?? 120_000,
      ...(options.signal && { signal: options.signal }),
      maxBytes: 64 * 1024 * 1024,
    });
    const parsed = RetrieveResponse.safeParse(raw);
    if (!parsed.success || parsed.data.result.length !== queries.length) {
      throw new HttpRequestError(
        `Unexpected /retrieve response: expected {result: [...]} with ${queries.length} lists`,
        { url },
      );
    }
    return parsed.data.result.map((items) =>
      items.map((item) =>
        'document' in item && typeof item.document === 'object'
          ? retrievedDocToHit(
              item.document as z.infer<typeof Doc>,
              item.score as number | undefined,
            )
          : retrievedDocToHit(item as RetrievedDoc),
      ),
    );
  }

  async search(query: string, options: SearchOptions = {}): Promise<SearchHit[]> {
    return (await this.searchMany([query], options))[0]!;
  }
}
