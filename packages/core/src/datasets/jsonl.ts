import { createReadStream } from 'node:fs';
import { createInterface } from 'node:readline';
import { writeFileAtomically } from '../atomic-file.js';
import { DataFormatError, FileNotFoundError, isNotFoundError } from '../errors.js';

/** One parsed JSONL record with the 1-based line it came from (blank lines still count). */
export interface JsonlRecord<T = unknown> {
  value: T;
  line: number;
}

/**
 * Streams a JSONL file one line at a time, so files larger than memory can be read.
 * Blank (whitespace-only) lines are skipped; a line that is not valid JSON throws
 * DataFormatError naming the file and its 1-based line number; a missing file throws
 * FileNotFoundError.
 */
export async function* readJsonlRecords<T = unknown>(path: string): AsyncGenerator<JsonlRecord<T>> {
  const input = createReadStream(path, { encoding: 'utf8' });
  const lines = createInterface({ input, crlfDelay: Number.POSITIVE_INFINITY });
  let line = 0;
  try {
    for await (const text of lines) {
      line++;
      // A UTF-8 byte-order mark is legal at the start of a file written by Windows tools.
      const body = line === 1 && text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
      if (body.trim() === '') continue;
      let value: T;
      try {
        value = JSON.parse(body) as T;
      } catch (cause) {
        const reason = cause instanceof Error ? cause.message : String(cause);
        throw new DataFormatError(`invalid JSON: ${reason}`, { file: path, line }, { cause });
      }
      yield { value, line };
    }
  } catch (error) {
    if (DataFormatError.isInstance(error)) throw error;
    if (isNotFoundError(error)) throw new FileNotFoundError(path, { cause: error });
    throw new DataFormatError(
      `cannot read: ${error instanceof Error ? error.message : String(error)}`,
      { file: path },
      { cause: error },
    );
  } finally {
    lines.close();
    input.destroy();
  }
}

/** Streams the parsed values of a JSONL file (see readJsonlRecords). */
export async function* readJsonl<T = unknown>(path: string): AsyncGenerator<T> {
  for await (const record of readJsonlRecords<T>(path)) yield record.value;
}

/** Reads a whole JSONL file into an array. */
export async function readJsonlAll<T = unknown>(path: string): Promise<T[]> {
  const rows: T[] = [];
  for await (const value of readJsonl<T>(path)) rows.push(value);
  return rows;
}

/** Serialises values as JSONL text: one JSON document per line, newline-terminated. */
export function toJsonl(rows: Iterable<unknown>): string {
  let out = '';
  let index = 0;
  for (const row of rows) {
    const text = JSON.stringify(row, bigintToJson);
    if (text === undefined) {
      throw new DataFormatError(`row ${index} cannot be written as JSON (${typeof row})`);
    }
    out += `${text}\n`;
    index++;
  }
  return out;
}

/**
 * Writes values as a JSONL file, creating the parent folder when needed: whole or not at all
 * (written beside it and renamed over it), so a reader never sees half the rows.
 */
export async function writeJsonl(path: string, rows: Iterable<unknown>): Promise<void> {
  await writeFileAtomically(path, toJsonl(rows));
}

// Parquet INT64 columns arrive as bigint; JSON has no bigint, so write them as numbers when exact
// and as decimal strings otherwise (never silently rounded).
function bigintToJson(_key: string, value: unknown): unknown {
  if (typeof value !== 'bigint') return value;
  return value >= BigInt(Number.MIN_SAFE_INTEGER) && value <= BigInt(Number.MAX_SAFE_INTEGER)
    ? Number(value)
    : value.toString();
}
