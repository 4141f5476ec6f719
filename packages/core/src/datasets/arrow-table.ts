import {
  makeData,
  RecordBatch,
  Schema,
  Struct,
  Table,
  type Vector,
  vectorFromArray,
} from 'apache-arrow';
import { DataFormatError } from '../errors.js';
import {
  type ColumnField,
  type ColumnType,
  fromArrowField,
  inferFields,
  toArrowField,
  toArrowType,
} from './column-types.js';
import { columnValues } from './column-values.js';

/** How 64-bit integers come back: JS numbers (exact up to 2^53, else an error) or bigints. */
export type Int64Mode = 'number' | 'bigint';

export interface RowsToTableOptions {
  /** Column layout; inferred from the rows (see inferFields) when omitted. */
  fields?: readonly ColumnField[];
}

function toArrowValue(value: unknown, type: ColumnType, path: string): unknown {
  if (value === null || value === undefined) return null;
  switch (type.kind) {
    case 'int64':
      if (typeof value === 'bigint') return value;
      if (typeof value === 'number' && Number.isInteger(value)) return BigInt(value);
      break;
    case 'int32':
    case 'float32':
    case 'float64':
      if (typeof value === 'number') return value;
      if (typeof value === 'bigint') return Number(value);
      break;
    case 'utf8':
      if (typeof value === 'string') return value;
      // hyparquet returns JSON-annotated columns parsed; Arrow keeps their text.
      return JSON.stringify(value, (_k, v) => (typeof v === 'bigint' ? v.toString() : v));
    case 'bool':
      if (typeof value === 'boolean') return value;
      break;
    case 'binary':
      if (value instanceof Uint8Array) return value;
      break;
    case 'timestamp':
      if (value instanceof Date) return value.getTime();
      if (typeof value === 'number') return value;
      if (typeof value === 'bigint') return Number(value);
      break;
    case 'null':
      break;
    case 'list':
      if (Array.isArray(value)) {
        return value.map((v, i) => toArrowValue(v, type.element.type, `${path}[${i}]`));
      }
      break;
    case 'struct':
      if (typeof value === 'object') {
        const record = value as Record<string, unknown>;
        const out: Record<string, unknown> = {};
        for (const f of type.fields)
          out[f.name] = toArrowValue(record[f.name], f.type, `${path}.${f.name}`);
        return out;
      }
      break;
  }
  throw new DataFormatError(
    `column ${path}: value ${String(value)} does not fit type ${type.kind}`,
  );
}

/** Builds an Arrow Table from row objects; nested arrays and objects become List and Struct columns. */
export function rowsToArrowTable(
  rows: readonly Record<string, unknown>[],
  options: RowsToTableOptions = {},
): Table {
  const fields = options.fields ?? inferFields(rows);
  const schema = new Schema(fields.map(toArrowField));
  if (rows.length === 0) return new Table(schema);
  const columns: Record<string, Vector> = {};
  for (const field of fields) {
    const values = columnValues(rows, field, toArrowValue);
    columns[field.name] = vectorFromArray(values, toArrowType(field.type));
  }
  // A table built from bare vectors marks every field nullable; rewrap its batches in the
  // declared schema so REQUIRED columns stay REQUIRED when written on to Parquet.
  const built = new Table(columns);
  const batches = built.batches.map(
    (b) =>
      new RecordBatch(
        schema,
        makeData({
          type: new Struct(schema.fields),
          length: b.numRows,
          nullCount: 0,
          children: b.data.children,
        }),
      ),
  );
  return new Table(schema, batches);
}

export interface TableToRowsOptions {
  int64?: Int64Mode;
}

function fromArrowValue(value: unknown, type: ColumnType, int64: Int64Mode, path: string): unknown {
  if (value === null || value === undefined) return null;
  switch (type.kind) {
    case 'int64':
      return convertInt64(value as bigint | number, int64, path);
    case 'timestamp':
      return new Date(Number(value));
    case 'list': {
      const out: unknown[] = [];
      for (const item of value as Iterable<unknown>) {
        out.push(fromArrowValue(item, type.element.type, int64, `${path}[]`));
      }
      return out;
    }
    case 'struct': {
      const record = value as Record<string, unknown>;
      const out: Record<string, unknown> = {};
      for (const f of type.fields) {
        out[f.name] = fromArrowValue(record[f.name], f.type, int64, `${path}.${f.name}`);
      }
      return out;
    }
    case 'binary':
      return value instanceof Uint8Array ? value : new Uint8Array(value as ArrayLike<number>);
    default:
      return value;
  }
}

/** A 64-bit integer as a number (throwing when it would round) or as a bigint. */
export function convertInt64(
  value: bigint | number,
  mode: Int64Mode,
  path: string,
): bigint | number {
  if (mode === 'bigint') return typeof value === 'bigint' ? value : BigInt(value);
  if (typeof value === 'number') return value;
  if (value > BigInt(Number.MAX_SAFE_INTEGER) || value < BigInt(Number.MIN_SAFE_INTEGER)) {
    throw new DataFormatError(
      `column ${path}: int64 value ${value} is not exactly representable as a number; read with int64: 'bigint'`,
    );
  }
  return Number(value);
}

/** Plain row objects (nested lists as arrays, structs as objects) from an Arrow Table. */
export function arrowTableToRows(
  table: Table,
  options: TableToRowsOptions = {},
): Record<string, unknown>[] {
  const int64 = options.int64 ?? 'number';
  const fields = table.schema.fields.map((f) => fromArrowField(f));
  const rows: Record<string, unknown>[] = Array.from({ length: table.numRows }, () => ({}));
  for (const f of fields) {
    const column = table.getChild(f.name);
    if (!column) continue;
    // Column-wise iteration walks each chunk once, far cheaper than get(i) per cell.
    let i = 0;
    for (const value of column) rows[i++]![f.name] = fromArrowValue(value, f.type, int64, f.name);
  }
  return rows;
}
