import { porterStem } from './porter-stemmer.js';

// Common English function words; questions' "what/which/who" are here too since BM25's idf
// would give them little weight anyway and they only cost time.
export const ENGLISH_STOPWORDS: ReadonlySet<string> = new Set(
  (
    'a about above after again against all am an and any are as at be because been before being ' +
    'below between both but by can could did do does doing down during each few for from further ' +
    'had has have having he her here hers herself him himself his how i if in into is it its ' +
    'itself just me more most my myself no nor not of off on once only or other our ours ' +
    'ourselves out over own same she should so some such than that the their theirs them ' +
    'themselves then there these they this those through to too under until up very was we were ' +
    'what when where which while who whom why will with would you your yours yourself yourselves'
  ).split(' '),
);

// Corpora repeat words constantly; stemming each distinct word once makes indexing ~several× faster.
const stemCache = new Map<string, string>();
function cachedStem(word: string): string {
  let s = stemCache.get(word);
  if (s === undefined) {
    s = porterStem(word);
    if (stemCache.size > 200_000) stemCache.clear();
    stemCache.set(word, s);
  }
  return s;
}

export interface TokenizeOptions {
  /** Drop English stopwords (default true). */
  stopwords?: boolean;
  /** Apply the Porter stemmer (default true). */
  stem?: boolean;
}

/**
 * Lowercases, folds accents ("Pokémon" → "pokemon"), splits on anything that is not a letter or
 * digit, then optionally drops stopwords and stems.
 */
export function tokenize(text: string, options: TokenizeOptions = {}): string[] {
  const dropStop = options.stopwords ?? true;
  const stem = options.stem ?? true;
  const lower = text.toLowerCase();
  // Only non-ASCII text needs accent folding and Unicode-aware splitting, both slower.
  // biome-ignore lint/suspicious/noControlCharactersInRegex: the ASCII range test is deliberate
  const ascii = /^[\x00-\x7f]*$/.test(lower);
  const parts = ascii
    ? lower.split(/[^a-z0-9]+/)
    : lower
        .normalize('NFKD')
        .replace(/\p{M}+/gu, '')
        .split(/[^\p{L}\p{N}]+/u);
  const out: string[] = [];
  for (const raw of parts) {
    if (!raw) continue;
    if (dropStop && ENGLISH_STOPWORDS.has(raw)) continue;
    out.push(stem ? cachedStem(raw) : raw);
  }
  return out;
}
