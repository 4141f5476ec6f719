import { readFile } from 'node:fs/promises';
import { DataFormatError } from '@flowgrpo/core';
import { Bm25Index, type Bm25Options } from './bm25.js';
import { type EmbedFunction, topKByCosine } from './embeddings.js';
import type { SearchHit, SearchOptions, WikiPage, WikipediaBackend } from './search.js';

export interface Passage {
  id: string;
  title: string;
  text: string;
}

export interface LocalCorpusOptions extends Bm25Options {
  name?: string;
  /** Re-rank the BM25 candidates by cosine similarity of these embeddings. */
  embed?: EmbedFunction;
  /** BM25 candidates passed to the re-ranker; default 50. */
  rerankDepth?: number;
  /** Hits returned when the call gives no topK; default 5. */
  defaultTopK?: number;
}

/**
 * An offline Wikipedia: BM25 over passages (title + text indexed together), optionally re-ranked
 * with embeddings. Implements the same interface as the MediaWiki client, so the Wikipedia tool
 * and the search tool run unchanged without network.
 */
export class LocalCorpus implements WikipediaBackend {
  readonly name: string;
  readonly passages: readonly Passage[];
  readonly index: Bm25Index;
  readonly #embed: EmbedFunction | undefined;
  readonly #rerankDepth: number;
  readonly #defaultTopK: number;
  readonly #byTitle = new Map<string, number[]>();

  constructor(passages: readonly Passage[], options: LocalCorpusOptions = {}) {
    this.name = options.name ?? 'local-corpus';
    this.passages = passages;
    this.index = new Bm25Index(options);
    this.#embed = options.embed;
    this.#rerankDepth = options.rerankDepth ?? 50;
    this.#defaultTopK = options.defaultTopK ?? 5;
    passages.forEach((p, i) => {
      this.index.add(`${p.title}\n${p.text}`);
      const key = p.title.toLowerCase();
      const list = this.#byTitle.get(key);
      if (list) list.push(i);
      else this.#byTitle.set(key, [i]);
    });
  }

  async search(query: string, options: SearchOptions = {}): Promise<SearchHit[]> {
    const k = options.topK ?? this.#defaultTopK;
    const hit = (doc: number, score: number): SearchHit => {
      const p = this.passages[doc]!;
      return { id: p.id, title: p.title, text: p.text, score };
    };
    if (!this.#embed) return this.index.search(query, k).map((m) => hit(m.doc, m.score));
    const candidates = this.index.search(query, Math.max(k, this.#rerankDepth));
    if (candidates.length === 0) return [];
    const texts = candidates.map((m) => {
      const p = this.passages[m.doc]!;
      return `${p.title}\n${p.text}`;
    });
    const [q, ...vectors] = await this.#embed([query, ...texts], {
      ...(options.signal && { signal: options.signal }),
    });
    return topKByCosine(q!, vectors, k).map((r) => hit(candidates[r.index]!.doc, r.score));
  }

  /** Pages by title (case-insensitive); passages sharing a title are joined in corpus order. */
  async getPages(titles: string[]): Promise<WikiPage[]> {
    const pages: WikiPage[] = [];
    for (const title of titles) {
      const docs = this.#byTitle.get(title.toLowerCase());
      if (!docs) continue;
      pages.push({
        title: this.passages[docs[0]!]!.title,
        text: docs.map((d) => this.passages[d]!.text).join('\n'),
      });
    }
    return pages;
  }
}

function parseJsonl<T>(text: string, file: string, each: (row: T, line: number) => void): void {
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!.trim();
    if (!line) continue;
    let row: T;
    try {
      row = JSON.parse(line) as T;
    } catch (error) {
      throw new DataFormatError('invalid JSON', { file, line: i + 1 }, { cause: error });
    }
    each(row, i + 1);
  }
}

/**
 * HotpotQA (distractor) rows → the union of their `context` paragraphs, one passage per title
 * (titles are unique Wikipedia pages there); sentences are joined as written.
 */
export async function loadHotpotQaPassages(file: string): Promise<Passage[]> {
  const text = await readFile(file, 'utf8');
  const seen = new Map<string, Passage>();
  parseJsonl<{ context?: unknown }>(text, file, (row, line) => {
    if (!Array.isArray(row.context)) {
      throw new DataFormatError('missing context array', { file, line });
    }
    for (const entry of row.context as unknown[]) {
      if (!Array.isArray(entry) || typeof entry[0] !== 'string' || !Array.isArray(entry[1])) {
        throw new DataFormatError('context entries must be [title, sentences[]]', { file, line });
      }
      const title = entry[0];
      if (!seen.has(title)) {
        seen.set(title, { id: title, title, text: (entry[1] as string[]).join('').trim() });
      }
    }
  });
  return [...seen.values()];
}

/** DPR / FlashRAG corpus rows `{id, contents: "\"Title\"\ntext"}` → passages. */
export async function loadFlashRagPassages(file: string): Promise<Passage[]> {
  const text = await readFile(file, 'utf8');
  const passages: Passage[] = [];
  parseJsonl<{ id?: unknown; contents?: unknown; title?: unknown; text?: unknown }>(
    text,
    file,
    (row, line) => {
      const id = String(row.id ?? passages.length);
      if (typeof row.contents === 'string') {
        const nl = row.contents.indexOf('\n');
        const head = nl < 0 ? '' : row.contents.slice(0, nl);
        const title = head.replace(/^"(.*)"$/s, '$1');
        passages.push({ id, title, text: nl < 0 ? row.contents : row.contents.slice(nl + 1) });
      } else if (typeof row.text === 'string') {
        passages.push({
          id,
          title: typeof row.title === 'string' ? row.title : '',
          text: row.text,
        });
      } else {
        throw new DataFormatError('expected a "contents" (or "title"/"text") field', {
          file,
          line,
        });
      }
    },
  );
  return passages;
}
