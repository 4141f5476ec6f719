import { extname } from 'node:path';
import { DataFormatError } from '../errors.js';
import type { SampleRow } from '../sample-row.js';
import { readJsonl } from './jsonl.js';
import { normalizeAimeRow } from './normalizers/aime.js';
import { normalizeDeepMathRow } from './normalizers/deepmath.js';
import { normalizeGsm8kRow } from './normalizers/gsm8k.js';
import { normalizeHotpotQaRow } from './normalizers/hotpotqa.js';
import { normalizeMath500Row } from './normalizers/math500.js';
import { normalizeNqRow, normalizeSearchR1Row } from './normalizers/nq.js';
import type { NormalizeOptions } from './normalizers/row-fields.js';
import { readParquetRows } from './parquet-read.js';

/** The raw layouts the loaders know, each with its normaliser. */
export const DATASET_FORMATS = {
  gsm8k: normalizeGsm8kRow,
  deepmath: normalizeDeepMathRow,
  nq: normalizeNqRow,
  'search-r1': normalizeSearchR1Row,
  aime: normalizeAimeRow,
  math500: normalizeMath500Row,
  hotpotqa: normalizeHotpotQaRow,
} as const;

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
  const normalize = DATASET_FORMATS[format];
  if (!normalize) {
    throw new DataFormatError(
      `unknown dataset format '${String(format)}' (known: ${Object.keys(DATASET_FORMATS).join(', ')})`,
      { file: path },
    );
  }
  const limit = options.limit ?? Number.POSITIVE_INFINITY;
  const start = options.startIdx ?? 0;
  const normalizeOptions: NormalizeOptions = { source: options.source, file: path };
  const out: SampleRow[] = [];
  const ext = extname(path).toLowerCase();
  if (ext === '.jsonl') {
    for await (const raw of readJsonl(path)) {
      if (out.length >= limit) break;
      out.push(normalize(raw, start + out.length, normalizeOptions));
    }
  } else if (ext === '.parquet') {
    const rows = await readParquetRows(path, Number.isFinite(limit) ? { rowEnd: limit } : {});
    for (const raw of rows) out.push(normalize(raw, start + out.length, normalizeOptions));
  } else {
    throw new DataFormatError(`unknown extension '${ext}' (expected .jsonl or .parquet)`, {
      file: path,
    });
  }
  return out;
}
