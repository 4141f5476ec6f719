// Where the example's HotpotQA comes from when ../shared is absent: the hub's hotpotqa/hotpot_qa
// (config distractor, split validation), served by a local stand-in of the Hub's HTTP API in the
// hub's own Parquet schema, written back as the JSONL the example reads; offline with an empty
// cache, the skip line says what was tried and how to get the data.
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { loadDataset, rowsToParquetBuffer } from '@flowgrpo/core';
import { loadHotpotQaPassages } from '@flowgrpo/tools';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FakeHub, startFakeHub } from '../../../test-utils/fake-hub.js';
import { HOTPOTQA_FILE, searchAgentData } from '../src/data-source.js';

const tmp = mkdtempSync(join(tmpdir(), 'flowgrpo-example-search-hub-'));
let hub: FakeHub;

/** A row of hotpotqa/hotpot_qa as its dataset card lists the columns. */
const hubRow = (i: number) => ({
  id: `5a8c7595554299585d9e36b${i}`,
  question: `Which city is the capital of country ${i}?`,
  answer: `City ${i}`,
  type: 'bridge',
  level: 'hard',
  supporting_facts: { title: [`Country ${i}`], sent_id: [0] },
  context: {
    title: [`Country ${i}`, `City ${i}`],
    sentences: [[`Country ${i} has City ${i} as its capital.`], [`City ${i} is a city.`, ' Big.']],
  },
});

beforeAll(async () => {
  hub = await startFakeHub([
    {
      type: 'dataset',
      repo: 'hotpotqa/hotpot_qa',
      commit: '5'.repeat(40),
      files: {
        'README.md': '# HotpotQA',
        'distractor/train-00000-of-00001.parquet': rowsToParquetBuffer([hubRow(100)]),
        'distractor/validation-00000-of-00001.parquet': rowsToParquetBuffer(
          Array.from({ length: 3 }, (_, i) => hubRow(i)),
        ),
        'fullwiki/validation-00000-of-00001.parquet': rowsToParquetBuffer([hubRow(200)]),
      },
    },
  ]);
});
afterAll(async () => {
  await hub?.close();
  rmSync(tmp, { recursive: true, force: true });
});

describe('searchAgentData', () => {
  it('without ../shared, downloads the distractor validation split and writes the JSONL the example reads', async () => {
    const skipped: string[] = [];
    const out = join(tmp, 'run');
    const env = { HF_ENDPOINT: hub.url, HF_HOME: join(tmp, 'hf') };
    const data = await searchAgentData(
      undefined,
      { out, corpus: 'hotpotqa', skip: (r) => skipped.push(r) },
      { env },
    );
    expect(skipped).toEqual([]);
    expect(data?.root).toBe(out);
    expect(data?.from).toMatch(
      /^the first 3 rows of the hub's hotpotqa\/hotpot_qa \(distractor, validation\)/,
    );
    // Only the split asked for came down.
    expect(hub.downloads().map((r) => r.path)).toHaveLength(1);
    const file = join(out, HOTPOTQA_FILE);
    const questions = await loadDataset(file, 'hotpotqa');
    expect(questions.map((q) => q.result)).toEqual(['City 0', 'City 1', 'City 2']);
    const passages = await loadHotpotQaPassages(file);
    expect(passages).toHaveLength(6);
    expect(passages[1]).toEqual({ id: 'City 0', title: 'City 0', text: 'City 0 is a city. Big.' });
  });

  it('uses ../shared when it holds the file, with no request', async () => {
    const shared = join(tmp, 'shared');
    mkdirSync(dirname(join(shared, HOTPOTQA_FILE)), { recursive: true });
    writeFileSync(join(shared, HOTPOTQA_FILE), '');
    const seen = hub.requests.length;
    const data = await searchAgentData(
      shared,
      { out: join(tmp, 'unused'), corpus: 'hotpotqa', skip: () => {} },
      { env: { HF_ENDPOINT: hub.url } },
    );
    expect(data).toEqual({ root: shared, from: join(shared, HOTPOTQA_FILE) });
    expect(hub.requests.length).toBe(seen);
  });

  it('the wiki sample without ../shared is a skip that says why, with no request', async () => {
    const skipped: string[] = [];
    const seen = hub.requests.length;
    const data = await searchAgentData(
      undefined,
      { out: join(tmp, 'w'), corpus: 'wiki-sample', skip: (r) => skipped.push(r) },
      { env: { HF_ENDPOINT: hub.url } },
    );
    expect(data).toBeUndefined();
    expect(skipped[0]).toContain('run with --corpus hotpotqa');
    expect(hub.requests.length).toBe(seen);
  });
});

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const TSX = pathToFileURL(join(ROOT, 'node_modules/tsx/dist/loader.mjs')).href;

describe('pnpm example search-agent without ../shared and without the hub', () => {
  it('skips (exit 0) with a line that says what was tried and how to get the data', async () => {
    const empty = join(tmp, 'empty');
    mkdirSync(empty, { recursive: true });
    const main = join(ROOT, 'examples/search-agent/src/main.ts');
    const run = await new Promise<{ code: number; stdout: string }>((done) =>
      execFile(
        process.execPath,
        [
          '--conditions=@flowgrpo/source',
          '--import',
          TSX,
          main,
          '--quick',
          '--out',
          join(empty, 'out'),
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
      /^search-agent: skipped — \.\.\/shared\/data\/hotpotqa\/dev-distractor-500\.jsonl \(or \$FLOWGRPO_SHARED\) is absent, and the download of hotpotqa\/hotpot_qa \(config distractor, split validation\) from https:\/\/huggingface\.co failed: \[HUB_OFFLINE\] /,
    );
    expect(run.stdout).toContain(
      'pnpm flowgrpo data fetch hotpotqa/hotpot_qa --config distractor --split validation',
    );
    expect(run.stdout).toContain('HF_ENDPOINT');
  }, 60_000);
});
