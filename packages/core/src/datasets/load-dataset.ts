import { extname } from 'node:path';
import { DataFormatError } from '../errors.js';
import type { SampleRow } from '../sample-row.js';
import { readJsonlRecords } from './jsonl.js';
import { normalizeAimeRow } from './normalizers/aime.js';
import { normalizeDeepMathRow } from './normalizers/deepmath.js';
import { normalizeGsm8kRow } from './normalizers/gsm8k.js';
import { normalizeHotpotQaRow } from './normalizers/hotpotqa.js';
import { normalizeMath500Row } from './normalizers/math500.js';
import { normalizeNqRow, normalizeSearchR1Row } from './normalizers/nq.js';
import { normalizePlainRow } from './normalizers/plain.js';
import type { NormalizeOptions } from './normalizers/row-fields.js';
import { readParquetFields, readParquetRows } from './parquet-read.js';

interface FormatEntry {
  normalize: (raw: unknown, idx: number, options: NormalizeOptions) => SampleRow;
  /** Every column the normaliser may read; Parquet reads skip the rest (DeepMath's long r1 solutions, HotpotQA's context). */
  columns: readonly string[];
}

/** The raw layouts the loaders know, each with its normaliser. */
export const DATASET_FORMATS = {
  gsm8k: { normalize: normalizeGsm8kRow, columns: ['question', 'answer'] },
  deepmath: {
    normalize: normalizeDeepMathRow,
    columns: ['question', 'Problem', 'final_answer', 'Answer', 'difficulty', 'topic'],
  },
  nq: {
    normalize: normalizeNqRow,
    columns: ['id', 'question', 'golden_answers', 'answer', 'answers'],
  },
  'search-r1': {
    normalize: normalizeSearchR1Row,
    columns: [
      'id',
      'question',
      'golden_answers',
      'data_source',
      'ability',
      'reward_model',
      'extra_info',
    ],
  },
  aime: {
    normalize: normalizeAimeRow,
    columns: [
      'id',
      'problem',
      'question',
      'Problem',
      'answer',
      'Answer',
      'solution',
      'url',
      'year',
    ],
  },
  math500: {
    normalize: normalizeMath500Row,
    columns: ['problem', 'solution', 'answer', 'subject', 'level', 'unique_id'],
  },
  hotpotqa: {
    normalize: normalizeHotpotQaRow,
    columns: ['_id', 'id', 'question', 'answer', 'supporting_facts', 'type', 'level'],
  },
  plain: {
    normalize: normalizePlainRow,
    columns: ['id', 'question', 'answer', 'prompt', 'completion', 'messages'],
  },
} as const satisfies Record<string, FormatEntry>;

export type DatasetFormat = keyof typeof DATASET_FORMATS;

export interface LoadDatasetOptions extends Omit<NormalizeOptions, 'file'> {
  /** Keep only the first `limit` rows. */
  limit?: number;
}

/**
 * Reads a raw dataset file (`.jsonl` streamed, or `.parquet`) and normalises every row to a
 * SampleRow with the normaliser of `format`.
 */
export async function loadDataset(
  path: string,
  format: DatasetFormat,
  options: LoadDatasetOptions = {},
): Promise<SampleRow[]> {
  const entry: FormatEntry | undefined = DATASET_FORMATS[format];
  if (!entry) {
    throw new DataFormatError(
      `unknown dataset format '${String(format)}' (known: ${Object.keys(DATASET_FORMATS).join(', ')})`,
      { file: path },
    );
  }
  const limit = options.limit ?? Number.POSITIVE_INFINITY;
  const start = options.startIdx ?? 0;
  const { normalize } = entry;
  const normalizeOptions: NormalizeOptions = { source: options.source, file: path };
  const out: SampleRow[] = [];
  const ext = extname(path).toLowerCase();
  if (ext === '.jsonl') {
    for await (const { value, line } of readJsonlRecords(path)) {
      if (out.length >= limit) break;
      out.push(normalize(value, start + out.length, { ...normalizeOptions, line }));
    }
  } else if (ext === '.parquet') {
    const present = new Set((await readParquetFields(path)).map((f) => f.name));
    const rows = await readParquetRows(path, {
      columns: entry.columns.filter((c) => present.has(c)),
      rowEnd: Number.isFinite(limit) ? limit : undefined,
    });
    for (const raw of rows) out.push(normalize(raw, start + out.length, normalizeOptions));
  } else {
    throw new DataFormatError(`unknown extension '${ext}' (expected .jsonl or .parquet)`, {
      file: path,
    });
  }
  return out;
}
