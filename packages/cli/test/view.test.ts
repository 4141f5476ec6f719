// `flowgrpo view` in-process: the usage mistakes (exit 2), a run directory that does not exist
// ([FILE_NOT_FOUND] and the fix, exit 1), and a real start on a run folder: it prints the URL
// (127.0.0.1), serves the page, warns when --host reaches beyond loopback, and stops on SIGINT
// with exit 0.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli } from '../src/main.js';
import { captureIO } from './support.js';

const tmp = mkdtempSync(join(tmpdir(), 'flowgrpo-cli-view-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/** Runs `flowgrpo view …` until it prints its URL, checks the page, then sends it SIGINT. */
async function viewUntilReady(args: string[]) {
  const io = captureIO(tmp);
  const exit = runCli(['view', ...args], io);
  let url: string | undefined;
  for (let i = 0; i < 600 && !url; i++) {
    url = /at (http:\/\/\S+)/.exec(io.out)?.[1];
    if (!url) await new Promise((r) => setTimeout(r, 50));
  }
  expect(url, io.err).toBeDefined();
  const page = await fetch(url!);
  const metrics = (await (await fetch(`${url}api/metrics`)).json()) as { records: unknown[] };
  process.emit('SIGINT');
  return { io, url: new URL(url!), status: page.status, metrics, code: await exit };
}

describe('flowgrpo view', () => {
  it('refuses a missing or extra argument and a bad port (usage, exit 2)', async () => {
    for (const args of [[], ['a', 'b'], ['a', '--port', '70000']]) {
      const io = captureIO(tmp);
      expect(await runCli(['view', ...args], io), args.join(' ')).toBe(2);
    }
  });

  it('names a run directory that does not exist (exit 1, with the fix)', async () => {
    const io = captureIO(tmp);
    expect(await runCli(['view', 'no-such-run'], io)).toBe(1);
    expect(io.err).toContain('[FILE_NOT_FOUND]');
    expect(io.err).toContain('no-such-run');
    expect(io.err).toContain('output_dir');
  });

  it('serves a run on 127.0.0.1 and stops on SIGINT', async () => {
    const dir = join(tmp, 'run');
    mkdirSync(dir);
    writeFileSync(join(dir, 'metrics.jsonl'), '{"step":1,"reward":0.5,"alarms/truncation":0}\n');
    const r = await viewUntilReady(['run']);
    expect(r.url.hostname).toBe('127.0.0.1');
    expect(r.status).toBe(200);
    expect(r.metrics.records).toEqual([{ step: 1, reward: 0.5, 'alarms/truncation': 0 }]);
    expect(r.code).toBe(0);
    expect(r.io.err).not.toContain('warning');
    // Beyond loopback only when asked, and then with a warning.
    const wide = await viewUntilReady(['run', '--host', '0.0.0.0']);
    expect(wide.io.err).toContain('warning: --host 0.0.0.0 shows this run');
    expect(wide.code).toBe(0);
  });
});
