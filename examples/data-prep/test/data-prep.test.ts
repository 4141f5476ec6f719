// The data-prep example: its --quick path on the shared data, the user-supplied-files path on
// small files in the seed's HF layouts, and `pnpm example` (scripts/example.mjs) running it.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { writeJsonl, writeParquet } from '@flowgrpo/core';
import { afterAll, describe, expect, it } from 'vitest';
import { SHARED_DIR, sharedPath, skipWithoutShared } from '../../../test-utils/shared.js';
import { prepareData } from '../src/prepare-data.js';

const run = promisify(execFile);
const tmp = mkdtempSync(join(tmpdir(), 'flowgrpo-example-data-prep-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
const repoRoot = join(import.meta.dirname, '..', '..', '..');

describe.skipIf(skipWithoutShared('data-prep example on ../shared/data'))(
  'data-prep --quick on ../shared/data',
  () => {
    it('writes the combined set (2,000 rows per source, shuffled, ids 0..N-1) and AIME24', async () => {
      const lines: string[] = [];
      const r = await prepareData({
        dataDir: sharedPath('data'),
        out: join(tmp, 'quick'),
        limit: 2000,
        log: (l) => lines.push(l),
      });
      // GSM8K stands in for DeepMath (not in ../shared); Search-R1's NQ rows keep their
      // data_source tag 'nq'; AIME 2024 has 30 problems (../shared/README.md).
      expect(r.counts).toEqual({ nq: 2000, gsm8k: 2000 });
      expect(r.valCounts).toEqual({ aime: 30 });
      expect(r.train.map((row) => row.id)).toEqual(r.train.map((_, i) => i));
      // Shuffled: the sources interleave instead of 2,000 NQ rows then 2,000 GSM8K rows.
      expect(new Set(r.train.slice(0, 50).map((row) => row.source)).size).toBe(2);
      const out = lines.join('\n');
      expect(out).toMatch(/train: 4000 rows → .*combined_train\.parquet \(shuffled with seed 42/);
      expect(out).toContain('sample training row:');
      expect(out).toContain('"source": "aime"');
    });
  },
);

describe('data-prep on user-supplied files in the HF layouts', () => {
  it('normalises DeepMath + FlashRAG NQ, cleans the answers and shuffles reproducibly', async () => {
    const math = join(tmp, 'deepmath.parquet');
    await writeParquet(
      math,
      Array.from({ length: 6 }, (_, i) => ({
        question: `What is ${i} + ${i}?`,
        final_answer: String(2 * i),
        difficulty: 3.5,
        topic: 'Mathematics -> Algebra',
        r1_solution_1: 'a long solution the trainer never reads',
      })),
    );
    const nq = join(tmp, 'nq.jsonl');
    await writeJsonl(nq, [
      { id: 'train_0', question: 'who wrote hamlet', golden_answers: ['William Shakespeare'] },
      { id: 'train_1', question: 'largest planet?', golden_answers: ['Jupiter', '', 'jupiter'] },
      { id: 'train_2', question: 'speed of light in km/s', golden_answers: [299792] },
    ]);
    const aime = join(tmp, 'aime.jsonl');
    await writeJsonl(aime, [{ id: 1, problem: 'Find x.', solution: 'x = 25', answer: '025' }]);

    const go = (out: string, seed?: number) =>
      prepareData({ math: [math], nq, aime, out: join(tmp, out), seed, log: () => {} });
    const a = await go('a');
    expect(a.counts).toEqual({ nq: 3, mathhard: 6 });
    const byQuestion = new Map(a.train.map((row) => [row.question, row]));
    // The seed's NQ cleaning: '?' appended, empty answers dropped, numbers as text, '; '-joined.
    expect(byQuestion.get('who wrote hamlet?')!.result).toBe('William Shakespeare');
    expect(byQuestion.get('largest planet?')!.result).toBe('Jupiter; jupiter');
    expect(byQuestion.get('speed of light in km/s?')!.result).toBe('299792');
    expect(byQuestion.get('What is 2 + 2?')!.extra_info.difficulty).toBe(3.5);
    expect(a.validation[0]!.result).toBe('25'); // "025" compared as a number
    // Same seed, same order; another seed, another order (9! orders: a tie is negligible).
    const again = await go('b');
    expect(again.train.map((row) => row.question)).toEqual(a.train.map((row) => row.question));
    const other = await go('c', 7);
    expect(other.train.map((row) => row.question)).not.toEqual(a.train.map((row) => row.question));
  });
});

describe('pnpm example (scripts/example.mjs)', () => {
  it('lists the examples when no name is given (exit 0: the README documents it as the listing)', async () => {
    const { stdout } = await run(process.execPath, [join(repoRoot, 'scripts', 'example.mjs')]);
    for (const name of ['solver', 'data-prep', 'gsm8k-calculator', 'search-agent', 'lora-sft'])
      expect(stdout).toContain(name);
    // An unknown name is an error.
    const e = await run(process.execPath, [join(repoRoot, 'scripts', 'example.mjs'), 'nope']).catch(
      (x: { code: number; stderr: string }) => x,
    );
    expect((e as { code: number }).code).toBe(1);
    expect((e as { stderr: string }).stderr).toContain("unknown example 'nope'");
  });

  it('runs `data-prep --quick` from the TypeScript sources', async () => {
    const out = join(tmp, 'via-script');
    const { stdout } = await run(
      process.execPath,
      [join(repoRoot, 'scripts', 'example.mjs'), 'data-prep', '--quick', '--out', out],
      {
        cwd: repoRoot,
        // Without ../shared the example would fetch from the hub: offline here, with an empty
        // cache, so that it skips whatever the network (data-source.test.ts covers the hub).
        env: {
          ...process.env,
          INIT_CWD: repoRoot,
          ...(!SHARED_DIR && {
            HF_HUB_OFFLINE: '1',
            HF_HOME: join(tmp, 'no-hub'),
            HF_HUB_CACHE: '',
          }),
        },
        timeout: 100_000,
      },
    );
    if (!SHARED_DIR) expect(stdout).toMatch(/data-prep: skipped — no data folder/);
    else expect(stdout).toMatch(/train: 4000 rows → .*via-script\/combined_train\.parquet/);
  }, 120_000);
});
