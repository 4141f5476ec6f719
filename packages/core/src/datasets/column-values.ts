import { DataFormatError } from '../errors.js';
import type { ColumnField, ColumnType } from './column-types.js';

// Shared by the Arrow and the Parquet writers (not public API): each converts cells to its own
// physical form, but the walk down a column and the REQUIRED-column check are one rule.

/** Converts one cell to a writer's form; null for a missing value, throws when it does not fit. */
export type CellConverter = (value: unknown, type: ColumnType, path: string) => unknown;

/** The column `field` of `rows`, each cell converted; a null in a non-nullable column throws. */
export function columnValues(
  rows: readonly Record<string, unknown>[],
  field: ColumnField,
  convert: CellConverter,
): unknown[] {
  return rows.map((row, i) => {
    const v = convert(row[field.name], field.type, `${field.name} (row ${i})`);
    if (v === null && !field.nullable) {
      throw new DataFormatError(`column ${field.name}: row ${i} is null in a non-nullable column`);
    }
    return v;
  });
}
