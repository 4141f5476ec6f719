import { PY_PUNCTUATION, PY_WORD_CLASS, pySplit } from './python-text.js';

// The official SQuAD v1.1 evaluate script's `normalize_answer`: lower-case, drop ASCII
// punctuation, replace the whole words a/an/the by a space, then collapse whitespace — applied in
// that order. Word boundaries and whitespace follow Python's Unicode rules (see python-text.ts),
// so "café" keeps its "é" and "éthe" keeps its "the", exactly as the script does.

const ARTICLES = new RegExp(`(?<![${PY_WORD_CLASS}])(?:a|an|the)(?![${PY_WORD_CLASS}])`, 'gu');

export function squadNormalize(text: string): string {
  const lower = text.toLowerCase();
  let noPunct = '';
  for (const ch of lower) if (!PY_PUNCTUATION.has(ch)) noPunct += ch;
  return pySplit(noPunct.replace(ARTICLES, ' ')).join(' ');
}

/** The normalised answer's tokens (the script's `normalize_answer(s).split()`). */
export function squadTokens(text: string): string[] {
  return pySplit(squadNormalize(text));
}
