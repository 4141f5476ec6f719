import { extname } from 'node:path';
import { DataFormatError } from '../errors.js';
import { type SampleRow, SampleRowSchema } from '../sample-row.js';
import { type ColumnField, inferFields, int64Type, utf8Type } from './column-types.js';
import { readJsonl, writeJsonl } from './jsonl.js';
import { readParquetRows } from './parquet-read.js';
import { writeParquet } from './parquet-write.js';

/**
 * The Parquet columns of SampleRows: fixed top-level columns and an `extra_info` struct whose
 * fields are the union of every row's extra_info keys (what HF datasets writes for a list of dicts).
 */
export function sampleRowFields(rows: readonly SampleRow[]): ColumnField[] {
  const extra = inferFields(rows.map((r) => r.extra_info));
  const required = (name: string, type = utf8Type): ColumnField => ({
    name,
    type,
    nullable: false,
  });
  for (const f of extra) if (f.name === 'ground_truth' || f.name === 'idx') f.nullable = false;
  return [
    required('id', int64Type),
    required('question'),
    required('chain'),
    required('result'),
    required('source'),
    { name: 'extra_info', nullable: false, type: { kind: 'struct', fields: extra } },
  ];
}

/** Writes SampleRows as Parquet (the seed's combined_train.parquet layout). */
export async function writeSampleRowsParquet(
  path: string,
  rows: readonly SampleRow[],
): Promise<void> {
  if (rows.length === 0) throw new DataFormatError('no rows to write', { file: path });
  await writeParquet(path, rows as unknown as Record<string, unknown>[], {
    fields: sampleRowFields(rows),
  });
}

function validate(raw: unknown, index: number, file: string): SampleRow {
  const record = raw as { extra_info?: unknown };
  if (record && typeof record.extra_info === 'object' && record.extra_info !== null) {
    // Keys another source's rows added to the shared struct read back as null here; drop them.
    record.extra_info = Object.fromEntries(
      Object.entries(record.extra_info).filter(([, v]) => v !== null && v !== undefined),
    );
  }
  const parsed = SampleRowSchema.safeParse(raw);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `${i.path.join('.') || '(row)'}: ${i.message}`);
    throw new DataFormatError(`row ${index} is not a SampleRow: ${issues.join('; ')}`, { file });
  }
  return parsed.data;
}

/** Reads SampleRows back from a `.parquet` or `.jsonl` file, validating each row. */
export async function readSampleRows(path: string): Promise<SampleRow[]> {
  const ext = extname(path).toLowerCase();
  if (ext === '.parquet') {
    const rows = await readParquetRows(path);
    return rows.map((r, i) => validate(r, i, path));
  }
  if (ext === '.jsonl') {
    const out: SampleRow[] = [];
    for await (const r of readJsonl(path)) out.push(validate(r, out.length, path));
    return out;
  }
  throw new DataFormatError(`unknown extension '${ext}' (expected .parquet or .jsonl)`, {
    file: path,
  });
}

/** Writes SampleRows as `.parquet` or `.jsonl`, chosen by the extension. */
export async function writeSampleRows(path: string, rows: readonly SampleRow[]): Promise<void> {
  const ext = extname(path).toLowerCase();
  if (ext === '.parquet') return writeSampleRowsParquet(path, rows);
  if (ext === '.jsonl') return writeJsonl(path, rows);
  throw new DataFormatError(`unknown extension '${ext}' (expected .parquet or .jsonl)`, {
    file: path,
  });
}
