import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FakeHub, startFakeHub } from '../../../test-utils/fake-hub.js';
import { downloadHubModel, HubNetworkError, type HubProgress } from '../src/index.js';
import { testDir } from './temp-dir.js';

// A download that breaks off goes on from the bytes that reached blobs/<sha256>.incomplete, with
// a Range request, as huggingface_hub's http_get does — within a run, and in the next run after
// three breaks — and the result is still checked against the sha256 the hub announced. The local
// stand-in of the hub cuts its answer after a given number of bytes, and only once the client
// reports those bytes written (its progress bar counts bytes on disk), so the Range the retry
// must send is known exactly, not won from a race. A server that ignores the Range (200) and one
// that cannot serve it (416) make the download start over.

const dir = testDir('hub-resume');
const COMMIT = 'a'.repeat(40);
// Big enough for several cuts; the values are irregular so that a misplaced byte changes the hash.
const weights = new Uint8Array(200_000).map((_, i) => (i * 31) % 251);
// The hash the test expects, computed here from the bytes served (not by the client).
const SHA256 = createHash('sha256').update(weights).digest('hex');
const FILE = 'model.safetensors';
let hub: FakeHub;
let n = 0;

beforeAll(async () => {
  hub = await startFakeHub([
    {
      type: 'model',
      repo: 'tiny/model',
      commit: COMMIT,
      files: { 'config.json': '{"model_type":"qwen2"}', [FILE]: weights },
    },
  ]);
});
afterAll(() => hub.close());

function fresh() {
  const home = join(dir, `home-${++n}`);
  const blobs = join(home, 'hub', 'models--tiny--model', 'blobs');
  return {
    env: { HF_ENDPOINT: hub.url, HF_HOME: home },
    blobs,
    partial: join(blobs, `${SHA256}.incomplete`),
  };
}

/**
 * A progress reporter that tells when the weights' bar has counted `bytes` (bytes on disk):
 * `reached(bytes)` resolves then.
 */
function diskWatch(): { progress: HubProgress; reached(bytes: number): Promise<void> } {
  const waits: { bytes: number; done: () => void }[] = [];
  return {
    progress: {
      start(label) {
        return {
          update(value) {
            if (label !== FILE) return;
            for (const w of waits.filter((w) => value >= w.bytes)) w.done();
          },
          stop() {},
        };
      },
    },
    reached: (bytes) => new Promise<void>((done) => waits.push({ bytes, done })),
  };
}

const weightGets = (from: number) =>
  hub.requests.slice(from).filter((r) => r.method === 'GET' && r.path.startsWith('/lfs/'));
const bytesOf = (path: string) => readFileSync(path);
const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

describe('resuming a download', () => {
  it('a connection cut mid-file is resumed with Range: bytes=<bytes on disk>-', async () => {
    const { env } = fresh();
    const watch = diskWatch();
    const K = 70_000;
    hub.cut(FILE, K, watch.reached(K));
    const from = hub.requests.length;
    const snap = await downloadHubModel('tiny/model', { env, progress: watch.progress });
    expect(weightGets(from).map((r) => r.range)).toEqual([undefined, `bytes=${K}-`]);
    expect(sha256(bytesOf(join(snap.dir, FILE)))).toBe(SHA256);
  });

  it('three cuts: HUB_NETWORK, the part kept; the next run asks for the rest only', async () => {
    const { env, partial } = fresh();
    const watch = diskWatch();
    const K = 30_000;
    for (const k of [1, 2, 3]) hub.cut(FILE, K, watch.reached(k * K));
    const from = hub.requests.length;
    const e = await downloadHubModel('tiny/model', { env, progress: watch.progress }).catch(
      (x: unknown) => x,
    );
    expect(HubNetworkError.isInstance(e)).toBe(true);
    expect((e as Error).message).toContain(`after ${3 * K} of ${weights.length} bytes`);
    expect((e as Error).message).toContain(`the part is kept in ${partial}`);
    expect(weightGets(from).map((r) => r.range)).toEqual([
      undefined,
      `bytes=${K}-`,
      `bytes=${2 * K}-`,
    ]);
    // The part is the file's first 3K bytes, exactly.
    expect(bytesOf(partial).equals(Buffer.from(weights.subarray(0, 3 * K)))).toBe(true);

    const next = hub.requests.length;
    const snap = await downloadHubModel('tiny/model', { env });
    expect(weightGets(next).map((r) => r.range)).toEqual([`bytes=${3 * K}-`]);
    expect(sha256(bytesOf(join(snap.dir, FILE)))).toBe(SHA256);
    expect(existsSync(partial)).toBe(false);
  });

  it('a partial .incomplete left by an earlier run (here or by Python) is continued', async () => {
    const { env, blobs, partial } = fresh();
    mkdirSync(blobs, { recursive: true });
    writeFileSync(partial, weights.subarray(0, 1234));
    const from = hub.requests.length;
    const snap = await downloadHubModel('tiny/model', { env });
    expect(weightGets(from).map((r) => r.range)).toEqual(['bytes=1234-']);
    expect(sha256(bytesOf(join(snap.dir, FILE)))).toBe(SHA256);
  });

  it('a server that ignores the Range (200, the whole file) makes the part start over', async () => {
    const { env, blobs, partial } = fresh();
    mkdirSync(blobs, { recursive: true });
    writeFileSync(partial, weights.subarray(0, 1234));
    hub.fault(FILE, 'ignore-range');
    const from = hub.requests.length;
    const snap = await downloadHubModel('tiny/model', { env });
    expect(weightGets(from).map((r) => r.range)).toEqual(['bytes=1234-']);
    // Appended to the part, the whole file would be 1234 bytes too long and fail its hash.
    expect(sha256(bytesOf(join(snap.dir, FILE)))).toBe(SHA256);
  });

  it('a part the server cannot continue (416: as long as the file or longer) is dropped', async () => {
    const { env, blobs, partial } = fresh();
    mkdirSync(blobs, { recursive: true });
    const longer = Buffer.concat([Buffer.from(weights), Buffer.from('left over')]);
    writeFileSync(partial, longer);
    // The hub's size (X-Linked-Size) is that of `weights`: a part longer than it is asked for
    // from its end, which the server answers 416; the retry asks for the whole file.
    const from = hub.requests.length;
    const snap = await downloadHubModel('tiny/model', { env });
    expect(weightGets(from).map((r) => r.range)).toEqual([`bytes=${longer.length}-`, undefined]);
    expect(sha256(bytesOf(join(snap.dir, FILE)))).toBe(SHA256);
  });
});
