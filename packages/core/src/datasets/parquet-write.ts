import type { Table } from 'apache-arrow';
import type { CompressionCodec, KeyValue } from 'hyparquet';
import { ByteWriter, parquetWrite } from 'hyparquet-writer';
import { writeFileAtomically } from '../atomic-file.js';
import { DataFormatError } from '../errors.js';
import { arrowTableToRows } from './arrow-table.js';
import {
  type ColumnField,
  type ColumnType,
  fromArrowField,
  inferFields,
  toParquetSchema,
} from './column-types.js';
import { columnValues } from './column-values.js';

export interface ParquetWriteOptions {
  /** Column layout; inferred from the rows when omitted (see inferFields). */
  fields?: readonly ColumnField[];
  /** Compression of every column; SNAPPY (the HF / pyarrow default) unless told. */
  codec?: Extract<CompressionCodec, 'SNAPPY' | 'UNCOMPRESSED'>;
  /** Rows per row group (default 100,000). */
  rowGroupSize?: number;
  /** Extra key/value pairs stored in the footer. */
  metadata?: Record<string, string>;
}

// hyparquet-writer wants each leaf in its Parquet physical form: bigint for INT64 (also inside
// lists and structs), numbers for floats, text for strings, and null rather than undefined.
function coerce(value: unknown, type: ColumnType, path: string): unknown {
  if (value === null || value === undefined) return null;
  switch (type.kind) {
    case 'int64':
      if (typeof value === 'bigint') return value;
      if (typeof value === 'number' && Number.isInteger(value)) return BigInt(value);
      break;
    case 'int32':
      if (typeof value === 'number' && Number.isInteger(value)) return value;
      if (typeof value === 'bigint') return Number(value);
      break;
    case 'float32':
    case 'float64':
      if (typeof value === 'number') return value;
      if (typeof value === 'bigint') return Number(value);
      break;
    case 'utf8':
      if (typeof value === 'string') return value;
      break;
    case 'bool':
      if (typeof value === 'boolean') return value;
      break;
    case 'binary':
      if (value instanceof Uint8Array) return value;
      break;
    case 'timestamp':
      if (value instanceof Date) return value;
      if (typeof value === 'number') return new Date(value);
      break;
    case 'null':
      break;
    case 'list':
      if (Array.isArray(value))
        return value.map((v, i) => coerce(v, type.element.type, `${path}[${i}]`));
      break;
    case 'struct':
      if (typeof value === 'object' && !Array.isArray(value)) {
        const record = value as Record<string, unknown>;
        const out: Record<string, unknown> = {};
        for (const f of type.fields) {
          const v = coerce(record[f.name], f.type, `${path}.${f.name}`);
          if (v === null && !f.nullable) {
            throw new DataFormatError(`column ${path}.${f.name}: null in a non-nullable field`);
          }
          out[f.name] = v;
        }
        return out;
      }
      break;
  }
  throw new DataFormatError(
    `column ${path}: value ${String(value)} does not fit type ${type.kind}`,
  );
}

/** Encodes row objects as a Parquet file in memory (nested arrays → LIST, objects → struct). */
export function rowsToParquetBuffer(
  rows: readonly Record<string, unknown>[],
  options: ParquetWriteOptions = {},
): Uint8Array {
  const fields = options.fields ?? inferFields(rows);
  if (fields.length === 0) throw new DataFormatError('cannot write a Parquet file with no columns');
  const schema = toParquetSchema(fields);
  const columnData = fields.map((f) => ({
    name: f.name,
    data: columnValues(rows, f, coerce),
  }));
  const kvMetadata: KeyValue[] = Object.entries(options.metadata ?? {}).map(([key, value]) => ({
    key,
    value,
  }));
  const writer = new ByteWriter();
  try {
    parquetWrite({
      writer,
      columnData,
      schema,
      codec: options.codec ?? 'SNAPPY',
      rowGroupSize: options.rowGroupSize ?? 100_000,
      kvMetadata: kvMetadata.length > 0 ? kvMetadata : undefined,
      createdBy: '@flowgrpo/core',
    });
  } catch (cause) {
    if (DataFormatError.isInstance(cause)) throw cause;
    const reason = cause instanceof Error ? cause.message : String(cause);
    throw new DataFormatError(`cannot encode Parquet: ${reason}`, {}, { cause });
  }
  return new Uint8Array(writer.getBuffer());
}

/** Writes row objects as a snappy-compressed Parquet file. */
export async function writeParquet(
  path: string,
  rows: readonly Record<string, unknown>[],
  options: ParquetWriteOptions = {},
): Promise<void> {
  await writeFileAtomically(path, rowsToParquetBuffer(rows, options));
}

/** Writes an Arrow Table as Parquet, keeping its (nested) schema and nullability. */
export async function writeParquetTable(
  path: string,
  table: Table,
  options: Omit<ParquetWriteOptions, 'fields'> = {},
): Promise<void> {
  const fields = table.schema.fields.map((f) => fromArrowField(f));
  const rows = arrowTableToRows(table, { int64: 'bigint' });
  await writeFileAtomically(path, rowsToParquetBuffer(rows, { ...options, fields }));
}
