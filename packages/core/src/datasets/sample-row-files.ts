import { extname } from 'node:path';
import { DataFormatError } from '../errors.js';
import { type SampleRow, SampleRowSchema } from '../sample-row.js';
import { type ColumnField, inferFields, int64Type, utf8Type } from './column-types.js';
import { readJsonlRecords, writeJsonl } from './jsonl.js';
import { readParquetMetadata, readParquetRows } from './parquet-read.js';
import { writeParquet } from './parquet-write.js';

/** Footer key listing the extra_info fields stored as JSON text (see sampleRowLayout). */
export const JSON_EXTRA_KEYS_METADATA = 'flowgrpo.extra_info.json_keys';

export interface SampleRowLayout {
  fields: ColumnField[];
  /** extra_info keys whose values disagree in type across rows, stored as JSON text. */
  jsonKeys: string[];
}

/**
 * The Parquet columns of SampleRows: fixed top-level columns and an `extra_info` struct whose
 * fields are the union of every row's extra_info keys (what HF datasets writes for a list of
 * dicts). Sources can disagree on a key's type (MATH-500's `level` is 2, HotpotQA's is "hard");
 * such a key is stored as JSON text and decoded again by readSampleRows.
 */
export function sampleRowLayout(rows: readonly SampleRow[]): SampleRowLayout {
  const keys = new Set<string>();
  for (const r of rows) for (const k of Object.keys(r.extra_info)) keys.add(k);
  const extra: ColumnField[] = [];
  const jsonKeys: string[] = [];
  for (const key of keys) {
    const values = rows.map((r) => ({ [key]: r.extra_info[key] }));
    let field: ColumnField;
    try {
      field = inferFields(values)[0]!;
    } catch (error) {
      if (!DataFormatError.isInstance(error)) throw error;
      jsonKeys.push(key);
      field = { name: key, type: utf8Type, nullable: true };
    }
    if (key === 'ground_truth' || key === 'idx') field.nullable = false;
    extra.push(field);
  }
  const required = (name: string, type = utf8Type): ColumnField => ({
    name,
    type,
    nullable: false,
  });
  return {
    fields: [
      required('id', int64Type),
      required('question'),
      required('chain'),
      required('result'),
      required('source'),
      { name: 'extra_info', nullable: false, type: { kind: 'struct', fields: extra } },
    ],
    jsonKeys,
  };
}

/** Writes SampleRows as Parquet (the seed's combined_train.parquet layout). */
export async function writeSampleRowsParquet(
  path: string,
  rows: readonly SampleRow[],
): Promise<void> {
  if (rows.length === 0) throw new DataFormatError('no rows to write', { file: path });
  const { fields, jsonKeys } = sampleRowLayout(rows);
  const encoded =
    jsonKeys.length === 0
      ? rows
      : rows.map((r) => {
          const extra: Record<string, unknown> = { ...r.extra_info };
          for (const k of jsonKeys)
            if (extra[k] !== undefined && extra[k] !== null) extra[k] = JSON.stringify(extra[k]);
          return { ...r, extra_info: extra };
        });
  await writeParquet(path, encoded as unknown as Record<string, unknown>[], {
    fields,
    metadata:
      jsonKeys.length > 0 ? { [JSON_EXTRA_KEYS_METADATA]: JSON.stringify(jsonKeys) } : undefined,
  });
}

/** `raw` as a SampleRow; `at` is where it sits (a JSONL line, a Parquet row), for the error. */
function validate(raw: unknown, at: { line: number } | { row: number }, file: string): SampleRow {
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
    throw new DataFormatError(`not a SampleRow: ${issues.join('; ')}`, { file, ...at });
  }
  return parsed.data;
}

/** Reads SampleRows back from a `.parquet` or `.jsonl` file, validating each row. */
export async function readSampleRows(path: string): Promise<SampleRow[]> {
  const ext = extname(path).toLowerCase();
  if (ext === '.parquet') {
    const metadata = await readParquetMetadata(path);
    const entry = metadata.key_value_metadata?.find((kv) => kv.key === JSON_EXTRA_KEYS_METADATA);
    const jsonKeys = entry?.value ? (JSON.parse(entry.value) as string[]) : [];
    const rows = await readParquetRows(path);
    return rows.map((r, i) => {
      const extra = r.extra_info as Record<string, unknown> | null;
      if (extra) {
        for (const k of jsonKeys)
          if (typeof extra[k] === 'string') extra[k] = JSON.parse(extra[k] as string);
      }
      return validate(r, { row: i }, path);
    });
  }
  if (ext === '.jsonl') {
    const out: SampleRow[] = [];
    for await (const { value, line } of readJsonlRecords(path))
      out.push(validate(value, { line }, path));
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
