import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  DataFormatError,
  FileNotFoundError,
  loadDataset,
  readJsonlAll,
  readParquetRows,
  readSampleRows,
} from '../src/index.js';
import { testDir } from './temp-dir.js';

// A path that does not exist is FileNotFoundError (code FILE_NOT_FOUND, `path` set) from every
// dataset reader — not DataFormatError, which stays for files that exist but cannot be read.

const dir = testDir('file-not-found');

async function failure(run: () => Promise<unknown>): Promise<unknown> {
  return run().then(
    () => undefined,
    (e: unknown) => e,
  );
}

describe('a missing dataset file', () => {
  const readers: [string, (path: string) => Promise<unknown>][] = [
    ['readJsonlAll', (p) => readJsonlAll(`${p}.jsonl`)],
    ['readParquetRows', (p) => readParquetRows(`${p}.parquet`)],
    ['readSampleRows (.parquet)', (p) => readSampleRows(`${p}.parquet`)],
    ['readSampleRows (.jsonl)', (p) => readSampleRows(`${p}.jsonl`)],
    ['loadDataset (.jsonl)', (p) => loadDataset(`${p}.jsonl`, 'gsm8k')],
    ['loadDataset (.parquet)', (p) => loadDataset(`${p}.parquet`, 'nq')],
  ];
  it.each(readers)('%s throws FileNotFoundError naming the path', async (_name, read) => {
    const missing = join(dir, 'nope');
    const e = await failure(() => read(missing));
    expect(FileNotFoundError.isInstance(e)).toBe(true);
    expect(DataFormatError.isInstance(e)).toBe(false);
    const error = e as FileNotFoundError;
    expect(error.code).toBe('FILE_NOT_FOUND');
    expect(error.path.startsWith(missing)).toBe(true);
    expect(error.message).toBe(`file not found: ${error.path}`);
  });

  it('a file that exists but is not what it claims stays DataFormatError', async () => {
    const bad = join(dir, 'bad.parquet');
    writeFileSync(bad, 'not parquet at all');
    const e = await failure(() => readParquetRows(bad));
    expect(DataFormatError.isInstance(e)).toBe(true);
    expect(FileNotFoundError.isInstance(e)).toBe(false);
  });
});
