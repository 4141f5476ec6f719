import type { Table } from 'apache-arrow';
import {
  type AsyncBuffer,
  asyncBufferFromFile,
  type FileMetaData,
  parquetMetadataAsync,
  parquetReadObjects,
  parquetSchema,
} from 'hyparquet';
import { compressors } from 'hyparquet-compressors';
import { DataFormatError, FileNotFoundError, isNotFoundError } from '../errors.js';
import { convertInt64, type Int64Mode, rowsToArrowTable } from './arrow-table.js';
import { type ColumnField, type ColumnType, fieldsFromParquetSchema } from './column-types.js';

/** A Parquet file path, or its bytes already in memory. */
export type ParquetSource = string | ArrayBuffer | Uint8Array;

export interface ParquetReadOptions {
  /** Top-level columns to read (all when omitted). */
  columns?: readonly string[];
  /** First row to read (inclusive, 0-based). */
  rowStart?: number;
  /** Row to stop before (exclusive). */
  rowEnd?: number;
  /** INT64 values as numbers (default; throws when one would round) or as bigints. */
  int64?: Int64Mode;
}

function label(source: ParquetSource): string | undefined {
  return typeof source === 'string' ? source : undefined;
}

async function open(source: ParquetSource): Promise<AsyncBuffer> {
  if (typeof source === 'string') {
    try {
      return await asyncBufferFromFile(source);
    } catch (cause) {
      if (isNotFoundError(cause)) throw new FileNotFoundError(source, { cause });
      const reason = cause instanceof Error ? cause.message : String(cause);
      throw new DataFormatError(`cannot open: ${reason}`, { file: source }, { cause });
    }
  }
  if (source instanceof ArrayBuffer) return source;
  // hyparquet slices an ArrayBuffer; copy out exactly this view's bytes.
  return source.buffer.slice(
    source.byteOffset,
    source.byteOffset + source.byteLength,
  ) as ArrayBuffer;
}

async function guarded<T>(source: ParquetSource, what: string, run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (cause) {
    if (DataFormatError.isInstance(cause)) throw cause;
    const reason = cause instanceof Error ? cause.message : String(cause);
    throw new DataFormatError(`${what}: ${reason}`, { file: label(source) }, { cause });
  }
}

/** The file's metadata footer (row count, row groups, key/value metadata, flat schema). */
export async function readParquetMetadata(source: ParquetSource): Promise<FileMetaData> {
  const file = await open(source);
  return guarded(source, 'not a readable Parquet file', () => parquetMetadataAsync(file));
}

/** The file's columns as a nested type tree (lists, structs, leaves). */
export async function readParquetFields(source: ParquetSource): Promise<ColumnField[]> {
  const metadata = await readParquetMetadata(source);
  return guarded(source, 'unsupported schema', async () =>
    fieldsFromParquetSchema(parquetSchema(metadata)),
  );
}

// hyparquet leaves a null struct or list as undefined and INT64 as bigint; rows handed out use
// null throughout and the caller's choice of int64 representation.
function normalize(value: unknown, type: ColumnType, mode: Int64Mode, path: string): unknown {
  if (value === null || value === undefined) return null;
  if (type.kind === 'int64') return convertInt64(value as bigint | number, mode, path);
  if (type.kind === 'list' && Array.isArray(value)) {
    for (let i = 0; i < value.length; i++)
      value[i] = normalize(value[i], type.element.type, mode, path);
    return value;
  }
  if (type.kind === 'struct' && typeof value === 'object') {
    const record = value as Record<string, unknown>;
    for (const f of type.fields)
      record[f.name] = normalize(record[f.name], f.type, mode, `${path}.${f.name}`);
  }
  return value;
}

async function readWithFields(
  source: ParquetSource,
  options: ParquetReadOptions,
): Promise<{ rows: Record<string, unknown>[]; fields: ColumnField[] }> {
  const file = await open(source);
  return guarded(source, 'cannot decode', async () => {
    const metadata = await parquetMetadataAsync(file);
    let fields = fieldsFromParquetSchema(parquetSchema(metadata));
    if (options.columns) {
      const wanted = options.columns;
      const missing = wanted.filter((c) => !fields.some((f) => f.name === c));
      if (missing.length > 0) {
        throw new DataFormatError(`no column named ${missing.join(', ')}`, { file: label(source) });
      }
      fields = wanted.map((c) => fields.find((f) => f.name === c)!);
    }
    const rows = (await parquetReadObjects({
      file,
      metadata,
      compressors,
      columns: options.columns ? [...options.columns] : undefined,
      rowStart: options.rowStart,
      rowEnd: options.rowEnd,
    })) as Record<string, unknown>[];
    const mode = options.int64 ?? 'number';
    for (const row of rows) {
      for (const f of fields) row[f.name] = normalize(row[f.name], f.type, mode, f.name);
    }
    return { rows, fields };
  });
}

/**
 * Reads a Parquet file (any codec: snappy, gzip, zstd, brotli, lz4) into plain row objects.
 * Nested columns keep their shape: LIST → array, struct → object, list of structs → array of
 * objects. INT64 values are numbers unless `int64: 'bigint'` is asked for.
 */
export async function readParquetRows(
  source: ParquetSource,
  options: ParquetReadOptions = {},
): Promise<Record<string, unknown>[]> {
  return (await readWithFields(source, options)).rows;
}

/** Reads a Parquet file into an Arrow Table whose schema mirrors the file's nested schema. */
export async function readParquetTable(
  source: ParquetSource,
  options: Omit<ParquetReadOptions, 'int64'> = {},
): Promise<Table> {
  const { rows, fields } = await readWithFields(source, { ...options, int64: 'bigint' });
  return rowsToArrowTable(rows, { fields });
}
