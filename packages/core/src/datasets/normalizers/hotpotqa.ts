import type { SampleRow } from '../../sample-row.js';
import {
  copyPresent,
  makeRow,
  type NormalizeOptions,
  normalizeAll,
  openRow,
  type RowContext,
  requireText,
  rowError,
} from './row-fields.js';

/** A supporting fact: sentence `sent_id` of the paragraph titled `title`. */
export interface SupportingFact {
  title: string;
  sent_id: number;
}

function supportingFacts(value: unknown, ctx: RowContext): SupportingFact[] {
  if (value === undefined || value === null) return [];
  // The original JSON stores [title, sentence] pairs; the HF copy stores {title: [], sent_id: []}.
  if (Array.isArray(value)) {
    return value.map((pair, i) => {
      if (!Array.isArray(pair) || typeof pair[0] !== 'string' || typeof pair[1] !== 'number') {
        throw rowError(ctx, `supporting_facts[${i}] is not a [title, sentence] pair`);
      }
      return { title: pair[0], sent_id: pair[1] };
    });
  }
  const { title, sent_id } = value as { title?: unknown; sent_id?: unknown };
  if (Array.isArray(title) && Array.isArray(sent_id) && title.length === sent_id.length) {
    return title.map((t, i) => ({ title: String(t), sent_id: Number(sent_id[i]) }));
  }
  throw rowError(ctx, 'supporting_facts has an unknown layout');
}

/**
 * One HotpotQA row `{_id, question, answer, supporting_facts, context, type, level}` as a SampleRow
 * (source 'hotpotqa'). Supporting facts are kept as `{title, sent_id}` records (a Parquet list
 * cannot hold the original mixed [string, number] pairs); the context paragraphs are not copied,
 * they belong in a retrieval corpus, not in every training row.
 */
export function normalizeHotpotQaRow(
  raw: unknown,
  idx: number,
  options: NormalizeOptions = {},
): SampleRow {
  const { ctx, row } = openRow('hotpotqa', raw, idx, options);
  const question = requireText(row, ['question'], ctx).trim();
  const result = requireText(row, ['answer'], ctx).trim();
  if (result === '') throw rowError(ctx, 'answer is empty');
  const extra: Record<string, unknown> = {
    supporting_facts: supportingFacts(row.supporting_facts, ctx),
  };
  copyPresent(row, extra, { _id: 'original_id', id: 'original_id', type: 'type', level: 'level' });
  return makeRow({ idx, question, result, source: options.source ?? 'hotpotqa', extra });
}

export function normalizeHotpotQa(
  rows: Iterable<unknown>,
  options: NormalizeOptions = {},
): SampleRow[] {
  return normalizeAll(rows, options, normalizeHotpotQaRow);
}
