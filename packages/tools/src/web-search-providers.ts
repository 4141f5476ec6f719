import { ConfigError } from '@flowgrpo/core';
import { z } from 'zod';
import { HttpRequestError } from './errors.js';
import { type FetchLike, httpJson } from './http.js';
import type { SearchHit, SearchOptions, SearchProvider } from './search.js';

interface ApiProviderOptions {
  /** The API key; never read from the environment here (pass `process.env.X` yourself). */
  apiKey: string;
  fetch?: FetchLike;
  timeoutMs?: number;
  /** Endpoint override (a proxy, or a local server in tests). */
  endpoint?: string;
  /** Hits when the call gives no topK; default 5. */
  defaultTopK?: number;
}

const SerperResponse = z.object({
  organic: z
    .array(z.object({ title: z.string(), link: z.string(), snippet: z.string().optional() }))
    .optional(),
  answerBox: z
    .object({
      title: z.string().optional(),
      answer: z.string().optional(),
      snippet: z.string().optional(),
    })
    .optional(),
});

/**
 * Google results through Serper (`POST https://google.serper.dev/search`, header `X-API-KEY`,
 * body `{q, num}` → `organic[{title, link, snippet}]`). A direct answer box, when present, comes
 * first.
 */
export class SerperSearchProvider implements SearchProvider {
  readonly name = 'serper';
  readonly #options: ApiProviderOptions;

  constructor(options: ApiProviderOptions) {
    if (!options.apiKey)
      throw new ConfigError('SerperSearchProvider needs an apiKey', { key: 'apiKey' });
    this.#options = options;
  }

  async search(query: string, options: SearchOptions = {}): Promise<SearchHit[]> {
    const num = options.topK ?? this.#options.defaultTopK ?? 5;
    const url = this.#options.endpoint ?? 'https://google.serper.dev/search';
    const raw = await httpJson(url, {
      body: { q: query, num },
      headers: { 'x-api-key': this.#options.apiKey },
      ...(this.#options.fetch && { fetch: this.#options.fetch }),
      timeoutMs: options.timeoutMs ?? this.#options.timeoutMs ?? 20_000,
      ...(options.signal && { signal: options.signal }),
    });
    const parsed = SerperResponse.safeParse(raw);
    if (!parsed.success) throw new HttpRequestError('Unexpected Serper response', { url });
    const hits: SearchHit[] = [];
    const box = parsed.data.answerBox;
    const boxText = box?.answer ?? box?.snippet;
    if (boxText) hits.push({ title: box?.title ?? 'Answer', text: boxText });
    for (const r of parsed.data.organic ?? []) {
      hits.push({ title: r.title, text: r.snippet ?? '', url: r.link });
    }
    return hits.slice(0, num);
  }
}

const GoogleCseResponse = z.object({
  items: z
    .array(z.object({ title: z.string(), link: z.string(), snippet: z.string().optional() }))
    .optional(),
});

/**
 * Google Programmable Search (Custom Search JSON API):
 * `GET https://www.googleapis.com/customsearch/v1?key=…&cx=…&q=…&num=…` (num ≤ 10).
 */
export class GoogleCustomSearchProvider implements SearchProvider {
  readonly name = 'google-cse';
  readonly #options: ApiProviderOptions & { cx: string };

  constructor(options: ApiProviderOptions & { cx: string }) {
    if (!options.apiKey)
      throw new ConfigError('GoogleCustomSearchProvider needs an apiKey', { key: 'apiKey' });
    if (!options.cx)
      throw new ConfigError('GoogleCustomSearchProvider needs a cx (engine id)', { key: 'cx' });
    this.#options = options;
  }

  async search(query: string, options: SearchOptions = {}): Promise<SearchHit[]> {
    const num = Math.min(10, options.topK ?? this.#options.defaultTopK ?? 5);
    const url = new URL(this.#options.endpoint ?? 'https://www.googleapis.com/customsearch/v1');
    url.searchParams.set('key', this.#options.apiKey);
    url.searchParams.set('cx', this.#options.cx);
    url.searchParams.set('q', query);
    url.searchParams.set('num', String(num));
    const raw = await httpJson(url.href, {
      ...(this.#options.fetch && { fetch: this.#options.fetch }),
      timeoutMs: options.timeoutMs ?? this.#options.timeoutMs ?? 20_000,
      ...(options.signal && { signal: options.signal }),
    }).catch((error: unknown) => {
      // The key travels in the query string; rebuild the error without it.
      const key = this.#options.apiKey;
      const message = (error instanceof Error ? error.message : String(error)).replaceAll(
        key,
        '***',
      );
      const status = HttpRequestError.isInstance(error) ? error.status : undefined;
      throw new HttpRequestError(message, {
        url: `${url.origin}${url.pathname}`,
        ...(status !== undefined && { status }),
      });
    });
    const parsed = GoogleCseResponse.safeParse(raw);
    if (!parsed.success)
      throw new HttpRequestError('Unexpected Custom Search response', { url: url.origin });
    return (parsed.data.items ?? []).map((r) => ({
      title: r.title,
      text: r.snippet ?? '',
      url: r.link,
    }));
  }
}
