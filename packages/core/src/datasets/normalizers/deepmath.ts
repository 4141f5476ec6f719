import type { SampleRow } from '../../sample-row.js';
import {
  copyPresent,
  makeRow,
  type NormalizeOptions,
  normalizeAll,
  openRow,
  requireText,
} from './row-fields.js';

/**
 * One DeepMath-103K row as a SampleRow (source 'mathhard', as in the seed's training mix).
 * The question is `question` (or `Problem`), the answer `final_answer` (or `Answer`); difficulty
 * and topic are kept, the three long r1 solutions are not (training never reads them).
 */
export function normalizeDeepMathRow(
  raw: unknown,
  idx: number,
  options: NormalizeOptions = {},
): SampleRow {
  const { ctx, row } = openRow('deepmath', raw, idx, options);
  const question = requireText(row, ['question', 'Problem'], ctx);
  const result = requireText(row, ['final_answer', 'Answer'], ctx);
  const extra: Record<string, unknown> = {};
  copyPresent(row, extra, { difficulty: 'difficulty', topic: 'topic' });
  return makeRow({ idx, question, result, source: options.source ?? 'mathhard', extra });
}

export function normalizeDeepMath(
  rows: Iterable<unknown>,
  options: NormalizeOptions = {},
): SampleRow[] {
  return normalizeAll(rows, options, normalizeDeepMathRow);
}
