import type { SampleRow } from '../../sample-row.js';
import {
  copyPresent,
  makeRow,
  type NormalizeOptions,
  normalizeAll,
  openRow,
  requireText,
  rowError,
} from './row-fields.js';

/**
 * The canonical decimal form of an integer answer: "025" → "25", "000" → "0", "+7" → "7".
 * AIME answers are integers 0–999 that some copies store zero-padded to three digits; anything
 * that is not a plain integer is returned trimmed and otherwise unchanged.
 */
export function canonicalIntegerAnswer(answer: string): string {
  const s = answer.trim();
  const m = /^([+-]?)0*(\d+)$/.exec(s);
  if (!m) return s;
  const digits = m[2];
  return m[1] === '-' && digits !== '0' ? `-${digits}` : digits;
}

/**
 * One AIME row `{id, problem, solution, answer, url}` as a SampleRow (source 'aime'). `result`
 * is the canonical number ("025" → "25") and the stored answer is kept as extra_info.answer_raw;
 * the worked solution becomes the chain.
 */
export function normalizeAimeRow(
  raw: unknown,
  idx: number,
  options: NormalizeOptions = {},
): SampleRow {
  const { ctx, row } = openRow('aime', raw, idx, options);
  const question = requireText(row, ['problem', 'question', 'Problem'], ctx).trim();
  const answerRaw = requireText(row, ['answer', 'Answer'], ctx);
  const result = canonicalIntegerAnswer(answerRaw);
  if (result === '') throw rowError(ctx, 'answer is empty');
  const chain = typeof row.solution === 'string' ? row.solution : '';
  const extra: Record<string, unknown> = { answer_raw: answerRaw };
  if (row.id !== undefined && row.id !== null) extra.original_id = String(row.id);
  copyPresent(row, extra, { url: 'url', year: 'year' });
  return makeRow({ idx, question, chain, result, source: options.source ?? 'aime', extra });
}

export function normalizeAime(
  rows: Iterable<unknown>,
  options: NormalizeOptions = {},
): SampleRow[] {
  return normalizeAll(rows, options, normalizeAimeRow);
}
