import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { tableFromIPC, tableToIPC } from 'apache-arrow';
import {
  Compression,
  readParquet,
  Table as WasmTable,
  WriterPropertiesBuilder,
  writeParquet,
} from 'parquet-wasm';
import { describe, expect, it } from 'vitest';
import { sharedPath, skipWithoutShared } from '../../../test-utils/shared.js';
import {
  arrowTableToRows,
  loadDataset,
  readParquetRows,
  readParquetTable,
  readSampleRows,
  rowsToArrowTable,
  rowsToParquetBuffer,
  writeArrowIpc,
  writeSampleRows,
} from '../src/index.js';

// parquet-wasm is the Rust arrow-rs Parquet implementation compiled to WebAssembly: a reader and
// writer written independently of hyparquet, so files crossing between them check both sides.

const rows: Record<string, unknown>[] = Array.from({ length: 120 }, (_, i) => ({
  id: `train_${i}`,
  question: `question ${i} with ünïcödé?`,
  golden_answers: Array.from({ length: (i % 3) + 1 }, (_, k) => `answer ${i}.${k}`),
  prompt: [{ content: `Question: ${i}`, role: 'user' }],
  reward_model: { ground_truth: { target: [`answer ${i}.0`] }, style: 'rule' },
  extra_info: { index: i, split: i % 2 ? 'train' : 'test', score: i / 3 },
  maybe: i % 4 === 0 ? null : `m${i}`,
}));

describe('Parquet interoperability with arrow-rs (parquet-wasm)', () => {
  it('arrow-rs reads the files this library writes (snappy, nested lists and structs)', () => {
    const bytes = rowsToParquetBuffer(rows, { rowGroupSize: 50 });
    const table = tableFromIPC(readParquet(bytes).intoIPCStream());
    expect(table.numRows).toBe(120);
    expect(String(table.schema.fields.find((f) => f.name === 'prompt')?.type)).toBe(
      'List<Struct<{content:Utf8, role:Utf8}>>',
    );
    expect(arrowTableToRows(table)).toEqual(rows);
  });

  it('arrow-rs reads the Arrow IPC stream files this library writes', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'flowgrpo-ipc-'));
    try {
      const path = join(dir, 'rows.arrows');
      await writeArrowIpc(path, rowsToArrowTable(rows), 'stream');
      const viaRust = WasmTable.fromIPCStream(readFileSync(path));
      expect(viaRust.recordBatches().reduce((n, b) => n + b.numRows, 0)).toBe(120);
      expect(arrowTableToRows(tableFromIPC(viaRust.intoIPCStream()))).toEqual(rows);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  for (const [name, codec] of [
    ['SNAPPY', Compression.SNAPPY],
    ['ZSTD', Compression.ZSTD],
    ['GZIP', Compression.GZIP],
    ['BROTLI', Compression.BROTLI],
    ['LZ4_RAW', Compression.LZ4_RAW],
  ] as const) {
    it(`reads a ${name} file written by arrow-rs, as rows and as an Arrow Table`, async () => {
      const source = rowsToArrowTable(rows);
      const props = new WriterPropertiesBuilder()
        .setCompression(codec)
        .setMaxRowGroupSize(40)
        .build();
      const bytes = writeParquet(WasmTable.fromIPCStream(tableToIPC(source, 'stream')), props);
      expect(await readParquetRows(bytes)).toEqual(rows);
      const table = await readParquetTable(bytes);
      expect(table.schema.fields.map((f) => String(f.type))).toEqual(
        source.schema.fields.map((f) => String(f.type)),
      );
      expect(arrowTableToRows(table)).toEqual(rows);
    });
  }
});

describe.skipIf(skipWithoutShared('real Parquet interop'))(
  'arrow-rs and this reader agree on real files',
  () => {
    it('Search-R1 NQ train (pyarrow-written, snappy): identical rows from both readers', async () => {
      const path = sharedPath('data', 'search-r1-nq', 'train-5000.parquet');
      const theirs = arrowTableToRows(
        tableFromIPC(readParquet(readFileSync(path)).intoIPCStream()),
      );
      expect(theirs).toHaveLength(5000);
      expect(await readParquetRows(path)).toEqual(theirs);
    });

    it('a SampleRow file written here reads the same through arrow-rs', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'flowgrpo-interop-'));
      try {
        const rows = [
          ...(await loadDataset(sharedPath('data', 'aime24', 'test.jsonl'), 'aime')),
          ...(await loadDataset(
            sharedPath('data', 'hotpotqa', 'dev-distractor-500.jsonl'),
            'hotpotqa',
            { limit: 20 },
          )),
        ];
        const path = join(dir, 'mix.parquet');
        await writeSampleRows(path, rows);
        const theirs = arrowTableToRows(
          tableFromIPC(readParquet(readFileSync(path)).intoIPCStream()),
        );
        expect(theirs).toEqual(await readParquetRows(path));
        expect(await readSampleRows(path)).toEqual(rows);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  },
);
