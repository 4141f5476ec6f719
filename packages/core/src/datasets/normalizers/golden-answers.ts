/**
 * Cleans a `golden_answers` value of any shape into answer strings, as the seed's NQ preparation
 * does: lists, tuples and nested arrays (what numpy hands back from Parquet) are flattened; null,
 * undefined and NaN are dropped; numbers and bigints are written in decimal; strings are trimmed
 * and dropped when empty. Objects carry no answer text and are rejected (returned as undefined).
 */
export function cleanGoldenAnswers(value: unknown): string[] | undefined {
  const out: string[] = [];
  const visit = (v: unknown): boolean => {
    if (v === null || v === undefined) return true;
    if (typeof v === 'string') {
      const s = v.trim();
      if (s !== '') out.push(s);
      return true;
    }
    if (typeof v === 'number') {
      if (!Number.isNaN(v)) out.push(String(v));
      return true;
    }
    if (typeof v === 'bigint' || typeof v === 'boolean') {
      out.push(String(v));
      return true;
    }
    if (Array.isArray(v)) return v.every(visit);
    if (ArrayBuffer.isView(v) && !(v instanceof DataView)) {
      return Array.from(v as unknown as ArrayLike<number | bigint>).every(visit);
    }
    return false;
  };
  return visit(value) ? out : undefined;
}

/** The seed's single-string form of several answers. */
export const GOLDEN_ANSWER_SEPARATOR = '; ';

export function joinGoldenAnswers(answers: readonly string[]): string {
  return answers.join(GOLDEN_ANSWER_SEPARATOR);
}

/** Trims a question and ends it with '?' when it has no question mark (the seed's NQ rule). */
export function normalizeQuestionMark(question: string): string {
  const q = question.trim();
  return q !== '' && !q.endsWith('?') ? `${q}?` : q;
}
