import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SHARED_DIR, sharedPath, skipWithoutShared } from '../../../test-utils/shared.js';
import { JSON_EXTRA_KEYS_METADATA } from '../src/datasets/sample-row-files.js';
import {
  batches,
  ConfigError,
  combineDatasets,
  countBySource,
  epochOrder,
  FileNotFoundError,
  nextBatchPosition,
  normalizeHotpotQa,
  normalizeMath500,
  normalizeNq,
  prepareCombinedTrainSet,
  readParquetFields,
  readParquetMetadata,
  readSampleRows,
  type SampleRow,
  shuffleRows,
  stepsPerEpoch,
  writeParquet,
  writeSampleRows,
} from '../src/index.js';
import { testDir } from './temp-dir.js';

const dir = testDir('combine');

function rowsOf(source: string, n: number): SampleRow[] {
  return Array.from({ length: n }, (_, idx) => ({
    id: idx,
    question: `${source} question ${idx}`,
    chain: '',
    result: `${idx}`,
    source,
    extra_info: { ground_truth: `${idx}`, idx },
  }));
}

const key = (r: SampleRow) => `${r.source}#${r.extra_info.idx}`;

describe('combineDatasets', () => {
  const a = rowsOf('a', 1000);
  const b = rowsOf('b', 1000);

  it('concatenates, shuffles with a seed and renumbers ids 0..N-1', () => {
    const combined = combineDatasets([a, b], { seed: 42 });
    expect(combined.map((r) => r.id)).toEqual(Array.from({ length: 2000 }, (_, i) => i));
    // Every input row appears exactly once, with its source and source index intact.
    expect(new Set(combined.map(key)).size).toBe(2000);
    expect([...combined.map(key)].sort()).toEqual([...a, ...b].map(key).sort());
    expect(countBySource(combined)).toEqual({ a: 1000, b: 1000 });
    // Interleaved: the first half holds a hypergeometric number of 'a' rows, mean 500 and
    // sd ≈ 11.2; 440–560 is over five sd either side.
    const firstHalfA = combined.slice(0, 1000).filter((r) => r.source === 'a').length;
    expect(firstHalfA).toBeGreaterThan(440);
    expect(firstHalfA).toBeLessThan(560);
    // The inputs are left untouched.
    expect(a[0]?.id).toBe(0);
    expect(b.map((r) => r.id)).toEqual(Array.from({ length: 1000 }, (_, i) => i));
  });

  it('is reproducible for a seed, different across seeds, and ordered when shuffle is off', () => {
    const x = combineDatasets([a, b], { seed: 42 }).map(key);
    expect(combineDatasets([a, b], { seed: 42 }).map(key)).toEqual(x);
    expect(combineDatasets([a, b], { seed: 43 }).map(key)).not.toEqual(x);
    expect(combineDatasets([a, b]).map(key)).toEqual(x); // default seed is 42, the seeds' value
    expect(combineDatasets([a, b], { shuffle: false }).map(key)).toEqual([...a, ...b].map(key));
    expect(shuffleRows([1, 2, 3], 'seed')).toHaveLength(3);
  });
});

describe('batches', () => {
  const data = Array.from({ length: 10 }, (_, i) => i);

  it('covers each epoch exactly once, in a different order per epoch', () => {
    // 10 rows in batches of 3: ceil(10/3) = 4 steps (the last one holds 1 row).
    expect(stepsPerEpoch(10, 3)).toBe(4);
    const all = [...batches(data, { batchSize: 3, epochs: 3, seed: 7 })];
    expect(all.map((b) => [b.epoch, b.step, b.globalStep, b.rows.length])).toEqual([
      [0, 0, 0, 3],
      [0, 1, 1, 3],
      [0, 2, 2, 3],
      [0, 3, 3, 1],
      [1, 0, 4, 3],
      [1, 1, 5, 3],
      [1, 2, 6, 3],
      [1, 3, 7, 1],
      [2, 0, 8, 3],
      [2, 1, 9, 3],
      [2, 2, 10, 3],
      [2, 3, 11, 1],
    ]);
    const perEpoch = [0, 1, 2].map((e) => all.filter((b) => b.epoch === e).flatMap((b) => b.rows));
    for (const order of perEpoch) expect([...order].sort((x, y) => x - y)).toEqual(data);
    expect(perEpoch[0]).not.toEqual(perEpoch[1]);
    expect(perEpoch[1]).not.toEqual(perEpoch[2]);
    expect(all[0]?.rows).toEqual(Array.from(all[0]!.indices, (i) => data[i]));
  });

  it('drops the short last batch with dropLast and keeps input order without shuffle', () => {
    expect(stepsPerEpoch(10, 3, true)).toBe(3);
    const dropped = [...batches(data, { batchSize: 3, epochs: 2, dropLast: true, shuffle: false })];
    expect(dropped.map((b) => b.rows)).toEqual([
      [0, 1, 2],
      [3, 4, 5],
      [6, 7, 8],
      [0, 1, 2],
      [3, 4, 5],
      [6, 7, 8],
    ]);
    expect([...batches([], { batchSize: 2 })]).toEqual([]);
    expect([...batches(data, { batchSize: 4, epochs: 0 })]).toEqual([]);
  });

  it('depends only on (seed, epoch), so a resumed run continues exactly', () => {
    const full = [...batches(data, { batchSize: 3, epochs: 3, seed: 'run-1' })];
    const resumed = [
      ...batches(data, { batchSize: 3, epochs: 3, seed: 'run-1', start: { epoch: 1, step: 2 } }),
    ];
    expect(resumed).toEqual(full.slice(6));
    expect(Array.from(epochOrder(10, 2, { seed: 'run-1' }))).toEqual(
      full.filter((b) => b.epoch === 2).flatMap((b) => b.rows),
    );
    expect(nextBatchPosition({ epoch: 0, step: 3 }, 4)).toEqual({ epoch: 1, step: 0 });
    expect(nextBatchPosition({ epoch: 0, step: 1 }, 4)).toEqual({ epoch: 0, step: 2 });
    const endless = batches(data, { batchSize: 5, epochs: Number.POSITIVE_INFINITY });
    for (let i = 0; i < 7; i++) endless.next();
    expect(endless.next().value).toMatchObject({ epoch: 3, step: 1 });
  });

  it('gives uniform, independent orders to consecutive epochs across seeds', () => {
    // (epoch 0 order, epoch 1 order) of 3 rows takes 6 × 6 = 36 values, each with probability
    // 1/36 if the epoch streams are uniform and independent. Over 3,600 seeds the chi-square
    // statistic (35 df) exceeds 90.5 with probability 1e-6 (Wilson–Hilferty approximation).
    const counts = new Map<string, number>();
    const seeds = 3600;
    for (let seed = 0; seed < seeds; seed++) {
      const k = `${epochOrder(3, 0, { seed }).join('')}|${epochOrder(3, 1, { seed }).join('')}`;
      counts.set(k, (counts.get(k) ?? 0) + 1);
    }
    expect(counts.size).toBe(36);
    const expected = seeds / 36;
    let chi2 = 0;
    for (const c of counts.values()) chi2 += (c - expected) ** 2 / expected;
    expect(chi2).toBeLessThan(90.5);
  });

  it('rejects bad settings with ConfigError', () => {
    expect(() => [...batches(data, { batchSize: 0 })]).toThrow(ConfigError);
    expect(() => [...batches(data, { batchSize: 2.5 })]).toThrow(/batchSize/);
    expect(() => [...batches(data, { batchSize: 3, start: { epoch: 0, step: 5 } })]).toThrow(
      /start.step/,
    );
  });
});

describe('SampleRow files and prepareCombinedTrainSet (generated data)', () => {
  it('writes and reads SampleRows with heterogeneous extra_info as Parquet and JSONL', async () => {
    const nq = normalizeNq([
      { id: 'x', question: 'q1', golden_answers: ['a', 'b'] },
      { question: 'q2', answer: ['c'] },
    ]);
    const math = rowsOf('math', 2).map((r) => ({
      ...r,
      extra_info: { ...r.extra_info, difficulty: 4.5 },
    }));
    const rows = combineDatasets([nq, math], { seed: 1 });
    for (const name of ['rows.parquet', 'rows.jsonl']) {
      const path = join(dir, name);
      await writeSampleRows(path, rows);
      expect(await readSampleRows(path)).toEqual(rows);
    }
    const fields = await readParquetFields(join(dir, 'rows.parquet'));
    const extra = fields.find((f) => f.name === 'extra_info');
    // The union of both sources' keys, in first-seen order (which depends on the shuffle).
    const names = extra?.type.kind === 'struct' ? extra.type.fields.map((f) => f.name) : [];
    expect(names.slice(0, 2)).toEqual(['ground_truth', 'idx']);
    expect([...names].sort()).toEqual([
      'difficulty',
      'golden_answers',
      'ground_truth',
      'idx',
      'original_id',
    ]);
    const bad = join(dir, 'bad.jsonl');
    writeFileSync(bad, `${JSON.stringify(rows[0])}\n{"id":-1}\n`);
    // The second row is line 2 of the JSONL file, and row 1 (0-based, as datasets' ds[1]) of a
    // Parquet file.
    await expect(readSampleRows(bad)).rejects.toThrow(`${bad}:line 2: not a SampleRow: `);
    const badParquet = join(dir, 'bad.parquet');
    await writeParquet(badParquet, [rows[0]!, { ...rows[0]!, id: -1 }]);
    await expect(readSampleRows(badParquet)).rejects.toThrow(
      `${badParquet}:row 1: not a SampleRow: id: `,
    );
  });

  it('stores an extra_info key whose type differs across sources as JSON, and restores it', async () => {
    // MATH-500 levels are integers, HotpotQA levels are words: one Parquet column cannot hold both.
    const math = normalizeMath500([{ problem: 'p', answer: '1', level: 2, subject: 'Algebra' }]);
    const hotpot = normalizeHotpotQa([
      { question: 'q', answer: 'a', level: 'hard', type: 'bridge' },
    ]);
    const rows = combineDatasets([math, hotpot], { shuffle: false });
    const path = join(dir, 'mixed-levels.parquet');
    await writeSampleRows(path, rows);
    const meta = await readParquetMetadata(path);
    expect(meta.key_value_metadata).toContainEqual({
      key: JSON_EXTRA_KEYS_METADATA,
      value: '["level"]',
    });
    expect(await readSampleRows(path)).toEqual(rows);
    expect((await readSampleRows(path))[0]?.extra_info.level).toBe(2);
  });

  it('prepares combined_train.parquet and val.parquet from generated raw files', async () => {
    const raw = join(dir, 'raw');
    const gsm = join(raw, 'gsm.jsonl');
    const nq = join(raw, 'nq.jsonl');
    const aime = join(raw, 'aime.jsonl');
    const { mkdirSync } = await import('node:fs');
    mkdirSync(raw, { recursive: true });
    writeFileSync(
      gsm,
      Array.from({ length: 30 }, (_, i) =>
        JSON.stringify({ question: `g${i}`, answer: `r\n#### ${i}` }),
      ).join('\n'),
    );
    writeFileSync(
      nq,
      Array.from({ length: 20 }, (_, i) =>
        JSON.stringify({ question: `n${i}`, answer: [`x${i}`] }),
      ).join('\n'),
    );
    writeFileSync(aime, [JSON.stringify({ id: 1, problem: 'p', answer: '007' })].join('\n'));
    const out = join(dir, 'out');
    const result = await prepareCombinedTrainSet({
      train: [
        { path: gsm, format: 'gsm8k' },
        { path: nq, format: 'nq', limit: 15 },
      ],
      validation: [{ path: aime, format: 'aime' }],
      seed: 5,
      outDir: out,
    });
    expect(result).toMatchObject({
      trainPath: join(out, 'combined_train.parquet'),
      valPath: join(out, 'val.parquet'),
      trainRows: 45,
      counts: { gsm8k: 30, nq: 15 },
      valRows: 1,
      valCounts: { aime: 1 },
    });
    const train = await readSampleRows(result.trainPath);
    expect(train).toEqual(result.train);
    expect(train.map((r) => r.id)).toEqual(Array.from({ length: 45 }, (_, i) => i));
    const val = await readSampleRows(result.valPath!);
    expect(val).toEqual([expect.objectContaining({ id: 0, result: '7', source: 'aime' })]);
    await expect(prepareCombinedTrainSet({ outDir: out })).rejects.toThrow(ConfigError);
    await expect(
      prepareCombinedTrainSet({
        train: [{ path: join(raw, 'absent.jsonl'), format: 'nq' }],
        outDir: out,
      }),
    ).rejects.toSatisfy((e: unknown) => FileNotFoundError.isInstance(e));
  });
});

describe.skipIf(skipWithoutShared('combined training set from ../shared/data'))(
  'prepareCombinedTrainSet on the shared data folder',
  () => {
    it('mixes GSM8K train and Search-R1 NQ train, validates on AIME24', async () => {
      const out = join(dir, 'shared-out');
      const result = await prepareCombinedTrainSet({ dataDir: sharedPath('data'), outDir: out });
      // 7,473 GSM8K + 5,000 Search-R1 NQ train rows; 30 AIME 2024 problems.
      expect(result.trainRows).toBe(12473);
      expect(result.counts).toEqual(expect.objectContaining({ gsm8k: 7473, nq: 5000 }));
      expect(result.valRows).toBe(30);
      const train = await readSampleRows(result.trainPath);
      expect(train).toHaveLength(12473);
      expect(train.map((r) => r.id)).toEqual(Array.from({ length: 12473 }, (_, i) => i));
      expect(new Set(train.map(key)).size).toBe(12473);
      const first = train.find((r) => r.source === 'nq' && r.extra_info.idx === 0);
      expect(first).toMatchObject({
        question: 'total number of death row inmates in the us?',
        result: '2,718',
      });
      const val = await readSampleRows(result.valPath!);
      expect(val[7]).toMatchObject({ id: 7, result: '25', extra_info: { answer_raw: '025' } });
      expect(SHARED_DIR).toBeDefined();
    });
  },
);
