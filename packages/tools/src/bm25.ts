import { type TokenizeOptions, tokenize } from './text-tokenizer.js';

export interface Bm25Options {
  /** Term-frequency saturation; default 0.9 (Pyserini's default, as is b). */
  k1?: number;
  /** Length normalisation; default 0.4. */
  b?: number;
  tokenizer?: TokenizeOptions;
}

export interface Bm25Match {
  /** Index of the document in the order it was added. */
  doc: number;
  score: number;
}

interface Postings {
  docs: number[];
  tfs: number[];
}

/**
 * An in-memory BM25 index (Robertson/Sparck Jones weighting as in Lucene):
 *
 *   score(q, d) = Σ_{t ∈ q} idf(t) · tf·(k1 + 1) / (tf + k1·(1 − b + b·|d|/avgdl))
 *   idf(t)      = ln(1 + (N − df + 0.5) / (df + 0.5))
 *
 * Each distinct query term counts once. The (k1 + 1) factor (dropped by Lucene ≥ 8) only scales
 * scores and leaves rankings unchanged.
 */
export class Bm25Index {
  readonly k1: number;
  readonly b: number;
  readonly tokenizerOptions: TokenizeOptions;
  readonly #postings = new Map<string, Postings>();
  readonly #lengths: number[] = [];
  #totalLength = 0;

  constructor(options: Bm25Options = {}) {
    this.k1 = options.k1 ?? 0.9;
    this.b = options.b ?? 0.4;
    this.tokenizerOptions = options.tokenizer ?? {};
  }

  get size(): number {
    return this.#lengths.length;
  }

  get averageLength(): number {
    return this.size === 0 ? 0 : this.#totalLength / this.size;
  }

  /** Adds a document; returns its index. */
  add(text: string): number {
    return this.addTokens(tokenize(text, this.tokenizerOptions));
  }

  addTokens(tokens: readonly string[]): number {
    const doc = this.#lengths.length;
    const counts = new Map<string, number>();
    for (const t of tokens) counts.set(t, (counts.get(t) ?? 0) + 1);
    for (const [term, tf] of counts) {
      let p = this.#postings.get(term);
      if (!p) {
        p = { docs: [], tfs: [] };
        this.#postings.set(term, p);
      }
      p.docs.push(doc);
      p.tfs.push(tf);
    }
    this.#lengths.push(tokens.length);
    this.#totalLength += tokens.length;
    return doc;
  }

  documentFrequency(term: string): number {
    return this.#postings.get(term)?.docs.length ?? 0;
  }

  idf(term: string): number {
    const df = this.documentFrequency(term);
    return Math.log(1 + (this.size - df + 0.5) / (df + 0.5));
  }

  /** Scores of every document for `query` (zeros where no term matches). */
  scoreAll(query: string): Float64Array {
    const scores = new Float64Array(this.size);
    const avgdl = this.averageLength || 1;
    const { k1, b } = this;
    for (const term of new Set(tokenize(query, this.tokenizerOptions))) {
      const p = this.#postings.get(term);
      if (!p) continue;
      const idf = this.idf(term);
      for (let i = 0; i < p.docs.length; i++) {
        const doc = p.docs[i]!;
        const tf = p.tfs[i]!;
        const norm = k1 * (1 - b + (b * this.#lengths[doc]!) / avgdl);
        scores[doc]! += (idf * tf * (k1 + 1)) / (tf + norm);
      }
    }
    return scores;
  }

  /** The `k` best-scoring documents with a positive score, best first (ties: lower index first). */
  search(query: string, k: number): Bm25Match[] {
    const scores = this.scoreAll(query);
    const matches: Bm25Match[] = [];
    for (let doc = 0; doc < scores.length; doc++) {
      if (scores[doc]! > 0) matches.push({ doc, score: scores[doc]! });
    }
    matches.sort((x, y) => y.score - x.score || x.doc - y.doc);
    return matches.slice(0, k);
  }
}
