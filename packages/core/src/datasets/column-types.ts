import {
  Binary,
  Bool,
  type DataType,
  Field,
  Float32,
  Float64,
  Int32,
  Int64,
  List,
  Null,
  Struct,
  TimestampMillisecond,
  Type,
  Utf8,
} from 'apache-arrow';
import type { SchemaElement, SchemaTree } from 'hyparquet';
import { DataFormatError } from '../errors.js';

// One small type language sits between JS row objects, Parquet schemas and Arrow schemas, so each
// conversion is written once (rows → type, type → Parquet, Parquet → type, type ↔ Arrow) instead
// of once per pair of formats.

export type ColumnType =
  | { kind: 'utf8' }
  | { kind: 'binary' }
  | { kind: 'bool' }
  | { kind: 'int32' }
  | { kind: 'int64' }
  | { kind: 'float32' }
  | { kind: 'float64' }
  | { kind: 'timestamp' }
  /** Every value seen was null; written as a nullable string column. */
  | { kind: 'null' }
  | { kind: 'list'; element: ColumnField }
  | { kind: 'struct'; fields: ColumnField[] };

export interface ColumnField {
  name: string;
  type: ColumnType;
  nullable: boolean;
}

export const utf8Type: ColumnType = { kind: 'utf8' };
export const int64Type: ColumnType = { kind: 'int64' };

/** A nullable-or-not field of a list of `element`. */
export function listOf(name: string, element: ColumnType, nullable = false): ColumnField {
  return {
    name,
    nullable,
    type: { kind: 'list', element: { name: 'element', type: element, nullable: true } },
  };
}

function describe(type: ColumnType): string {
  if (type.kind === 'list') return `list<${describe(type.element.type)}>`;
  if (type.kind === 'struct') return `struct<${type.fields.map((f) => f.name).join(', ')}>`;
  return type.kind;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null) return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

function typeOfValue(value: unknown, path: string): ColumnType {
  switch (typeof value) {
    case 'string':
      return { kind: 'utf8' };
    case 'boolean':
      return { kind: 'bool' };
    case 'bigint':
      return { kind: 'int64' };
    case 'number':
      // JS numbers carry no int/float tag: whole numbers become int64 (what pandas and HF
      // datasets write for Python ints); pass explicit fields to keep a whole-valued float column.
      return Number.isInteger(value) ? { kind: 'int64' } : { kind: 'float64' };
  }
  if (value instanceof Date) return { kind: 'timestamp' };
  if (value instanceof Uint8Array) return { kind: 'binary' };
  if (Array.isArray(value)) {
    let element: ColumnField = { name: 'element', type: { kind: 'null' }, nullable: true };
    for (const item of value) element = mergeValue(element, item, `${path}[]`);
    return { kind: 'list', element };
  }
  if (isPlainObject(value)) {
    const fields = Object.entries(value).map(
      ([name, v]): ColumnField =>
        mergeValue({ name, type: { kind: 'null' }, nullable: false }, v, `${path}.${name}`),
    );
    return { kind: 'struct', fields };
  }
  throw new DataFormatError(`column ${path}: cannot store a value of type ${typeof value}`);
}

function mergeTypes(a: ColumnType, b: ColumnType, path: string): ColumnType {
  if (a.kind === 'null') return b;
  if (b.kind === 'null') return a;
  if (a.kind === 'list' && b.kind === 'list') {
    return { kind: 'list', element: mergeFields(a.element, b.element, `${path}[]`) };
  }
  if (a.kind === 'struct' && b.kind === 'struct') {
    const byName = new Map(a.fields.map((f) => [f.name, f]));
    const fields: ColumnField[] = a.fields.map((f) => {
      const other = b.fields.find((g) => g.name === f.name);
      // A key absent from some objects reads back as null there.
      return other ? mergeFields(f, other, `${path}.${f.name}`) : { ...f, nullable: true };
    });
    for (const g of b.fields) if (!byName.has(g.name)) fields.push({ ...g, nullable: true });
    return { kind: 'struct', fields };
  }
  if (a.kind === b.kind) return a;
  const numeric = new Set(['int32', 'int64', 'float32', 'float64']);
  if (numeric.has(a.kind) && numeric.has(b.kind)) return { kind: 'float64' };
  throw new DataFormatError(
    `column ${path}: mixed value types ${describe(a)} and ${describe(b)} cannot share a column`,
  );
}

function mergeFields(a: ColumnField, b: ColumnField, path: string): ColumnField {
  return {
    name: a.name,
    type: mergeTypes(a.type, b.type, path),
    // A 'null' kind alone means "no value seen yet"; nullability comes from actual nulls only.
    nullable: a.nullable || b.nullable,
  };
}

function mergeValue(field: ColumnField, value: unknown, path: string): ColumnField {
  if (value === null || value === undefined) return { ...field, nullable: true };
  return mergeFields(
    field,
    { name: field.name, type: typeOfValue(value, path), nullable: false },
    path,
  );
}

/**
 * Infers the columns of a table from its row objects: the union of keys (a key missing from some
 * rows makes a nullable column), nested arrays as lists and plain objects as structs, at any depth.
 * Throws DataFormatError when one column holds incompatible types (say a string and a list).
 */
export function inferFields(rows: Iterable<Record<string, unknown>>): ColumnField[] {
  const fields: ColumnField[] = [];
  const index = new Map<string, number>();
  let count = 0;
  for (const row of rows) {
    const seen = new Set<string>();
    for (const [name, value] of Object.entries(row)) {
      seen.add(name);
      let at = index.get(name);
      if (at === undefined) {
        at = fields.length;
        index.set(name, at);
        // Rows before this one lacked the key.
        fields.push({ name, type: { kind: 'null' }, nullable: count > 0 });
      }
      fields[at] = mergeValue(fields[at], value, name);
    }
    for (const f of fields) if (!seen.has(f.name)) f.nullable = true;
    count++;
  }
  return fields;
}

// ---------------------------------------------------------------------------------------------
// Parquet

function leafElement(
  name: string,
  type: ColumnType,
  repetition: SchemaElement['repetition_type'],
): SchemaElement {
  switch (type.kind) {
    case 'utf8':
    case 'null':
      return {
        name,
        type: 'BYTE_ARRAY',
        converted_type: 'UTF8',
        logical_type: { type: 'STRING' },
        repetition_type: repetition,
      };
    case 'binary':
      return { name, type: 'BYTE_ARRAY', repetition_type: repetition };
    case 'bool':
      return { name, type: 'BOOLEAN', repetition_type: repetition };
    case 'int32':
      return { name, type: 'INT32', repetition_type: repetition };
    case 'int64':
      return { name, type: 'INT64', repetition_type: repetition };
    case 'float32':
      return { name, type: 'FLOAT', repetition_type: repetition };
    case 'float64':
      return { name, type: 'DOUBLE', repetition_type: repetition };
    case 'timestamp':
      return {
        name,
        type: 'INT64',
        converted_type: 'TIMESTAMP_MILLIS',
        repetition_type: repetition,
      };
    default:
      throw new DataFormatError(`column ${name}: ${type.kind} is not a leaf type`);
  }
}

function pushField(out: SchemaElement[], field: ColumnField): void {
  const repetition_type = field.nullable ? 'OPTIONAL' : 'REQUIRED';
  const { type } = field;
  if (type.kind === 'list') {
    // The standard three-level LIST layout (what pyarrow and HF datasets write).
    out.push({
      name: field.name,
      repetition_type,
      converted_type: 'LIST',
      logical_type: { type: 'LIST' },
      num_children: 1,
    });
    out.push({ name: 'list', repetition_type: 'REPEATED', num_children: 1 });
    pushField(out, { ...type.element, name: 'element' });
  } else if (type.kind === 'struct') {
    if (type.fields.length === 0) {
      throw new DataFormatError(
        `column ${field.name}: Parquet cannot store a struct with no fields`,
      );
    }
    out.push({ name: field.name, repetition_type, num_children: type.fields.length });
    for (const child of type.fields) pushField(out, child);
  } else {
    out.push(leafElement(field.name, type, repetition_type));
  }
}

/** The flattened Parquet schema (root first, depth-first) for these columns. */
export function toParquetSchema(fields: readonly ColumnField[]): SchemaElement[] {
  const out: SchemaElement[] = [{ name: 'root', num_children: fields.length }];
  for (const f of fields) pushField(out, f);
  return out;
}

function leafFromParquet(element: SchemaElement, path: string): ColumnType {
  const logical = element.logical_type?.type;
  const converted = element.converted_type;
  switch (element.type) {
    case 'BOOLEAN':
      return { kind: 'bool' };
    case 'INT32':
      if (converted === 'DATE' || logical === 'DATE') return { kind: 'timestamp' };
      if (converted === 'DECIMAL' || logical === 'DECIMAL') return { kind: 'float64' };
      return { kind: 'int32' };
    case 'INT64':
      if (converted?.startsWith('TIMESTAMP') || logical === 'TIMESTAMP')
        return { kind: 'timestamp' };
      if (converted === 'DECIMAL' || logical === 'DECIMAL') return { kind: 'float64' };
      return { kind: 'int64' };
    case 'INT96':
      return { kind: 'timestamp' };
    case 'FLOAT':
      return { kind: 'float32' };
    case 'DOUBLE':
      return { kind: 'float64' };
    case 'BYTE_ARRAY':
    case 'FIXED_LEN_BYTE_ARRAY':
      if (converted === 'DECIMAL' || logical === 'DECIMAL') return { kind: 'float64' };
      // hyparquet hands JSON columns back parsed; Arrow gets their text (see parquet.ts).
      if (converted === 'UTF8' || converted === 'JSON' || converted === 'ENUM')
        return { kind: 'utf8' };
      if (logical === 'STRING' || logical === 'JSON' || logical === 'ENUM') return { kind: 'utf8' };
      if (logical === 'UUID' || logical === 'FLOAT16') {
        throw new DataFormatError(`column ${path}: Parquet ${logical} columns are not supported`);
      }
      // Un-annotated byte arrays: hyparquet decodes them as UTF-8 text by default.
      return element.type === 'BYTE_ARRAY' ? { kind: 'utf8' } : { kind: 'binary' };
    default:
      throw new DataFormatError(`column ${path}: unsupported Parquet type ${String(element.type)}`);
  }
}

function fieldFromTree(node: SchemaTree, name: string): ColumnField {
  const { element } = node;
  const path = node.path.join('.');
  const nullable = element.repetition_type !== 'REQUIRED';
  const isList = element.converted_type === 'LIST' || element.logical_type?.type === 'LIST';
  if (element.converted_type === 'MAP' || element.logical_type?.type === 'MAP') {
    throw new DataFormatError(`column ${path}: Parquet MAP columns are not supported`);
  }
  if (element.repetition_type === 'REPEATED') {
    // Legacy unannotated repetition: the field itself is the list of its values.
    const inner = fieldFromTree(
      { ...node, element: { ...element, repetition_type: 'REQUIRED' } },
      'element',
    );
    return { name, nullable: false, type: { kind: 'list', element: inner } };
  }
  if (isList) {
    const repeated = node.children[0];
    if (node.children.length !== 1 || repeated.element.repetition_type !== 'REPEATED') {
      throw new DataFormatError(`column ${path}: malformed LIST group`);
    }
    // Three-level lists wrap each element in a one-child repeated group; the older two-level
    // form repeats the element (a leaf, or a group of several fields) directly.
    const threeLevel =
      repeated.children.length === 1 &&
      repeated.element.name !== 'array' &&
      repeated.element.name !== `${element.name}_tuple`;
    const element_ = threeLevel
      ? fieldFromTree(repeated.children[0], 'element')
      : fieldFromTree(
          { ...repeated, element: { ...repeated.element, repetition_type: 'REQUIRED' } },
          'element',
        );
    return { name, nullable, type: { kind: 'list', element: element_ } };
  }
  if (node.children.length > 0 || element.num_children) {
    return {
      name,
      nullable,
      type: { kind: 'struct', fields: node.children.map((c) => fieldFromTree(c, c.element.name)) },
    };
  }
  return { name, nullable, type: leafFromParquet(element, path) };
}

/** Columns of a Parquet file from hyparquet's schema tree (`parquetSchema(metadata)`). */
export function fieldsFromParquetSchema(root: SchemaTree): ColumnField[] {
  return root.children.map((c) => fieldFromTree(c, c.element.name));
}

// ---------------------------------------------------------------------------------------------
// Arrow

/** The Arrow data type of a column type. */
export function toArrowType(type: ColumnType): DataType {
  switch (type.kind) {
    case 'utf8':
      return new Utf8();
    case 'binary':
      return new Binary();
    case 'bool':
      return new Bool();
    case 'int32':
      return new Int32();
    case 'int64':
      return new Int64();
    case 'float32':
      return new Float32();
    case 'float64':
      return new Float64();
    case 'timestamp':
      return new TimestampMillisecond();
    case 'null':
      return new Null();
    case 'list':
      return new List(toArrowField(type.element));
    case 'struct':
      return new Struct(type.fields.map(toArrowField));
  }
}

export function toArrowField(field: ColumnField): Field {
  return new Field(field.name, toArrowType(field.type), field.nullable);
}

/** The column type of an Arrow data type (the subset this module writes and reads). */
export function fromArrowType(type: DataType, path: string): ColumnType {
  switch (type.typeId) {
    case Type.Utf8:
    case Type.LargeUtf8:
      return { kind: 'utf8' };
    case Type.Binary:
    case Type.LargeBinary:
      return { kind: 'binary' };
    case Type.Bool:
      return { kind: 'bool' };
    case Type.Null:
      return { kind: 'null' };
    case Type.Int: {
      const bits = (type as Int32 | Int64).bitWidth;
      return bits === 64 ? { kind: 'int64' } : { kind: 'int32' };
    }
    case Type.Float: {
      const precision = (type as Float32 | Float64).precision;
      // Precision.SINGLE is 1, DOUBLE is 2 (half floats are read as float32).
      return precision === 2 ? { kind: 'float64' } : { kind: 'float32' };
    }
    case Type.Timestamp:
    case Type.Date:
      return { kind: 'timestamp' };
    case Type.List: {
      const child = (type as List).children[0];
      return { kind: 'list', element: fromArrowField(child, `${path}[]`) };
    }
    case Type.Struct:
      return {
        kind: 'struct',
        fields: (type as Struct).children.map((c) => fromArrowField(c, `${path}.${c.name}`)),
      };
    default:
      throw new DataFormatError(`column ${path}: unsupported Arrow type ${String(type)}`);
  }
}

export function fromArrowField(field: Field, path = field.name): ColumnField {
  return { name: field.name, type: fromArrowType(field.type, path), nullable: field.nullable };
}
