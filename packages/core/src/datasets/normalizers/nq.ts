import type { SampleRow } from '../../sample-row.js';
import { cleanGoldenAnswers, joinGoldenAnswers, normalizeQuestionMark } from './golden-answers.js';
import {
  makeRow,
  type NormalizeOptions,
  normalizeAll,
  openRow,
  pickKey,
  type RowContext,
  requireText,
  rowError,
} from './row-fields.js';

function answersOf(
  row: Record<string, unknown>,
  keys: readonly string[],
  ctx: RowContext,
): string[] {
  const key = pickKey(row, keys);
  if (key === undefined) throw rowError(ctx, `missing field ${keys.join(' or ')}`);
  const answers = cleanGoldenAnswers(row[key]);
  if (answers === undefined)
    throw rowError(ctx, `field ${key} holds a value that is not an answer list`);
  // A question without any answer cannot be rewarded; the seed would have kept '' (or "None").
  if (answers.length === 0) throw rowError(ctx, `field ${key} has no usable answer`);
  return answers;
}

/**
 * One Natural Questions row as a SampleRow (source 'nq'): FlashRAG's `{id, question,
 * golden_answers}` or NQ-open's `{question, answer: [...]}`. The question is trimmed and ends
 * with '?'; the answers (any shape, see cleanGoldenAnswers) are joined with '; '.
 */
export function normalizeNqRow(
  raw: unknown,
  idx: number,
  options: NormalizeOptions = {},
): SampleRow {
  const { ctx, row } = openRow('nq', raw, idx, options);
  const question = normalizeQuestionMark(requireText(row, ['question'], ctx));
  if (question === '') throw rowError(ctx, 'question is empty');
  const answers = answersOf(row, ['golden_answers', 'answer', 'answers'], ctx);
  const result = joinGoldenAnswers(answers);
  const extra: Record<string, unknown> = { golden_answers: answers };
  if (typeof row.id === 'string' || typeof row.id === 'number') extra.original_id = String(row.id);
  return makeRow({ idx, question, result, source: options.source ?? 'nq', extra });
}

export function normalizeNq(rows: Iterable<unknown>, options: NormalizeOptions = {}): SampleRow[] {
  return normalizeAll(rows, options, normalizeNqRow);
}

/**
 * One Search-R1 row (`id, question, golden_answers[], data_source, prompt, ability,
 * reward_model{ground_truth{target[]}}, extra_info`) as a SampleRow. The source tag is the row's
 * `data_source` ('nq', 'hotpotqa', …) so a Search-R1 NQ row mixes with FlashRAG NQ rows; the
 * Search-R1 prompt template is dropped (agents build their own prompts).
 */
export function normalizeSearchR1Row(
  raw: unknown,
  idx: number,
  options: NormalizeOptions = {},
): SampleRow {
  const { ctx, row } = openRow('search-r1', raw, idx, options);
  const question = normalizeQuestionMark(requireText(row, ['question'], ctx));
  if (question === '') throw rowError(ctx, 'question is empty');
  let answersRow = row;
  if (row.golden_answers === undefined || row.golden_answers === null) {
    // Some Search-R1 exports carry the answers only in reward_model.ground_truth.target.
    const rm = row.reward_model as { ground_truth?: { target?: unknown } } | null | undefined;
    answersRow = { golden_answers: rm?.ground_truth?.target };
  }
  const answers = answersOf(answersRow, ['golden_answers'], ctx);
  const result = joinGoldenAnswers(answers);
  const dataSource =
    typeof row.data_source === 'string' && row.data_source !== '' ? row.data_source : undefined;
  const extra: Record<string, unknown> = { golden_answers: answers };
  if (dataSource) extra.data_source = dataSource;
  if (typeof row.id === 'string' || typeof row.id === 'number') extra.original_id = String(row.id);
  if (typeof row.ability === 'string') extra.ability = row.ability;
  const info = row.extra_info as { split?: unknown; index?: unknown } | null | undefined;
  if (typeof info?.split === 'string') extra.split = info.split;
  return makeRow({
    idx,
    question,
    result,
    source: options.source ?? dataSource ?? 'search-r1',
    extra,
  });
}

export function normalizeSearchR1(
  rows: Iterable<unknown>,
  options: NormalizeOptions = {},
): SampleRow[] {
  return normalizeAll(rows, options, normalizeSearchR1Row);
}
