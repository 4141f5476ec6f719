// Where the offline Wikipedia comes from when ../shared is absent: the hub's hotpotqa/hotpot_qa
// (config distractor, split validation), served by a local stand-in of the Hub's HTTP API in the
// hub's own Parquet schema and written back as the JSONL the corpus loader reads; offline with an
// empty cache, the skip line says what was tried and how to get the data.
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { rowsToParquetBuffer } from '@flowgrpo/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FakeHub, startFakeHub } from '../../../test-utils/fake-hub.js';
import { HOTPOTQA_FILE, solverCorpus } from '../src/data-source.js';
import { loadPassages } from '../src/solve.js';

const tmp = mkdtempSync(join(tmpdir(), 'flowgrpo-example-solver-hub-'));
let hub: FakeHub;

/** A row of hotpotqa/hotpot_qa as its dataset card lists the columns. */
const hubRow = (title: string, text: string) => ({
  id: `id-${title}`,
  question: `What is ${title}?`,
  answer: title,
  type: 'bridge',
  level: 'hard',
  supporting_facts: { title: [title], sent_id: [0] },
  context: { title: [title, 'Shared page'], sentences: [[text], ['Seen twice.']] },
});

beforeAll(async () => {
  hub = await startFakeHub([
    {
      type: 'dataset',
      repo: 'hotpotqa/hotpot_qa',
      commit: '6'.repeat(40),
      files: {
        'distractor/train-00000-of-00001.parquet': rowsToParquetBuffer([hubRow('Train', 'x')]),
        'distractor/validation-00000-of-00001.parquet': rowsToParquetBuffer([
          hubRow('144', '144 was a leap year of the Julian calendar.'),
          hubRow('Rome', 'Rome is a city.'),
        ]),
      },
    },
  ]);
});
afterAll(async () => {
  await hub?.close();
  rmSync(tmp, { recursive: true, force: true });
});

describe('solverCorpus', () => {
  it("without ../shared, the hub's distractor validation rows become the offline Wikipedia", async () => {
    const skipped: string[] = [];
    const out = join(tmp, 'out');
    const env = { HF_ENDPOINT: hub.url, HF_HOME: join(tmp, 'hf') };
    const found = await solverCorpus(undefined, { out, skip: (r) => skipped.push(r) }, { env });
    expect(skipped).toEqual([]);
    expect(found?.file).toBe(join(out, HOTPOTQA_FILE));
    expect(found?.from).toContain("the first 2 rows of the hub's hotpotqa/hotpot_qa");
    const passages = await loadPassages(found?.file as string, 'hotpotqa');
    // Each title once: the page both rows share is one passage.
    expect(passages.map((p) => p.title)).toEqual(['144', 'Shared page', 'Rome']);
    expect(passages[0]?.text).toBe('144 was a leap year of the Julian calendar.');
  });

  it('uses ../shared when it holds the file, with no request', async () => {
    const shared = join(tmp, 'shared');
    mkdirSync(dirname(join(shared, HOTPOTQA_FILE)), { recursive: true });
    writeFileSync(join(shared, HOTPOTQA_FILE), '');
    const seen = hub.requests.length;
    const found = await solverCorpus(
      shared,
      { out: join(tmp, 'unused'), skip: () => {} },
      { env: { HF_ENDPOINT: hub.url } },
    );
    expect(found?.file).toBe(join(shared, HOTPOTQA_FILE));
    expect(hub.requests.length).toBe(seen);
  });
});

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const TSX = pathToFileURL(join(ROOT, 'node_modules/tsx/dist/loader.mjs')).href;

describe('pnpm example solver without ../shared and without the hub', () => {
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
          join(ROOT, 'examples/solver/src/main.ts'),
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
      /^solver: skipped — the offline Wikipedia is read from \.\.\/shared\/data\/hotpotqa\/dev-distractor-500\.jsonl \(or \$FLOWGRPO_SHARED\), which is absent, and the download of hotpotqa\/hotpot_qa \(config distractor, split validation\) from https:\/\/huggingface\.co failed: \[HUB_OFFLINE\] /,
    );
    expect(run.stdout).toContain(
      'pnpm flowgrpo data fetch hotpotqa/hotpot_qa --config distractor --split validation',
    );
    expect(run.stdout).toContain('--corpus FILE or --wiki live');
  }, 60_000);
});
