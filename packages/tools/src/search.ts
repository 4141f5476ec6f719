/** One retrieved passage or web result. */
export interface SearchHit {
  id?: string;
  title: string;
  text: string;
  url?: string;
  /** Retriever score (BM25, cosine, server score); higher is better. */
  score?: number;
}

export interface SearchOptions {
  /** Number of hits wanted (default: the provider's own, usually 5). */
  topK?: number;
  signal?: AbortSignal;
  timeoutMs?: number;
}

/** Anything that answers a text query with ranked hits: a retrieval server, a web API, BM25. */
export interface SearchProvider {
  readonly name: string;
  search(query: string, options?: SearchOptions): Promise<SearchHit[]>;
}

export interface WikiPage {
  title: string;
  /** Plain-text content of the page (or of a local corpus's passages with that title). */
  text: string;
  url?: string;
}

/** A Wikipedia-like source: search for titles, then read pages. MediaWiki and local corpora implement it. */
export interface WikipediaBackend extends SearchProvider {
  getPages(titles: string[], options?: Omit<SearchOptions, 'topK'>): Promise<WikiPage[]>;
}
