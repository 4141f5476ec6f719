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
 * One MATH-500 row `{problem, solution, answer, subject, level, unique_id}` as a SampleRow
 * (source 'math500'). The answer is LaTeX and kept verbatim (trimmed): equivalence is the
 * reward's job, not the loader's. The solution becomes the chain.
 */
export function normalizeMath500Row(
  raw: unknown,
  idx: number,
  options: NormalizeOptions = {},
): SampleRow {
  const { ctx, row } = openRow('math500', raw, idx, options);
  const question = requireText(row, ['problem'], ctx).trim();
  const result = requireText(row, ['answer'], ctx).trim();
  if (result === '') throw rowError(ctx, 'answer is empty');
  const chain = typeof row.solution === 'string' ? row.solution : '';
  const extra: Record<string, unknown> = {};
  copyPresent(row, extra, { subject: 'subject', level: 'level', unique_id: 'unique_id' });
  return makeRow({ idx, question, chain, result, source: options.source ?? 'math500', extra });
}

export function normalizeMath500(
  rows: Iterable<unknown>,
  options: NormalizeOptions = {},
): SampleRow[] {
  return normalizeAll(rows, options, normalizeMath500Row);
}
