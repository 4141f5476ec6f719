// Where the example's GSM8K comes from when ../shared is absent: the hub's openai/gsm8k (config
// main, Parquet splits), fetched from a local stand-in of the Hub's HTTP API; offline with an
// empty cache, the reason is reported and nothing is fetched.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadDataset, rowsToParquetBuffer } from '@flowgrpo/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FakeHub, startFakeHub } from '../../../test-utils/fake-hub.js';
import { gsm8kFiles } from '../src/data-source.js';

const tmp = mkdtempSync(join(tmpdir(), 'flowgrpo-example-gsm8k-hub-'));
let hub: FakeHub;
const rows = (n: number) =>
  Array.from({ length: n }, (_, i) => ({
    question: `Tom has ${i} apples and buys ${i + 2}. How many now?`,
    answer: `He has ${i}+${i + 2}=<<${i}+${i + 2}=${2 * i + 2}>>${2 * i + 2}.\n#### ${2 * i + 2}`,
  }));

beforeAll(async () => {
  hub = await startFakeHub([
    {
      type: 'dataset',
      repo: 'openai/gsm8k',
      commit: '7'.repeat(40),
      files: {
        'main/train-00000-of-00001.parquet': rowsToParquetBuffer(rows(5)),
        'main/test-00000-of-00001.parquet': rowsToParquetBuffer(rows(3)),
        'socratic/train-00000-of-00001.parquet': rowsToParquetBuffer(rows(1)),
      },
    },
  ]);
});
afterAll(async () => {
  await hub?.close();
  rmSync(tmp, { recursive: true, force: true });
});

describe('gsm8kFiles', () => {
  it('without ../shared, downloads openai/gsm8k (main) from the hub and the rows load', async () => {
    const reasons: string[] = [];
    const env = { HF_ENDPOINT: hub.url, HF_HOME: join(tmp, 'hf') };
    const files = await gsm8kFiles(undefined, (r) => reasons.push(r), { env });
    expect(reasons).toEqual([]);
    expect(files?.from).toContain("the hub's openai/gsm8k (main)");
    const train = await loadDataset(files?.train as string, 'gsm8k');
    const test = await loadDataset(files?.test as string, 'gsm8k');
    expect(train).toHaveLength(5);
    expect(test).toHaveLength(3);
    expect(train[1]?.result).toBe('4');
  });

  it('uses the shared folder when it holds GSM8K, with no request', async () => {
    const shared = join(tmp, 'shared');
    mkdirSync(join(shared, 'data', 'gsm8k'), { recursive: true });
    for (const f of ['train.jsonl', 'test.jsonl'])
      writeFileSync(join(shared, 'data', 'gsm8k', f), '');
    const seen = hub.requests.length;
    const files = await gsm8kFiles(shared, () => {}, { env: { HF_ENDPOINT: hub.url } });
    expect(files?.train).toBe(join(shared, 'data', 'gsm8k', 'train.jsonl'));
    expect(hub.requests.length).toBe(seen);
  });

  it('offline with an empty cache: reports why (HUB_OFFLINE) and returns nothing', async () => {
    const reasons: string[] = [];
    const seen = hub.requests.length;
    const env = { HF_ENDPOINT: hub.url, HF_HOME: join(tmp, 'empty'), HF_HUB_OFFLINE: '1' };
    expect(await gsm8kFiles(undefined, (r) => reasons.push(r), { env })).toBeUndefined();
    expect(reasons[0]).toMatch(/^\[HUB_OFFLINE\] dataset openai\/gsm8k@main is not in the cache/);
    expect(hub.requests.length).toBe(seen);
  });
});
