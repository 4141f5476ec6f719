import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { sharedPath, skipWithoutShared } from '../../../test-utils/shared.js';
import {
  arrowTableToRows,
  type ColumnField,
  DataFormatError,
  inferFields,
  readArrowIpc,
  readParquetFields,
  readParquetMetadata,
  readParquetRows,
  readParquetTable,
  rowsToArrowTable,
  rowsToParquetBuffer,
  writeArrowIpc,
  writeParquet,
  writeParquetTable,
} from '../src/index.js';
import { testDir } from './temp-dir.js';

const dir = testDir('parquet');

// Generated rows covering every nested shape the datasets use: list of strings, list of structs,
// struct of struct of list, int64 beyond 2^31, floats, booleans, nulls and missing keys.
const rows: Record<string, unknown>[] = Array.from({ length: 1200 }, (_, i) => ({
  id: `row_${i}`,
  n: i * 1_000_003,
  score: i / 7,
  flag: i % 3 === 0,
  answers: i % 5 === 0 ? [] : Array.from({ length: (i % 4) + 1 }, (_, k) => `a${i}-${k}`),
  prompt: [
    { content: `question ${i}?`, role: 'user' },
    { content: i % 2 ? null : 'sys', role: 'system' },
  ],
  reward_model: { ground_truth: { target: [`t${i}`] }, style: 'rule' },
  ...(i % 10 === 0 ? {} : { note: `n${i}` }),
}));

describe('Parquet and Arrow on generated data', () => {
  it('infers nested column types, with missing keys made nullable', () => {
    const fields = inferFields(rows);
    const byName = Object.fromEntries(fields.map((f) => [f.name, f]));
    expect(byName.n).toEqual({ name: 'n', type: { kind: 'int64' }, nullable: false });
    expect(byName.score?.type).toEqual({ kind: 'float64' });
    expect(byName.note?.nullable).toBe(true);
    expect(byName.answers?.type).toEqual({
      kind: 'list',
      // List elements are always nullable, as pyarrow writes them.
      element: { name: 'element', type: { kind: 'utf8' }, nullable: true },
    });
    expect(byName.prompt?.type).toMatchObject({
      kind: 'list',
      element: {
        type: {
          kind: 'struct',
          fields: [
            { name: 'content', type: { kind: 'utf8' }, nullable: true },
            { name: 'role', type: { kind: 'utf8' }, nullable: false },
          ],
        },
      },
    });
    expect(() => inferFields([{ a: 'x' }, { a: ['x'] }])).toThrow(
      /mixed value types utf8 and list<utf8>/,
    );
  });

  it('round-trips rows through a snappy Parquet file, across several row groups', async () => {
    const path = join(dir, 'gen.parquet');
    await writeParquet(path, rows, { rowGroupSize: 500, metadata: { origin: 'test' } });
    const meta = await readParquetMetadata(path);
    expect(meta.num_rows).toBe(1200n);
    expect(meta.row_groups.length).toBe(3);
    expect(meta.row_groups[0]?.columns[0]?.meta_data?.codec).toBe('SNAPPY');
    expect(meta.key_value_metadata).toContainEqual({ key: 'origin', value: 'test' });
    const back = await readParquetRows(path);
    // Keys absent from a row read back as null: the expected rows say so explicitly.
    expect(back).toEqual(rows.map((r) => ({ ...r, note: r.note ?? null })));
  });

  it('reads selected columns and row ranges', async () => {
    const buffer = rowsToParquetBuffer(rows, { rowGroupSize: 1000 });
    const part = await readParquetRows(buffer, {
      columns: ['id', 'answers'],
      rowStart: 995,
      rowEnd: 1003,
    });
    expect(part).toEqual(rows.slice(995, 1003).map((r) => ({ id: r.id, answers: r.answers })));
    await expect(readParquetRows(buffer, { columns: ['nope'] })).rejects.toThrow(
      /no column named nope/,
    );
  });

  it('returns INT64 as bigint on request and refuses to round one silently', async () => {
    const big = 2n ** 62n + 1n;
    const buffer = rowsToParquetBuffer([{ v: big }, { v: 5n }]);
    expect(await readParquetRows(buffer, { int64: 'bigint' })).toEqual([{ v: big }, { v: 5n }]);
    await expect(readParquetRows(buffer)).rejects.toThrow(/not exactly representable/);
  });

  it('writes the standard three-level LIST layout, as pyarrow does', async () => {
    const buffer = rowsToParquetBuffer([{ golden_answers: ['x'] }]);
    const meta = await readParquetMetadata(buffer);
    expect(meta.schema.slice(1).map((e) => [e.name, e.repetition_type, e.converted_type])).toEqual([
      ['golden_answers', 'REQUIRED', 'LIST'],
      ['list', 'REPEATED', undefined],
      ['element', 'OPTIONAL', 'UTF8'],
    ]);
  });

  it('converts rows to an Arrow Table and back, and through IPC file and stream formats', async () => {
    const table = rowsToArrowTable(rows);
    expect(table.numRows).toBe(1200);
    expect(String(table.schema.fields.find((f) => f.name === 'prompt')?.type)).toBe(
      'List<Struct<{content:Utf8, role:Utf8}>>',
    );
    const expected = rows.map((r) => ({ ...r, note: r.note ?? null }));
    expect(arrowTableToRows(table)).toEqual(expected);
    for (const format of ['file', 'stream'] as const) {
      const path = join(dir, `gen.${format}.arrow`);
      await writeArrowIpc(path, table, format);
      const bytes = readFileSync(path);
      // Arrow columnar spec: the file format opens with "ARROW1", a stream with 0xFFFFFFFF.
      if (format === 'file') expect(bytes.subarray(0, 6).toString('latin1')).toBe('ARROW1');
      else expect(bytes.readUInt32LE(0)).toBe(0xffffffff);
      const back = await readArrowIpc(path);
      expect(back.schema.fields.map((f) => [f.name, String(f.type), f.nullable])).toEqual(
        table.schema.fields.map((f) => [f.name, String(f.type), f.nullable]),
      );
      expect(arrowTableToRows(back)).toEqual(expected);
    }
  });

  it('writes an Arrow Table to Parquet and reads Parquet into the same Arrow schema', async () => {
    const table = rowsToArrowTable(rows);
    const path = join(dir, 'from-arrow.parquet');
    await writeParquetTable(path, table);
    const back = await readParquetTable(path);
    expect(back.schema.fields.map((f) => [f.name, String(f.type), f.nullable])).toEqual(
      table.schema.fields.map((f) => [f.name, String(f.type), f.nullable]),
    );
    expect(arrowTableToRows(back)).toEqual(arrowTableToRows(table));
  });

  it('honours explicit fields (a whole-valued float column stays DOUBLE)', async () => {
    const fields: ColumnField[] = [{ name: 'x', type: { kind: 'float64' }, nullable: false }];
    const buffer = rowsToParquetBuffer([{ x: 1 }, { x: 2 }], { fields });
    expect((await readParquetMetadata(buffer)).schema[1]?.type).toBe('DOUBLE');
    expect(await readParquetFields(buffer)).toEqual(fields);
  });

  it('rejects corrupt input with DataFormatError', async () => {
    const path = join(dir, 'corrupt.parquet');
    writeFileSync(path, 'this is not parquet at all');
    const e1 = await readParquetRows(path).catch((e: unknown) => e);
    expect(DataFormatError.isInstance(e1)).toBe(true);
    expect((e1 as DataFormatError).file).toBe(path);
    const e2 = await readArrowIpc(path).catch((e: unknown) => e);
    expect(DataFormatError.isInstance(e2)).toBe(true);
    expect(() =>
      rowsToParquetBuffer([{ a: 1 }], {
        fields: [{ name: 'a', type: { kind: 'utf8' }, nullable: false }],
      }),
    ).toThrow(DataFormatError);
  });
});

describe.skipIf(skipWithoutShared('Search-R1 Parquet'))(
  'Search-R1 NQ Parquet (real, snappy, nested)',
  () => {
    it('parses the nested schema pyarrow wrote', async () => {
      const fields = await readParquetFields(
        sharedPath('data', 'search-r1-nq', 'test-1000.parquet'),
      );
      expect(fields.map((f) => f.name)).toEqual([
        'id',
        'question',
        'golden_answers',
        'data_source',
        'prompt',
        'ability',
        'reward_model',
        'extra_info',
      ]);
      const table = await readParquetTable(sharedPath('data', 'search-r1-nq', 'test-1000.parquet'));
      expect(table.schema.fields.map((f) => String(f.type))).toEqual([
        'Utf8',
        'Utf8',
        'List<Utf8>',
        'Utf8',
        'List<Struct<{content:Utf8, role:Utf8}>>',
        'Utf8',
        'Struct<{ground_truth:Struct<{target:List<Utf8>}>, style:Utf8}>',
        'Struct<{index:Int64, split:Utf8}>',
      ]);
      expect(table.numRows).toBe(1000);
    });

    it('reads rows whose questions and answers match NQ-open dev (an independent copy)', async () => {
      const test = await readParquetRows(sharedPath('data', 'search-r1-nq', 'test-1000.parquet'));
      expect(test).toHaveLength(1000);
      // FlashRAG's NQ test split is NQ-open dev: the same questions (plus '?') and answer lists.
      const dev = readFileSync(sharedPath('data', 'nq-open', 'dev.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { question: string; answer: string[] });
      const devByQuestion = new Map(dev.map((d) => [`${d.question}?`, d.answer]));
      test.forEach((row, i) => {
        expect(row.id).toBe(`test_${i}`);
        expect(row.golden_answers).toEqual(devByQuestion.get(row.question as string));
        const rm = row.reward_model as { ground_truth: { target: string[] }; style: string };
        expect(rm.ground_truth.target).toEqual(row.golden_answers);
        expect(rm.style).toBe('rule');
        expect(row.extra_info).toEqual({ index: i, split: 'test' });
        const prompt = row.prompt as { content: string; role: string }[];
        expect(prompt).toHaveLength(1);
        expect(prompt[0]?.role).toBe('user');
        expect(prompt[0]?.content.endsWith(`Question: ${row.question}\n`)).toBe(true);
      });
    });

    it('reads the 5,000-row train split (first row as printed in the seed)', async () => {
      const train = await readParquetRows(sharedPath('data', 'search-r1-nq', 'train-5000.parquet'));
      expect(train).toHaveLength(5000);
      // The seed prints FlashRAG nq train_0: "total number of death row inmates in the us", ["2,718"].
      expect(train[0]).toMatchObject({
        id: 'train_0',
        question: 'total number of death row inmates in the us?',
        golden_answers: ['2,718'],
        data_source: 'nq',
      });
      expect(train[4999]?.extra_info).toEqual({ index: 4999, split: 'train' });
    });
  },
);
