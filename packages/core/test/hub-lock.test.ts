import { type ChildProcess, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  existsSync,
  lutimesSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { hostname } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FakeHub, startFakeHub } from '../../../test-utils/fake-hub.js';
import { downloadHubDataset } from '../src/index.js';
import { testDir } from './temp-dir.js';

// Two processes fetching the same file into one HF cache: one downloads it, the other waits for
// its lock and then finds the blob — one blob with the right sha256, fetched from the hub once,
// both succeeding. The hub holds the first download's bytes until the second process is seen
// waiting (or, were there no lock, asking for the bytes itself), so the order is made, not won.

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const TSX = pathToFileURL(join(ROOT, 'node_modules/tsx/dist/loader.mjs')).href;
const CHILD = join(dirname(fileURLToPath(import.meta.url)), 'hub-lock-child.ts');
const dir = testDir('hub-lock');
const REPO = 'org/shared-data';
const FILE = 'data/train-00000-of-00001.parquet';
const bytes = new Uint8Array(300_000).map((_, i) => (i * 7919) % 253);
const SHA256 = createHash('sha256').update(bytes).digest('hex');
let hub: FakeHub;

beforeAll(async () => {
  hub = await startFakeHub([
    { type: 'dataset', repo: REPO, commit: 'c'.repeat(40), files: { [FILE]: bytes } },
  ]);
});
afterAll(() => hub?.close());

/** Resolves once `check` holds, looking every 20 ms (the test's timeout ends a hang). */
async function until(check: () => boolean): Promise<void> {
  while (!check()) await sleep(20);
}

interface Child {
  lines: Record<string, unknown>[];
  exit: Promise<{ code: number | null; stderr: string }>;
}

function download(env: NodeJS.ProcessEnv): Child {
  const p: ChildProcess = spawn(
    process.execPath,
    ['--conditions=@flowgrpo/source', '--import', TSX, CHILD, REPO, 'train'],
    { env, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const lines: Record<string, unknown>[] = [];
  let out = '';
  let stderr = '';
  p.stdout?.on('data', (d: Buffer) => {
    out += d.toString();
    const parts = out.split('\n');
    out = parts.pop() ?? '';
    for (const line of parts) if (line.startsWith('{')) lines.push(JSON.parse(line));
  });
  p.stderr?.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  return { lines, exit: new Promise((done) => p.on('close', (code) => done({ code, stderr }))) };
}

const waiting = (c: Child) =>
  c.lines.some((l) => typeof l.log === 'string' && l.log.startsWith('waiting for'));
const objectGets = () => hub.downloads().filter((r) => r.path.startsWith('/lfs/'));

describe('hub downloads across processes', () => {
  it('two processes, one blob: downloaded once, right sha256, both succeed', async () => {
    const home = join(dir, 'two');
    const env = { ...process.env, HF_ENDPOINT: hub.url, HF_HOME: home, HF_HUB_OFFLINE: '' };
    const before = objectGets().length;
    const held = hub.hold(FILE);
    const a = download(env);
    const b = download(env);
    await held.arrived;
    // One process has the lock and waits for the bytes; the other waits for the lock — or, with
    // no lock, would ask the hub for the bytes as well.
    await until(() => waiting(a) || waiting(b) || objectGets().length - before > 1);
    held.release();
    const [ea, eb] = await Promise.all([a.exit, b.exit]);
    expect(ea.code, ea.stderr).toBe(0);
    expect(eb.code, eb.stderr).toBe(0);

    expect(objectGets().length - before).toBe(1);
    const ra = a.lines.at(-1) as { paths: string[]; downloaded: string[] };
    const rb = b.lines.at(-1) as { paths: string[]; downloaded: string[] };
    expect(ra.paths).toEqual(rb.paths);
    // Exactly one of them brought the bytes; the other found them in the cache.
    expect([...ra.downloaded, ...rb.downloaded]).toEqual([FILE]);

    const repoFolder = join(home, 'hub', `datasets--${REPO.replace('/', '--')}`);
    expect(readdirSync(join(repoFolder, 'blobs'))).toEqual([SHA256]);
    const got = readFileSync(ra.paths[0] as string);
    expect(createHash('sha256').update(got).digest('hex')).toBe(SHA256);
    // The lock is gone with its holder.
    expect(
      readdirSync(join(home, 'hub', '.locks', `datasets--${REPO.replace('/', '--')}`)),
    ).toEqual([]);
  }, 60_000);

  /** The lock file a download of FILE takes in the cache under `home`. */
  const lockOf = (home: string) =>
    join(home, 'hub', '.locks', `datasets--${REPO.replace('/', '--')}`, `${SHA256}.flowgrpo.lock`);

  it('a lock left by a dead process on this host is taken over', async () => {
    const home = join(dir, 'dead');
    const gone = spawn(process.execPath, ['-e', '']);
    const pid = gone.pid as number;
    await new Promise((done) => gone.on('close', done));
    const lock = lockOf(home);
    mkdirSync(dirname(lock), { recursive: true });
    writeFileSync(lock, JSON.stringify({ pid, host: hostname(), started_at: '', token: 'x' }));
    const said: string[] = [];
    const r = await downloadHubDataset(REPO, {
      env: { HF_ENDPOINT: hub.url, HF_HOME: home },
      log: (l) => said.push(l),
    });
    expect(said).toEqual([
      `${lock}: left by pid ${pid} on ${hostname()}, which no longer holds it; taking it over`,
    ]);
    expect(r.downloaded).toEqual([FILE]);
    expect(existsSync(lock)).toBe(false);
  });

  it('an empty lock nobody touched for longer than a holder would is taken over', async () => {
    const home = join(dir, 'torn');
    const lock = lockOf(home);
    mkdirSync(dirname(lock), { recursive: true });
    writeFileSync(lock, '');
    const old = new Date(Date.now() - 10 * 60_000);
    utimesSync(lock, old, old);
    const said: string[] = [];
    const r = await downloadHubDataset(REPO, {
      env: { HF_ENDPOINT: hub.url, HF_HOME: home },
      log: (l) => said.push(l),
    });
    expect(said[0]).toContain('left by a process killed while creating it');
    expect(r.downloaded).toEqual([FILE]);
  });

  it("a link left at the lock's name (pointing nowhere) is judged by its own age and taken over", async () => {
    const home = join(dir, 'link');
    const lock = lockOf(home);
    mkdirSync(dirname(lock), { recursive: true });
    symlinkSync(join(home, 'nowhere'), lock);
    const old = new Date(Date.now() - 10 * 60_000);
    lutimesSync(lock, old, old);
    const said: string[] = [];
    const r = await downloadHubDataset(REPO, {
      env: { HF_ENDPOINT: hub.url, HF_HOME: home },
      log: (l) => said.push(l),
    });
    // Before, the link's target was looked at (stat): gone, so the waiter looked again at once,
    // forever. Now the link itself is the lock file, untouched for 10 minutes: stale.
    expect(said[0]).toContain('left by a process killed while creating it');
    expect(r.downloaded).toEqual([FILE]);
    expect(existsSync(join(home, 'nowhere'))).toBe(false);
  });

  it('a lock held by a live process is waited for, then the download goes on', async () => {
    const home = join(dir, 'live');
    const lock = lockOf(home);
    mkdirSync(dirname(lock), { recursive: true });
    // This very process, under another token: alive, and fresh.
    writeFileSync(
      lock,
      JSON.stringify({ pid: process.pid, host: hostname(), started_at: '', token: 'other' }),
    );
    // Touched an hour ahead: however slow this machine is before the waiter first looks, the
    // lock never reads as untouched for longer than a holder refreshes it (no race to win).
    const ahead = new Date(Date.now() + 60 * 60_000);
    utimesSync(lock, ahead, ahead);
    const said: string[] = [];
    const seen = objectGets().length;
    const pending = downloadHubDataset(REPO, {
      env: { HF_ENDPOINT: hub.url, HF_HOME: home },
      log: (l) => said.push(l),
    });
    await until(() => said.length > 0);
    expect(said[0]).toMatch(/^waiting for pid \d+ on .*, which is downloading the same file/);
    expect(objectGets().length).toBe(seen);
    rmSync(lock); // its holder is done

    const r = await pending;
    expect(r.downloaded).toEqual([FILE]);
  });
});
