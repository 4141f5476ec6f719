import { createHash } from 'node:crypto';
import {
  existsSync,
  lstatSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FakeHub, startFakeHub } from '../../../test-utils/fake-hub.js';
import {
  downloadHubDataset,
  downloadHubFiles,
  downloadHubModel,
  downloadHubTokenizer,
  HubGatedError,
  HubIntegrityError,
  HubNotFoundError,
  HubOfflineError,
  hubSettings,
  parseHubRepoId,
  resolveModelSource,
} from '../src/index.js';
import { testDir } from './temp-dir.js';

const dir = testDir('hub');
const COMMIT = 'a'.repeat(40);
// Big enough that a cut leaves a real partial file.
const weights = new Uint8Array(200_000).map((_, i) => (i * 31) % 251);
const shard = (n: number) => new Uint8Array(50_000).fill(n);

let hub: FakeHub;
let n = 0;
/** A fresh cache per test: each starts from nothing unless it says otherwise. */
const envFor = (extra: Record<string, string> = {}) => ({
  HF_ENDPOINT: hub.url,
  HF_HOME: join(dir, `home-${++n}`),
  ...extra,
});

beforeAll(async () => {
  hub = await startFakeHub([
    {
      type: 'model',
      repo: 'tiny/model',
      commit: COMMIT,
      files: {
        'config.json': '{"model_type":"qwen2"}',
        'tokenizer.json': '{}',
        'model.safetensors': weights,
        'pytorch_model.bin': 'never downloaded',
        'README.md': 'never downloaded',
      },
    },
    {
      type: 'model',
      repo: 'tiny/sharded',
      commit: 'b'.repeat(40),
      files: {
        'config.json': '{}',
        'model.safetensors.index.json': JSON.stringify({
          weight_map: {
            a: 'model-00001-of-00002.safetensors',
            b: 'model-00002-of-00002.safetensors',
          },
        }),
        'model-00001-of-00002.safetensors': shard(1),
        'model-00002-of-00002.safetensors': shard(2),
      },
    },
    {
      type: 'model',
      repo: 'meta/gated',
      commit: 'c'.repeat(40),
      token: 'hf_secret',
      files: { 'config.json': '{}', 'model.safetensors': shard(3) },
    },
    {
      type: 'model',
      repo: 'karpathy/tinyllamas',
      commit: 'e'.repeat(40),
      files: {
        'README.md': 'llama2.c models',
        'stories260K/stories260K.bin': shard(7),
        'stories260K/tok512.bin': 'tokens',
        'stories15M.bin': 'never downloaded',
      },
    },
    {
      type: 'dataset',
      repo: 'openai/gsm8k',
      commit: 'd'.repeat(40),
      files: {
        'README.md': '# gsm8k',
        'main/train-00000-of-00001.parquet': shard(4),
        'main/test-00000-of-00001.parquet': shard(5),
        'socratic/train-00000-of-00001.parquet': shard(6),
      },
    },
  ]);
});
afterAll(() => hub.close());

describe('hub names', () => {
  it('parses org/name[@revision] and leaves paths alone', () => {
    expect(parseHubRepoId('Qwen/Qwen2.5-0.5B-Instruct')).toEqual({
      repo: 'Qwen/Qwen2.5-0.5B-Instruct',
      revision: 'main',
    });
    expect(parseHubRepoId('openai/gsm8k@v1.0')).toEqual({ repo: 'openai/gsm8k', revision: 'v1.0' });
    expect(parseHubRepoId('./model')).toBeUndefined();
    expect(parseHubRepoId('/abs/model')).toBeUndefined();
    expect(parseHubRepoId('data/train.jsonl')).toBeUndefined();
    expect(parseHubRepoId('a/b/c')).toBeUndefined();
  });

  it('reads HF_HOME, HF_HUB_CACHE, HF_ENDPOINT, HF_TOKEN and HF_HUB_OFFLINE as huggingface_hub does', () => {
    const s = hubSettings({ HF_HOME: '/h', HF_TOKEN: 't', HF_HUB_OFFLINE: '1' });
    expect(s).toMatchObject({ cacheDir: '/h/hub', token: 't', offline: true });
    expect(s.endpoint).toBe('https://huggingface.co');
    expect(
      hubSettings({ HF_HOME: '/h', HF_HUB_CACHE: '/c', HF_ENDPOINT: 'http://x/' }),
    ).toMatchObject({
      cacheDir: '/c',
      endpoint: 'http://x',
      offline: false,
    });
  });

  it('reads the token a login stored ($HF_HOME/token, or HF_TOKEN_PATH); HF_TOKEN wins', () => {
    const home = mkdtempSync(join(tmpdir(), 'flowgrpo-hf-home-'));
    try {
      expect(hubSettings({ HF_HOME: home }).token).toBeUndefined();
      writeFileSync(join(home, 'token'), 'hf_stored\n');
      expect(hubSettings({ HF_HOME: home }).token).toBe('hf_stored');
      expect(hubSettings({ HF_HOME: home, HF_TOKEN: 'hf_env' }).token).toBe('hf_env');
      writeFileSync(join(home, 'elsewhere'), '  hf_path  ');
      const path = join(home, 'elsewhere');
      expect(hubSettings({ HF_HOME: home, HF_TOKEN_PATH: path }).token).toBe('hf_path');
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });
});

describe('downloadHubModel', () => {
  it("downloads only the model's files into HF's cache layout, then serves a second call from the cache", async () => {
    const env = envFor();
    const snap = await downloadHubModel('tiny/model', { env });
    const repoFolder = join(env.HF_HOME, 'hub', 'models--tiny--model');
    expect(snap.dir).toBe(join(repoFolder, 'snapshots', COMMIT));
    expect(snap.downloaded.sort()).toEqual(['config.json', 'model.safetensors', 'tokenizer.json']);
    expect(readFileSync(join(repoFolder, 'refs', 'main'), 'utf8')).toBe(COMMIT);
    // The snapshot links into blobs/<sha256> (LFS) as Python's cache does.
    const link = join(snap.dir, 'model.safetensors');
    expect(lstatSync(link).isSymbolicLink()).toBe(true);
    const sha = createHash('sha256').update(weights).digest('hex');
    expect(readlinkSync(link)).toBe(join('..', '..', 'blobs', sha));
    expect(readFileSync(link).equals(Buffer.from(weights))).toBe(true);
    expect(existsSync(join(snap.dir, 'pytorch_model.bin'))).toBe(false);
    expect(existsSync(join(snap.dir, 'README.md'))).toBe(false);

    const before = hub.downloads().length;
    const again = await downloadHubModel('tiny/model', { env });
    expect(again.downloaded).toEqual([]);
    expect(hub.downloads().length).toBe(before);
  });

  it('draws a progress bar per downloaded file, to its size', async () => {
    const bars: { label: string; total: number; last: number; stopped: boolean }[] = [];
    const progress = {
      start(label: string, total: number) {
        const bar = { label, total, last: -1, stopped: false };
        bars.push(bar);
        return {
          update: (v: number) => {
            bar.last = v;
          },
          stop: () => {
            bar.stopped = true;
          },
        };
      },
    };
    await downloadHubModel('tiny/model', { env: envFor(), progress });
    const weightsBar = bars.find((b) => b.label === 'model.safetensors');
    expect(weightsBar).toEqual({
      label: 'model.safetensors',
      total: weights.length,
      last: weights.length,
      stopped: true,
    });
    expect(bars.map((b) => b.label).sort()).toEqual([
      'config.json',
      'model.safetensors',
      'tokenizer.json',
    ]);
  });

  it('a tokenizer alone: its files only, never the weights', async () => {
    const env = envFor();
    const before = hub.downloads().length;
    const snap = await downloadHubTokenizer('tiny/model', { env });
    expect(snap.files).toEqual(['tokenizer.json']);
    expect(
      hub
        .downloads()
        .slice(before)
        .some((r) => r.path.startsWith('/lfs/')),
    ).toBe(false);
    expect(
      await resolveModelSource('tiny/model', {
        env,
        cwd: join(dir, 'no-such-cwd'),
        tokenizerOnly: true,
      }),
    ).toBe(snap.dir);
    expect(existsSync(join(snap.dir, 'model.safetensors'))).toBe(false);
  });

  it('downloads the shards a model.safetensors.index.json names', async () => {
    const snap = await downloadHubModel('tiny/sharded', { env: envFor() });
    expect(snap.files).toEqual([
      'config.json',
      'model.safetensors.index.json',
      'model-00001-of-00002.safetensors',
      'model-00002-of-00002.safetensors',
    ]);
    expect(statSync(join(snap.dir, 'model-00002-of-00002.safetensors')).size).toBe(50_000);
  });

  it('honours HF_HUB_CACHE over HF_HOME', async () => {
    const cache = join(dir, 'hub-cache');
    const snap = await downloadHubModel('tiny/model', { env: envFor({ HF_HUB_CACHE: cache }) });
    expect(snap.dir.startsWith(join(cache, 'models--tiny--model'))).toBe(true);
  });

  it('a missing repo is HUB_NOT_FOUND naming it', async () => {
    const e = await downloadHubModel('nobody/nothing', { env: envFor() }).catch((x: unknown) => x);
    expect(HubNotFoundError.isInstance(e)).toBe(true);
    expect((e as Error).message).toContain('nobody/nothing');
  });

  it('a gated repo is HUB_GATED: accept the licence and set HF_TOKEN; with the token it downloads', async () => {
    const e = await downloadHubModel('meta/gated', { env: envFor() }).catch((x: unknown) => x);
    expect(HubGatedError.isInstance(e)).toBe(true);
    expect((e as HubGatedError).code).toBe('HUB_GATED');
    expect((e as HubGatedError).hint).toBe(
      `accept the licence at ${hub.url}/meta/gated and set HF_TOKEN to a token of that account`,
    );
    const snap = await downloadHubModel('meta/gated', { env: envFor({ HF_TOKEN: 'hf_secret' }) });
    expect(snap.downloaded).toContain('model.safetensors');
  });

  it('wrong bytes are HUB_INTEGRITY and nothing is left in the snapshot', async () => {
    const env = envFor();
    hub.fault('model.safetensors', 'corrupt');
    const e = await downloadHubModel('tiny/model', { env }).catch((x: unknown) => x);
    expect(HubIntegrityError.isInstance(e)).toBe(true);
    expect((e as Error).message).toContain('tiny/model/model.safetensors');
    const snap = join(env.HF_HOME, 'hub', 'models--tiny--model', 'snapshots', COMMIT);
    expect(existsSync(join(snap, 'model.safetensors'))).toBe(false);
    // The next try downloads it afresh.
    const ok = await downloadHubModel('tiny/model', { env });
    expect(readFileSync(join(ok.dir, 'model.safetensors')).equals(Buffer.from(weights))).toBe(true);
  });

  it('HF_HUB_OFFLINE serves the cache without a single request, and says so when it is not cached', async () => {
    const env = envFor();
    const online = await downloadHubModel('tiny/model', { env });
    const from = hub.requests.length;
    const offline = await downloadHubModel('tiny/model', { env: { ...env, HF_HUB_OFFLINE: '1' } });
    expect(offline.dir).toBe(online.dir);
    const e = await downloadHubModel('tiny/sharded', {
      env: { ...env, HF_HUB_OFFLINE: '1' },
    }).catch((x: unknown) => x);
    expect(HubOfflineError.isInstance(e)).toBe(true);
    expect((e as Error).message).toContain('HF_HUB_OFFLINE=1');
    expect(hub.requests.length).toBe(from);
  });
});

describe('resolveModelSource', () => {
  it('a local path wins over the hub; org/name goes to the hub', async () => {
    const env = envFor();
    const local = join(dir, 'tiny', 'model');
    await import('node:fs/promises').then((fs) => fs.mkdir(local, { recursive: true }));
    const from = hub.requests.length;
    expect(await resolveModelSource('tiny/model', { cwd: dir, env })).toBe(local);
    expect(hub.requests.length).toBe(from);
    const other = join(dir, 'elsewhere');
    await import('node:fs/promises').then((fs) => fs.mkdir(other, { recursive: true }));
    expect(await resolveModelSource('tiny/model', { cwd: other, env })).toContain(
      'models--tiny--model',
    );
  });
});

describe('downloadHubDataset', () => {
  it("downloads one config's split only (TRL's dataset_name + dataset_config + split)", async () => {
    const env = envFor();
    const ds = await downloadHubDataset('openai/gsm8k', { env, config: 'main', split: 'test' });
    expect(ds.files).toEqual(['main/test-00000-of-00001.parquet']);
    expect(ds.paths[0]).toBe(
      join(
        env.HF_HOME,
        'hub',
        'datasets--openai--gsm8k',
        'snapshots',
        'd'.repeat(40),
        'main',
        'test-00000-of-00001.parquet',
      ),
    );
    expect(hub.downloads().some((r) => r.path.includes('README'))).toBe(false);
  });

  it('several configs and none named, or an unknown split, say which there are', async () => {
    await expect(downloadHubDataset('openai/gsm8k', { env: envFor() })).rejects.toThrow(
      /several configs \(main, socratic\)/,
    );
    await expect(
      downloadHubDataset('openai/gsm8k', { env: envFor(), config: 'socratic', split: 'test' }),
    ).rejects.toThrow(/no split 'test' \(its files name: train\)/);
  });
});

describe('downloadHubFiles', () => {
  it('fetches the named files of a repo that is no transformers model (hf_hub_download)', async () => {
    const env = envFor();
    const files = ['stories260K/stories260K.bin', 'stories260K/tok512.bin'];
    const r = await downloadHubFiles('karpathy/tinyllamas', files, { env });
    expect(r.downloaded).toEqual(files);
    expect(readFileSync(r.paths[1] as string, 'utf8')).toBe('tokens');
    expect(readFileSync(r.paths[0] as string)).toEqual(Buffer.from(shard(7)));
    expect(hub.downloads().some((d) => d.path.includes('stories15M'))).toBe(false);
    // Cached: the second call downloads nothing.
    expect((await downloadHubFiles('karpathy/tinyllamas', files, { env })).downloaded).toEqual([]);
  });

  it('a listed file the hub then cannot serve leaves no empty snapshot folder behind', async () => {
    // Python's snapshot_download(local_files_only=True) takes an existing snapshot folder for a
    // cached one, so a failed download must not create it.
    const h = await startFakeHub([
      {
        type: 'model',
        repo: 'half/listed',
        commit: 'e'.repeat(40),
        answerFiles: ['ghost.bin'],
        files: {},
      },
    ]);
    try {
      const env = { HF_ENDPOINT: h.url, HF_HOME: join(dir, `home-${++n}`) };
      const e = await downloadHubFiles('half/listed', ['ghost.bin'], { env }).catch(
        (x: unknown) => x,
      );
      expect(HubNotFoundError.isInstance(e)).toBe(true);
      const repoFolder = join(env.HF_HOME, 'hub', 'models--half--listed');
      expect(readdirSync(repoFolder)).toEqual(['refs']);
    } finally {
      await h.close();
    }
  });

  it('a file the repo does not have is HUB_NOT_FOUND naming it, before anything is downloaded', async () => {
    const seen = hub.downloads().length;
    const error = await downloadHubFiles(
      'karpathy/tinyllamas',
      ['stories260K/tok512.bin', 'x.bin'],
      {
        env: envFor(),
      },
    ).catch((e: unknown) => e);
    expect(HubNotFoundError.isInstance(error)).toBe(true);
    expect((error as Error).message).toMatch(/^karpathy\/tinyllamas@main has no x\.bin/);
    expect(hub.downloads().length).toBe(seen);
  });
});
