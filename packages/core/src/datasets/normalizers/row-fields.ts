import { DataFormatError } from '../../errors.js';
import type { SampleRow } from '../../sample-row.js';

/** Options every normaliser accepts. */
export interface NormalizeOptions {
  /** Overrides the `source` tag the normaliser would set. */
  source?: string;
  /** File the rows came from, named in errors. */
  file?: string;
  /**
   * The 1-based line of the row in its JSONL file: errors name it (`file:line 18: …`) instead of
   * the row's index, which skips blank lines where editors count them.
   */
  line?: number;
  /** Index of the first row within its source (default 0); `extra_info.idx` counts from here. */
  startIdx?: number;
}

/** Where a row sits, for error messages: its JSONL line, else its index within its source. */
export interface RowContext {
  dataset: string;
  idx: number;
  file?: string | undefined;
  line?: number | undefined;
}

export function rowError(ctx: RowContext, message: string): DataFormatError {
  return new DataFormatError(
    `${ctx.dataset}: ${message}`,
    ctx.line !== undefined ? { file: ctx.file, line: ctx.line } : { file: ctx.file, row: ctx.idx },
  );
}

export function asRecord(raw: unknown, ctx: RowContext): Record<string, unknown> {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    throw rowError(ctx, `expected an object, got ${Array.isArray(raw) ? 'an array' : typeof raw}`);
  }
  return raw as Record<string, unknown>;
}

/** A raw row checked to be an object, with the context its errors name. */
export function openRow(
  dataset: string,
  raw: unknown,
  idx: number,
  options: NormalizeOptions,
): { ctx: RowContext; row: Record<string, unknown> } {
  const ctx: RowContext = { dataset, idx, file: options.file, line: options.line };
  return { ctx, row: asRecord(raw, ctx) };
}

/** The first of `keys` present in the row (the seeds accept alternative spellings). */
export function pickKey(row: Record<string, unknown>, keys: readonly string[]): string | undefined {
  return keys.find((k) => row[k] !== undefined && row[k] !== null);
}

/** A required text field under one of `keys`; numbers are accepted and written in decimal. */
export function requireText(
  row: Record<string, unknown>,
  keys: readonly string[],
  ctx: RowContext,
): string {
  const key = pickKey(row, keys);
  if (key === undefined) {
    const present = Object.keys(row).join(', ') || 'none';
    throw rowError(ctx, `missing field ${keys.join(' or ')} (fields present: ${present})`);
  }
  const value = row[key];
  if (typeof value === 'string') return value;
  if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  if (typeof value === 'bigint') return value.toString();
  throw rowError(
    ctx,
    `field ${key} must be text, got ${Array.isArray(value) ? 'an array' : typeof value}`,
  );
}

/** An optional field copied into extra_info only when it is present. */
export function copyPresent(
  from: Record<string, unknown>,
  to: Record<string, unknown>,
  mapping: Readonly<Record<string, string>>,
): void {
  for (const [fromKey, toKey] of Object.entries(mapping)) {
    const value = from[fromKey];
    if (value !== undefined && value !== null) to[toKey] = value;
  }
}

/** Builds a SampleRow; `id` starts equal to `idx` and is reassigned when sets are combined. */
export function makeRow(fields: {
  idx: number;
  question: string;
  chain?: string;
  result: string;
  source: string;
  extra?: Record<string, unknown>;
}): SampleRow {
  return {
    id: fields.idx,
    question: fields.question,
    chain: fields.chain ?? '',
    result: fields.result,
    source: fields.source,
    // ground_truth and idx lead so a printed row reads like the seed's; extras cannot replace them.
    extra_info: { ground_truth: fields.result, idx: fields.idx, ...omitReserved(fields.extra) },
  };
}

function omitReserved(extra: Record<string, unknown> | undefined): Record<string, unknown> {
  if (!extra) return {};
  const { ground_truth: _g, idx: _i, ...rest } = extra;
  return rest;
}

/** Runs a per-row normaliser over rows, numbering them from `startIdx`. */
export function normalizeAll(
  rows: Iterable<unknown>,
  options: NormalizeOptions,
  one: (raw: unknown, idx: number, options: NormalizeOptions) => SampleRow,
): SampleRow[] {
  const out: SampleRow[] = [];
  let idx = options.startIdx ?? 0;
  for (const raw of rows) out.push(one(raw, idx++, options));
  return out;
}
