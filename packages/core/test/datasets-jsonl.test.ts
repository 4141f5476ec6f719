import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  DataFormatError,
  FileNotFoundError,
  readJsonlAll,
  readJsonlRecords,
  toJsonl,
  writeJsonl,
} from '../src/index.js';
import { testDir } from './temp-dir.js';

const dir = testDir('jsonl');

describe('JSONL', () => {
  it('skips blank lines, accepts CRLF and a BOM, and reports 1-based source lines', async () => {
    // Hand-written file: line 1 has a BOM, line 2 is blank, line 3 whitespace, CRLF endings.
    const path = join(dir, 'mixed.jsonl');
    writeFileSync(path, '\ufeff{"a":1}\r\n\r\n   \r\n{"a":[2,{"b":null}]}\r\n{"a":"é"}');
    const records = [];
    for await (const r of readJsonlRecords(path)) records.push(r);
    expect(records).toEqual([
      { value: { a: 1 }, line: 1 },
      { value: { a: [2, { b: null }] }, line: 4 },
      { value: { a: 'é' }, line: 5 },
    ]);
  });

  it('throws DataFormatError naming the file and the 1-based line of a bad record', async () => {
    const path = join(dir, 'bad.jsonl');
    writeFileSync(path, '{"ok":1}\n\n{"ok":2}\n{"broken": }\n{"ok":3}\n');
    const error = await readJsonlAll(path).catch((e: unknown) => e);
    expect(DataFormatError.isInstance(error)).toBe(true);
    const e = error as DataFormatError;
    expect(e.file).toBe(path);
    expect(e.line).toBe(4);
    expect(e.message).toContain(`${path}:line 4`);
  });

  it('reports a missing file as FileNotFoundError (not a format problem)', async () => {
    const error = await readJsonlAll(join(dir, 'absent.jsonl')).catch((e: unknown) => e);
    expect(FileNotFoundError.isInstance(error)).toBe(true);
    expect(DataFormatError.isInstance(error)).toBe(false);
    expect((error as FileNotFoundError).path).toBe(join(dir, 'absent.jsonl'));
  });

  it('round-trips values through writeJsonl, one document per line', async () => {
    const rows = [
      { q: 'line\nbreak', n: 1.5 },
      [1, 2],
      'text',
      null,
      { big: 2n ** 60n, small: 7n },
    ];
    const path = join(dir, 'nested', 'out.jsonl');
    await writeJsonl(path, rows);
    const back = await readJsonlAll(path);
    // bigints: exact ones as numbers, 2^60 (above 2^53) as its decimal string.
    expect(back).toEqual([
      { q: 'line\nbreak', n: 1.5 },
      [1, 2],
      'text',
      null,
      { big: '1152921504606846976', small: 7 },
    ]);
    expect(toJsonl([{ a: 1 }, { b: 2 }])).toBe('{"a":1}\n{"b":2}\n');
  });
});
