import { z } from 'zod';
import { HttpRequestError } from './errors.js';
import { decodeEntities } from './html-to-text.js';
import { DEFAULT_USER_AGENT, type FetchLike, httpJson } from './http.js';
import type { SearchHit, SearchOptions, WikiPage, WikipediaBackend } from './search.js';

export interface MediaWikiClientOptions {
  /** The wiki's `api.php`; default English Wikipedia. */
  apiUrl?: string;
  fetch?: FetchLike;
  /** Wikimedia asks API clients for a descriptive User-Agent with contact information. */
  userAgent?: string;
  timeoutMs?: number;
  /** Characters kept of each page's extract; default 100,000. */
  maxPageChars?: number;
  /** Hits when the call gives no topK; default 10. */
  defaultTopK?: number;
}

const SearchResponse = z.object({
  query: z
    .object({
      search: z.array(
        z.object({
          title: z.string(),
          pageid: z.number().optional(),
          snippet: z.string().optional(),
        }),
      ),
    })
    .optional(),
  error: z.object({ code: z.string(), info: z.string() }).optional(),
});

const ExtractResponse = z.object({
  query: z
    .object({
      pages: z.array(
        z.object({
          title: z.string(),
          pageid: z.number().optional(),
          missing: z.boolean().optional(),
          invalid: z.boolean().optional(),
          extract: z.string().optional(),
          fullurl: z.string().optional(),
        }),
      ),
    })
    .optional(),
  error: z.object({ code: z.string(), info: z.string() }).optional(),
});

/** Search snippets come as HTML with <span class="searchmatch"> highlights. */
function stripSnippet(html: string): string {
  return decodeEntities(html.replace(/<[^>]*>/g, ''))
    .replace(/\s+/g, ' ')
    .trim();
}

/**
 * A MediaWiki Action API client: full-text search (`list=search`) and plain-text page extracts
 * (`prop=extracts`, TextExtracts) with redirects followed. `formatversion=2` JSON throughout.
 */
export class MediaWikiClient implements WikipediaBackend {
  readonly name = 'mediawiki';
  readonly apiUrl: string;
  readonly #options: MediaWikiClientOptions;

  constructor(options: MediaWikiClientOptions = {}) {
    this.apiUrl = options.apiUrl ?? 'https://en.wikipedia.org/w/api.php';
    this.#options = options;
  }

  pageUrl(title: string): string {
    const origin = new URL(this.apiUrl).origin;
    return `${origin}/wiki/${encodeURIComponent(title.replace(/ /g, '_'))}`;
  }

  async #get<T>(
    params: Record<string, string>,
    schema: z.ZodType<T>,
    signal?: AbortSignal,
  ): Promise<T> {
    const url = new URL(this.apiUrl);
    for (const [k, v] of Object.entries({ ...params, format: 'json', formatversion: '2' })) {
      url.searchParams.set(k, v);
    }
    const raw = await httpJson(url.href, {
      headers: { 'user-agent': this.#options.userAgent ?? DEFAULT_USER_AGENT },
      ...(this.#options.fetch && { fetch: this.#options.fetch }),
      timeoutMs: this.#options.timeoutMs ?? 15_000,
      ...(signal && { signal }),
    });
    const parsed = schema.safeParse(raw);
    if (!parsed.success) {
      throw new HttpRequestError(`Unexpected MediaWiki response: ${parsed.error.message}`, {
        url: url.href,
      });
    }
    const apiError = (parsed.data as { error?: { code: string; info: string } }).error;
    if (apiError) {
      throw new HttpRequestError(`MediaWiki error ${apiError.code}: ${apiError.info}`, {
        url: url.href,
      });
    }
    return parsed.data;
  }

  async search(query: string, options: SearchOptions = {}): Promise<SearchHit[]> {
    const limit = Math.max(1, Math.min(500, options.topK ?? this.#options.defaultTopK ?? 10));
    const data = await this.#get(
      {
        action: 'query',
        list: 'search',
        srsearch: query,
        srlimit: String(limit),
        srprop: 'snippet',
      },
      SearchResponse,
      options.signal,
    );
    return (data.query?.search ?? []).map((r) => {
      const hit: SearchHit = {
        title: r.title,
        text: stripSnippet(r.snippet ?? ''),
        url: this.pageUrl(r.title),
      };
      if (r.pageid !== undefined) hit.id = String(r.pageid);
      return hit;
    });
  }

  /** One request per title: TextExtracts returns a full-page extract for only one page at a time. */
  async getPages(titles: string[], options: { signal?: AbortSignal } = {}): Promise<WikiPage[]> {
    const maxChars = this.#options.maxPageChars ?? 100_000;
    const pages: WikiPage[] = [];
    for (const title of titles) {
      const data = await this.#get(
        {
          action: 'query',
          prop: 'extracts|info',
          explaintext: '1',
          exsectionformat: 'plain',
          inprop: 'url',
          redirects: '1',
          titles: title,
        },
        ExtractResponse,
        options.signal,
      );
      for (const p of data.query?.pages ?? []) {
        if (p.missing || p.invalid || p.extract === undefined) continue;
        pages.push({
          title: p.title,
          text: p.extract.slice(0, maxChars),
          url: p.fullurl ?? this.pageUrl(p.title),
        });
      }
    }
    return pages;
  }
}
