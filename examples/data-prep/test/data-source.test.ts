// Where data-prep's sets come from without a data folder: openai/gsm8k (main, train),
// RUC-NLPIR/FlashRAG_datasets (nq, train) and HuggingFaceH4/aime_2024 (train), served by a local
// stand-in of the Hub's HTTP API in each data set's own layout, then prepared as usual; offline
// with an empty cache, the skip line says what was tried and how to get the data.
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { rowsToParquetBuffer, toJsonl } from '@flowgrpo/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FakeHub, startFakeHub } from '../../../test-utils/fake-hub.js';
import { hubDataSpecs } from '../src/data-source.js';
import { prepareData } from '../src/prepare-data.js';

const tmp = mkdtempSync(join(tmpdir(), 'flowgrpo-example-data-prep-hub-'));
let hub: FakeHub;

beforeAll(async () => {
  const gsm8k = (n: number) =>
    Array.from({ length: n }, (_, i) => ({
      question: `Tom has ${i} apples and buys 2. How many now?`,
      answer: `${i}+2=<<${i}+2=${i + 2}>>${i + 2}\n#### ${i + 2}`,
    }));
  hub = await startFakeHub([
    {
      type: 'dataset',
      repo: 'openai/gsm8k',
      commit: '1'.repeat(40),
      files: {
        'main/train-00000-of-00001.parquet': rowsToParquetBuffer(gsm8k(4)),
        'main/test-00000-of-00001.parquet': rowsToParquetBuffer(gsm8k(1)),
        'socratic/train-00000-of-00001.parquet': rowsToParquetBuffer(gsm8k(1)),
      },
    },
    {
      type: 'dataset',
      repo: 'RUC-NLPIR/FlashRAG_datasets',
      commit: '2'.repeat(40),
      files: {
        // FlashRAG's rows: {id, question, golden_answers, metadata}.
        'nq/train.jsonl': toJsonl(
          Array.from({ length: 3 }, (_, i) => ({
            id: `train_${i}`,
            question: `who wrote play ${i}`,
            golden_answers: [`Author ${i}`],
            metadata: {},
          })),
        ),
        'nq/dev.jsonl': toJsonl([{ id: 'dev_0', question: 'q', golden_answers: ['a'] }]),
        'hotpotqa/train.jsonl': toJsonl([{ id: 'h', question: 'q', golden_answers: ['a'] }]),
      },
    },
    {
      type: 'dataset',
      repo: 'HuggingFaceH4/aime_2024',
      commit: '3'.repeat(40),
      files: {
        'data/train-00000-of-00001.parquet': rowsToParquetBuffer([
          {
            id: 60,
            problem: 'Find the number of ways…',
            solution: 'Counting gives 204.',
            answer: '204',
            url: 'https://artofproblemsolving.com/wiki/index.php/2024_AIME_I_Problems/Problem_1',
            year: '2024',
          },
        ]),
      },
    },
  ]);
});
afterAll(async () => {
  await hub?.close();
  rmSync(tmp, { recursive: true, force: true });
});

describe('hubDataSpecs', () => {
  it('downloads the three splits (only those) and data-prep prepares them', async () => {
    const skipped: string[] = [];
    const env = { HF_ENDPOINT: hub.url, HF_HOME: join(tmp, 'hf') };
    const sources = await hubDataSpecs((r) => skipped.push(r), { env });
    expect(skipped).toEqual([]);
    expect(sources?.from.map((f) => f.split(' in ')[0])).toEqual([
      'openai/gsm8k (config main, split train)',
      'RUC-NLPIR/FlashRAG_datasets (config nq, split train)',
      'HuggingFaceH4/aime_2024 (split train)',
    ]);
    expect(hub.downloads()).toHaveLength(3);
    expect(hub.downloads().some((r) => r.path.includes('dev.jsonl'))).toBe(false);
    const r = await prepareData({
      ...(sources && { sources }),
      out: join(tmp, 'out'),
      log: () => {},
    });
    expect(r.counts).toEqual({ gsm8k: 4, nq: 3 });
    expect(r.valCounts).toEqual({ aime: 1 });
    expect(r.validation[0]?.result).toBe('204');
    expect(r.train.find((row) => row.source === 'nq')?.question).toMatch(/^who wrote play \d\?$/);
  });
});

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const TSX = pathToFileURL(join(ROOT, 'node_modules/tsx/dist/loader.mjs')).href;

describe('pnpm example data-prep without ../shared and without the hub', () => {
  it('skips (exit 0) with a line that says what was tried and how to get the data', async () => {
    const empty = join(tmp, 'empty');
    mkdirSync(empty, { recursive: true });
    const run = await new Promise<{ code: number; stdout: string }>((done) =>
      execFile(
        process.execPath,
        [
          '--conditions=@flowgrpo/source',
          '--import',
          TSX,
          join(ROOT, 'examples/data-prep/src/main.ts'),
          '--quick',
        ],
        {
          cwd: empty,
          env: {
            ...process.env,
            FLOWGRPO_SHARED: empty,
            HF_HOME: empty,
            HF_HUB_CACHE: '',
            HF_ENDPOINT: '',
            HF_HUB_OFFLINE: '1',
          },
        },
        (error, stdout) => done({ code: error ? Number(error.code ?? 1) : 0, stdout }),
      ),
    );
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(
      /^data-prep: skipped — no data folder: \.\.\/shared\/data \(or \$FLOWGRPO_SHARED\) is absent and no --data-dir was given, and the download of openai\/gsm8k \(config main, split train\), RUC-NLPIR\/FlashRAG_datasets \(config nq, split train\), HuggingFaceH4\/aime_2024 \(split train\) from https:\/\/huggingface\.co failed: \[HUB_OFFLINE\] /,
    );
    expect(run.stdout).toContain(
      'pnpm flowgrpo data fetch RUC-NLPIR/FlashRAG_datasets --config nq --split train',
    );
  }, 60_000);
});
