import { DataFormatError } from '../errors.js';
import { readParquetRows } from './parquet-read.js';

// HotpotQA as the hub stores it (hotpotqa/hotpot_qa, Parquet: `id`, and the paired lists of
// HF's `sequence` features — `supporting_facts: {title[], sent_id[]}`, `context: {title[],
// sentences[][]}`) back in the layout of HotpotQA's own JSON release, which ../shared's
// hotpotqa/dev-distractor-500.jsonl keeps and the examples read: `_id`, `[title, sent_id]`
// pairs and `[title, sentences]` paragraphs. The SampleRow normaliser reads either layout; the
// retrieval corpus (every row's `context`) is built from the JSON one.

/** One HotpotQA row in the layout of the original JSON release. */
export interface HotpotQaOriginalRow {
  _id: string;
  question: string;
  answer: string;
  /** [paragraph title, sentence index] pairs. */
  supporting_facts: [string, number][];
  /** [paragraph title, its sentences] pairs: the gold paragraphs and the distractors. */
  context: [string, string[]][];
  type: string;
  level: string;
}

const text = (v: unknown): v is string => typeof v === 'string';

/** Two parallel lists of a struct column (`{title: [...], other: [...]}`) of equal length. */
function pairs<T>(
  value: unknown,
  other: string,
  check: (v: unknown) => v is T,
  where: { column: string; row: number },
): [string, T][] {
  const struct = value as Record<string, unknown> | null | undefined;
  const titles = struct?.title;
  const values = struct?.[other];
  if (!Array.isArray(titles) || !Array.isArray(values) || titles.length !== values.length)
    throw new DataFormatError(
      `${where.column} is not the hub's layout {title: [...], ${other}: [...]} with lists of one length`,
      { row: where.row },
    );
  return titles.map((t, i) => {
    const v = values[i];
    if (!text(t) || !check(v))
      throw new DataFormatError(`${where.column}: entry ${i} is not a title with its ${other}`, {
        row: where.row,
      });
    return [t, v];
  });
}

const isSentences = (v: unknown): v is string[] => Array.isArray(v) && v.every(text);
const isIndex = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v);

/** One hub row (`index`: its place in the file, for messages) in the original JSON layout. */
export function hotpotQaOriginalRow(raw: unknown, index = 0): HotpotQaOriginalRow {
  const row = (raw ?? {}) as Record<string, unknown>;
  for (const key of ['id', 'question', 'answer'])
    if (!text(row[key]))
      throw new DataFormatError(`'${key}' is missing or not text (hub layout expected)`, {
        row: index,
      });
  return {
    _id: row.id as string,
    question: row.question as string,
    answer: row.answer as string,
    supporting_facts: pairs(row.supporting_facts, 'sent_id', isIndex, {
      column: 'supporting_facts',
      row: index,
    }),
    context: pairs(row.context, 'sentences', isSentences, { column: 'context', row: index }),
    type: text(row.type) ? row.type : '',
    level: text(row.level) ? row.level : '',
  };
}

/**
 * The first `limit` rows (default all) of the hub's HotpotQA Parquet files, in file order, in the
 * original JSON layout. An error names the file and row.
 */
export async function readHotpotQaHubRows(
  files: readonly string[],
  options: { limit?: number | undefined } = {},
): Promise<HotpotQaOriginalRow[]> {
  const limit = options.limit ?? Number.POSITIVE_INFINITY;
  const out: HotpotQaOriginalRow[] = [];
  for (const file of files) {
    if (out.length >= limit) break;
    const rows = await readParquetRows(file, {
      rowEnd: Number.isFinite(limit) ? limit - out.length : undefined,
    });
    for (const [i, raw] of rows.entries()) {
      try {
        out.push(hotpotQaOriginalRow(raw, i));
      } catch (e) {
        if (!DataFormatError.isInstance(e)) throw e;
        throw new DataFormatError(
          e.reason,
          { file, row: i },
          {
            cause: e,
            hint: 'name a file of hotpotqa/hotpot_qa (config distractor or fullwiki), or of a copy with its columns',
          },
        );
      }
    }
  }
  return out;
}
