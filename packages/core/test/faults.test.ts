import { readdirSync, readlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  DataFormatError,
  loadDataset,
  openSafetensors,
  readJsonl,
  readParquetRows,
  readSafetensors,
  rowsToParquetBuffer,
  SafetensorsError,
  writeSafetensors,
} from '../src/index.js';
import { testDir } from './temp-dir.js';

// The fault matrix of @flowgrpo/core: corrupt safetensors, JSONL and Parquet files. Each case
// states the expected behaviour — a typed error naming the file (and the line, tensor or reason)
// — and then checks that nothing leaked (no file descriptor stays open on the corrupt file) and
// that the run continues (a good file read right after works).

const dir = testDir('faults');

/** Descriptors of this process open on files of `dir` (a leak shows up here). */
function openFilesInDir(): string[] {
  const open: string[] = [];
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      const target = readlinkSync(`/proc/self/fd/${fd}`);
      if (target.startsWith(dir)) open.push(target);
    } catch {
      // closed meanwhile
    }
  }
  return open;
}

/**
 * Waits until no descriptor is open on `dir`: a stream destroyed by an error closes its file
 * asynchronously, a leaked one never does.
 */
async function expectNoOpenFiles(): Promise<void> {
  for (let i = 0; i < 100 && openFilesInDir().length > 0; i++) {
    await new Promise((r) => setTimeout(r, 20));
  }
  expect(openFilesInDir()).toEqual([]);
}

function file(name: string, bytes: Uint8Array | string): string {
  const path = join(dir, name);
  writeFileSync(path, bytes);
  return path;
}

/** A safetensors file laid out by hand: u64 header length, JSON header, data. */
function rawSafetensors(header: unknown, data = new Uint8Array(0), n?: bigint): Uint8Array {
  const json = new TextEncoder().encode(JSON.stringify(header));
  const out = new Uint8Array(8 + json.byteLength + data.byteLength);
  new DataView(out.buffer).setBigUint64(0, n ?? BigInt(json.byteLength), true);
  out.set(json, 8);
  out.set(data, 8 + json.byteLength);
  return out;
}

const goodTensors = { w: { dtype: 'F32' as const, shape: [2], data: Float32Array.from([1, 2]) } };

describe('corrupt safetensors', () => {
  // Expected: SafetensorsError with the file and a reason; no allocation sized by the header's
  // claims; no descriptor left open; the next good file reads.
  const f32 = { dtype: 'F32', shape: [2], data_offsets: [0, 8] };
  it.each([
    ['an empty file', () => new Uint8Array(0), 'truncated'],
    ['random bytes', () => Uint8Array.from({ length: 1024 }, (_, i) => (i * 131 + 7) & 255), null],
    [
      'a header length of 2^63',
      () => rawSafetensors({}, new Uint8Array(0), 2n ** 63n),
      'header_out_of_bounds',
    ],
    ['a header that is not JSON', () => rawSafetensors('x').fill(0x7b, 8), 'invalid_json'],
    [
      'a tensor claiming 2^31 × 2^31 floats in 8 bytes',
      () =>
        rawSafetensors(
          { w: { dtype: 'F32', shape: [2 ** 31, 2 ** 31], data_offsets: [0, 8] } },
          new Uint8Array(8),
        ),
      'size_mismatch',
    ],
    [
      'data cut short',
      () =>
        rawSafetensors(
          { a: f32, b: { ...f32, data_offsets: [8, 16] } },
          new Uint8Array(16),
        ).subarray(0, -3),
      'truncated',
    ],
    [
      'negative offsets',
      () => rawSafetensors({ w: { ...f32, data_offsets: [-8, 0] } }, new Uint8Array(8)),
      'invalid_header',
    ],
    [
      'an unknown dtype',
      () => rawSafetensors({ w: { ...f32, dtype: 'F256' } }, new Uint8Array(8)),
      'unknown_dtype',
    ],
  ] as const)('%s', async (label, bytes, reason) => {
    const path = file(`${label.replace(/\W+/g, '-')}.safetensors`, bytes());
    for (const read of [openSafetensors, readSafetensors]) {
      const error = await read(path).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(SafetensorsError.isInstance(error), String(error)).toBe(true);
      expect((error as SafetensorsError).file).toBe(path);
      if (reason) expect((error as SafetensorsError).reason).toBe(reason);
    }
    await expectNoOpenFiles();
    const good = join(dir, 'good.safetensors');
    await writeSafetensors(good, goodTensors);
    const back = await readSafetensors(good);
    expect(Array.from(back.tensors.get('w')!.data as Float32Array)).toEqual([1, 2]);
  });
});

describe('corrupt JSONL', () => {
  const readAll = async (path: string) => {
    const rows: unknown[] = [];
    for await (const r of readJsonl(path)) rows.push(r);
    return rows;
  };

  it.each([
    ['a bad record mid-file', '{"a":1}\n{"a": }\n{"a":3}\n', 2],
    ['a cut last line (no newline)', '{"a":1}\n{"a":2}\n{"a": [1, 2', 3],
    ['binary bytes', '\u0000\u0001\u0002\n', 1],
  ] as const)('%s: DataFormatError with the file and line', async (label, text, line) => {
    const path = file(`${label.replace(/\W+/g, '-')}.jsonl`, text);
    const error = await readAll(path).catch((e: unknown) => e);
    expect(DataFormatError.isInstance(error)).toBe(true);
    expect(error).toMatchObject({ file: path, line });
    await expectNoOpenFiles();
    expect(await readAll(file('good.jsonl', '{"a":1}\n'))).toEqual([{ a: 1 }]);
  });

  it('invalid UTF-8 inside a string: decoded with U+FFFD, the read goes on', async () => {
    // Expected (documented behaviour): one bad byte does not end a long read; the row keeps a
    // replacement character where the byte was.
    const bytes = Buffer.concat([
      Buffer.from('{"a":"x'),
      Buffer.from([0xff]),
      Buffer.from('y"}\n{"a":"z"}\n'),
    ]);
    expect(await readAll(file('utf8.jsonl', bytes))).toEqual([{ a: 'x\ufffdy' }, { a: 'z' }]);
  });

  it('a record of the wrong shape for its dataset: DataFormatError naming the line', async () => {
    const path = file('gsm8k.jsonl', '{"question":"q","answer":"#### 1"}\n42\n');
    const error = await loadDataset(path, 'gsm8k').catch((e: unknown) => e);
    expect(DataFormatError.isInstance(error)).toBe(true);
    expect(error).toMatchObject({ file: path, line: 2 });
    await expectNoOpenFiles();
  });
});

describe('corrupt Parquet', () => {
  const good = rowsToParquetBuffer([
    { question: 'q1', answer: 'a1' },
    { question: 'q2', answer: 'a2' },
  ]);
  const withFooterLength = (n: number) => {
    const copy = Uint8Array.from(good);
    new DataView(copy.buffer).setUint32(copy.byteLength - 8, n, true);
    return copy;
  };
  it.each([
    ['an empty file', () => new Uint8Array(0)],
    ['text, not Parquet', () => new TextEncoder().encode('this is not parquet at all')],
    [
      'magic at both ends, garbage between',
      () => new TextEncoder().encode(`PAR1${'x'.repeat(64)}PAR1`),
    ],
    ['the first half of a good file', () => good.subarray(0, Math.floor(good.byteLength / 2))],
    ['a footer length of 4 GiB', () => withFooterLength(0xffffffff)],
    ['a footer length of zero', () => withFooterLength(0)],
  ] as const)('%s: DataFormatError with the file', async (label, bytes) => {
    const path = file(`${label.replace(/\W+/g, '-')}.parquet`, bytes());
    const error = await readParquetRows(path).catch((e: unknown) => e);
    expect(DataFormatError.isInstance(error), String(error)).toBe(true);
    expect((error as DataFormatError).file).toBe(path);
    // Through the dataset loader too (it reads the schema first).
    const viaLoader = await loadDataset(path, 'gsm8k').catch((e: unknown) => e);
    expect(DataFormatError.isInstance(viaLoader), String(viaLoader)).toBe(true);
    await expectNoOpenFiles();
    const back = await readParquetRows(file('good.parquet', good));
    expect(back).toEqual([
      { question: 'q1', answer: 'a1' },
      { question: 'q2', answer: 'a2' },
    ]);
  });
});
