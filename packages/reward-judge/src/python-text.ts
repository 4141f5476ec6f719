// Python's str methods, which the reference scripts (SQuAD's evaluate script, the seeds' rewards)
// are written with, differ from JavaScript's in which characters count as whitespace and as word
// characters. Matching them exactly keeps our scores identical to the references' on any text.

/** Characters for which Python's `str.isspace()` is true (Unicode 15). */
const PY_WS =
  '\\t\\n\\v\\f\\r\\x1c-\\x1f \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000';

const wsRun = new RegExp(`[${PY_WS}]+`, 'u');
const leadingWs = new RegExp(`^[${PY_WS}]+`, 'u');
const trailingWs = new RegExp(`[${PY_WS}]+$`, 'u');

/** Python's `s.split()` (no argument): split on whitespace runs, no empty strings. */
export function pySplit(s: string): string[] {
  return s.split(wsRun).filter((t) => t !== '');
}

/** Python's `s.strip()` (no argument). */
export function pyStrip(s: string): string {
  return s.replace(leadingWs, '').replace(trailingWs, '');
}

/** Python's `len(s)`: code points, not UTF-16 units. */
export function pyLen(s: string): number {
  let n = 0;
  for (const _ of s) n++;
  return n;
}

/** Characters Python's `re` treats as `\w` in str patterns: letters, numbers, underscore. */
export const PY_WORD_CLASS = '\\p{L}\\p{N}_';

/** Python's `string.punctuation`: the 32 ASCII punctuation characters, nothing else. */
export const PY_PUNCTUATION = new Set('!"#$%&\'()*+,-./:;<=>?@[\\]^_`{|}~');
