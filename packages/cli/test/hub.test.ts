import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FakeHub, startFakeHub } from '../../../test-utils/fake-hub.js';
import { runCli } from '../src/main.js';
import { captureIO } from './support.js';
import { grpoConfig, tinyModel, writeConfig } from './train-fixtures.js';

// Hub names through the CLI, against a local stand-in of the Hub's HTTP API (HF_ENDPOINT): a run
// config naming its model `tiny/qwen2` and its data TRL's way (dataset_name + splits) trains;
// a gated model and a missing one fail before anything is built, saying what to do; with
// HF_HUB_OFFLINE the cache answers without a request.

const tmp = mkdtempSync(join(tmpdir(), 'flowgrpo-cli-hub-'));
let hub: FakeHub;
const rows = (from: number, n: number) =>
  Array.from({ length: n }, (_, k) => {
    const i = from + k;
    return JSON.stringify({ question: `What is ${i} + ${i + 1}?`, answer: `#### ${2 * i + 1}` });
  }).join('\n');

beforeAll(async () => {
  const src = await tinyModel(join(tmp, 'src'));
  const files = Object.fromEntries(readdirSync(src).map((f) => [f, readFileSync(join(src, f))]));
  hub = await startFakeHub([
    { type: 'model', repo: 'tiny/qwen2', commit: '1'.repeat(40), files },
    { type: 'model', repo: 'meta/gated', commit: '2'.repeat(40), files, token: 'hf_ok' },
    {
      type: 'dataset',
      repo: 'math/sums',
      commit: '3'.repeat(40),
      files: { 'data/train.jsonl': rows(0, 4), 'data/test.jsonl': rows(10, 2), 'README.md': '#' },
    },
  ]);
});
afterAll(async () => {
  await hub?.close();
  rmSync(tmp, { recursive: true, force: true });
});

describe('hub names in flowgrpo train', () => {
  const env = () => ({ HF_ENDPOINT: hub.url, HF_HOME: join(tmp, 'hf') });

  it('trains with model: org/name and dataset_name, into the HF cache; the adapter names the hub model', async () => {
    const dir = join(tmp, 'run');
    mkdirSync(dir);
    const { train_file: _, ...config } = grpoConfig(dir, 'tiny/qwen2', {
      dataset_name: 'math/sums',
      dataset_test_split: 'test',
    });
    const cfg = writeConfig(join(dir, 'run.json'), config);
    const io = captureIO(dir, env());
    expect(await runCli(['train', '--config', cfg], io), io.err).toBe(0);
    const snapshots = join(tmp, 'hf', 'hub', 'models--tiny--qwen2', 'snapshots', '1'.repeat(40));
    expect(io.err).toContain(`model: tiny/qwen2 → ${snapshots}`);
    expect(io.err).toContain('train_file: math/sums (split train) →');
    expect(io.err).toContain('eval_file: math/sums (split test) →');
    const adapter = JSON.parse(
      readFileSync(join(dir, 'run-grpo', 'checkpoint-2', 'adapter_config.json'), 'utf8'),
    );
    expect(adapter.base_model_name_or_path).toBe('tiny/qwen2');
  });

  it('a gated model fails before anything is built: accept the licence, set HF_TOKEN', async () => {
    const dir = join(tmp, 'gated');
    mkdirSync(dir);
    const cfg = writeConfig(join(dir, 'run.json'), grpoConfig(dir, 'meta/gated'));
    const io = captureIO(dir, env());
    expect(await runCli(['train', '--config', cfg], io)).toBe(1);
    // 401 is also the hub's answer for a repo that does not exist: both sides are said.
    expect(io.err).toContain(
      `[HUB_GATED] model: meta/gated is not a local path (no ${join(dir, 'meta', 'gated')}; relative paths resolve against ${dir}), and as a hub model name: meta/gated is gated or private`,
    );
    expect(io.err).toContain(`accept the licence at ${hub.url}/meta/gated and set HF_TOKEN`);
    expect(readdirSync(dir)).toEqual(['run.json', 'train-rows.jsonl']);
  });

  it('every hub name that fails is reported at once, each with its fix', async () => {
    const dir = join(tmp, 'several');
    mkdirSync(dir);
    const { train_file: _, ...config } = grpoConfig(dir, 'meta/gated', {
      dataset_name: 'math/sums',
      dataset_train_split: 'validation',
    });
    const cfg = writeConfig(join(dir, 'run.json'), config);
    const io = captureIO(dir, env());
    expect(await runCli(['train', '--config', cfg], io)).toBe(1);
    expect(io.err).toContain('[PREFLIGHT_FAILED] 2 problems found');
    expect(io.err).toContain('[HUB_GATED] model: meta/gated is not a local path');
    expect(io.err).toContain(
      "[HUB_ERROR] train_file: data set math/sums (config default) has no split 'validation' (its files name: test, train)",
    );
  });

  it('a name neither local nor on the hub is HUB_NOT_FOUND naming both', async () => {
    const dir = join(tmp, 'missing');
    mkdirSync(dir);
    const cfg = writeConfig(join(dir, 'run.json'), grpoConfig(dir, 'nobody/nothing'));
    const io = captureIO(dir, env());
    expect(await runCli(['train', '--config', cfg], io)).toBe(1);
    expect(io.err).toContain(
      `[HUB_NOT_FOUND] model: nobody/nothing is neither a local path (no ${join(dir, 'nobody', 'nothing')}; relative paths resolve against ${dir}) nor a model on the hub`,
    );
  });

  it('a missing checkpoint folder that looks like a hub name says both: no such folder here, and the hub could not be reached', async () => {
    const dir = join(tmp, 'checkpoint-typo');
    mkdirSync(dir);
    // An endpoint nothing listens on: a server's port, closed again.
    const closed = createServer();
    await new Promise<void>((ok) => closed.listen(0, '127.0.0.1', ok));
    const { port } = closed.address() as AddressInfo;
    await new Promise((ok) => closed.close(ok));
    const endpoint = `http://127.0.0.1:${port}`;
    const cfg = writeConfig(join(dir, 'run.json'), grpoConfig(dir, 'sft/checkpoint-80'));
    const io = captureIO(dir, { HF_ENDPOINT: endpoint, HF_HOME: join(dir, 'hf') });
    expect(await runCli(['train', '--config', cfg], io)).toBe(1);
    expect(io.err).toContain(
      `[HUB_NETWORK] model: sft/checkpoint-80 is not a local path (no ${join(dir, 'sft', 'checkpoint-80')}; relative paths resolve against ${dir}), and as a hub model name: could not reach the hub at ${endpoint} for sft/checkpoint-80: ECONNREFUSED`,
    );
    expect(io.err).toContain(
      'fix: if you meant a local folder, check the path; if a hub name: check the network',
    );
  });
});

describe('flowgrpo data fetch', () => {
  it('downloads a split, then HF_HUB_OFFLINE=1 serves it from the cache with no request', async () => {
    const env = { HF_ENDPOINT: hub.url, HF_HOME: join(tmp, 'hf-fetch') };
    const io = captureIO(tmp, env);
    expect(await runCli(['data', 'fetch', 'math/sums', '--split', 'test'], io), io.err).toBe(0);
    const path = join(
      tmp,
      'hf-fetch',
      'hub',
      'datasets--math--sums',
      'snapshots',
      '3'.repeat(40),
      'data',
      'test.jsonl',
    );
    expect(io.out).toBe(`${path}\n`);
    const seen = hub.requests.length;
    const offline = captureIO(tmp, { ...env, HF_HUB_OFFLINE: '1' });
    expect(
      await runCli(['data', 'fetch', 'math/sums', '--split', 'test'], offline),
      offline.err,
    ).toBe(0);
    expect(offline.out).toBe(`${path}\n`);
    const missing = captureIO(tmp, { ...env, HF_HUB_OFFLINE: '1' });
    expect(await runCli(['data', 'fetch', 'tiny/qwen2', '--type', 'model'], missing)).toBe(1);
    expect(missing.err).toContain('[HUB_OFFLINE]');
    expect(hub.requests.length).toBe(seen);
  });

  it('a revision with .. is refused naming it, with no request and nothing written', async () => {
    const home = join(tmp, 'hf-bad-revision');
    const seen = hub.requests.length;
    for (const name of ['math/sums@../escape-ref', 'math/sums@main/../../../../escape-ref']) {
      const io = captureIO(tmp, { HF_ENDPOINT: hub.url, HF_HOME: home });
      expect(await runCli(['data', 'fetch', name], io)).toBe(1);
      const revision = name.slice(name.indexOf('@') + 1);
      expect(io.err).toBe(
        `[HUB_INVALID_NAME] math/sums: the revision ${JSON.stringify(revision)} (from the user) is not valid: it contains '..'\n` +
          "fix: name a branch, tag or commit (main, v1.0, refs/pr/1, a 40-hex id): no '..', no leading '/' or '.', no spaces or control characters, none of \\ ~ ^ : ? * [\n",
      );
    }
    const files = captureIO(tmp, { HF_ENDPOINT: hub.url, HF_HOME: home });
    expect(await runCli(['data', 'fetch', 'math/sums', '--file', '../../x.jsonl'], files)).toBe(1);
    expect(files.err).toMatch(
      /^\[HUB_INVALID_NAME\] math\/sums: the file name "..\/..\/x.jsonl" \(from the user\)/,
    );
    expect(hub.requests.length).toBe(seen);
    expect(existsSync(home)).toBe(false);
  });

  it("a hub's commit id that climbs out of the cache is refused; nothing is written", async () => {
    const evil = await startFakeHub([
      {
        type: 'dataset',
        repo: 'evil/sums',
        commit: '4'.repeat(40),
        answerSha: '../../../../sha-escape',
        files: { 'data/train.jsonl': rows(0, 2) },
      },
    ]);
    try {
      const root = join(tmp, 'evil-sha');
      mkdirSync(root);
      const io = captureIO(root, { HF_ENDPOINT: evil.url, HF_HOME: join(root, 'hf') });
      expect(await runCli(['data', 'fetch', 'evil/sums'], io)).toBe(1);
      expect(io.err).toMatch(
        /^\[HUB_INVALID_NAME\] evil\/sums@main: the commit "..\/..\/..\/..\/sha-escape" \(from the hub at http:\/\/127\.0\.0\.1:\d+\) is not valid/,
      );
      expect(io.out).toBe('');
      expect(readdirSync(root)).toEqual([]);
      expect(evil.downloads()).toEqual([]);
    } finally {
      await evil.close();
    }
  });

  it('--file downloads the named files of a repo (hf_hub_download) and prints their paths', async () => {
    const env = { HF_ENDPOINT: hub.url, HF_HOME: join(tmp, 'hf-files') };
    const io = captureIO(tmp, env);
    const args = ['data', 'fetch', 'math/sums', '--file', 'README.md', '--file', 'data/test.jsonl'];
    expect(await runCli(args, io), io.err).toBe(0);
    const snapshot = join(
      tmp,
      'hf-files',
      'hub',
      'datasets--math--sums',
      'snapshots',
      '3'.repeat(40),
    );
    expect(io.out).toBe(
      `${join(snapshot, 'README.md')}\n${join(snapshot, 'data', 'test.jsonl')}\n`,
    );
    expect(io.err).toContain('2 of 2 files downloaded');
    const wrong = captureIO(tmp, env);
    expect(await runCli(['data', 'fetch', 'math/sums', '--file', 'nope.bin'], wrong)).toBe(1);
    expect(wrong.err).toMatch(/^\[HUB_NOT_FOUND\] math\/sums@main has no nope\.bin/);
    const usage = captureIO(tmp, env);
    expect(await runCli([...args, '--split', 'test'], usage)).toBe(2);
  });
});
