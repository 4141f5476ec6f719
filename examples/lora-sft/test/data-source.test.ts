// Where stories260K comes from when ../shared is absent: the llama2.c files of the hub repo
// karpathy/tinyllamas, served by a local stand-in of the Hub's HTTP API; offline with an empty
// cache, the skip line says what was tried and how to get them.
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FakeHub, startFakeHub } from '../../../test-utils/fake-hub.js';
import { stories260K } from '../src/data-source.js';

const tmp = mkdtempSync(join(tmpdir(), 'flowgrpo-example-lora-hub-'));
let hub: FakeHub;
const checkpoint = new Uint8Array(4096).map((_, i) => i % 251);

beforeAll(async () => {
  hub = await startFakeHub([
    {
      type: 'model',
      repo: 'karpathy/tinyllamas',
      commit: '8'.repeat(40),
      files: {
        'README.md': 'llama2.c models',
        'stories15M.bin': 'a bigger model, never downloaded',
        'stories260K/stories260K.bin': checkpoint,
        'stories260K/tok512.bin': 'tokenizer bytes',
        'stories260K/stories260K.pt': 'the PyTorch checkpoint, never downloaded',
      },
    },
  ]);
});
afterAll(async () => {
  await hub?.close();
  rmSync(tmp, { recursive: true, force: true });
});

describe('stories260K', () => {
  it('without ../shared, downloads the two llama2.c files of karpathy/tinyllamas, and only those', async () => {
    const skipped: string[] = [];
    const env = { HF_ENDPOINT: hub.url, HF_HOME: join(tmp, 'hf') };
    const found = await stories260K(undefined, (r) => skipped.push(r), { env });
    expect(skipped).toEqual([]);
    expect(found?.from).toContain("the hub's karpathy/tinyllamas");
    expect(readFileSync(found?.model as string)).toEqual(Buffer.from(checkpoint));
    expect(readFileSync(found?.tokenizer as string, 'utf8')).toBe('tokenizer bytes');
    expect(found?.model.endsWith(join('stories260K', 'stories260K.bin'))).toBe(true);
    expect(
      hub
        .downloads()
        .map((r) => r.path)
        .sort(),
    ).toEqual([
      '/karpathy/tinyllamas/resolve/8888888888888888888888888888888888888888/stories260K/stories260K.bin',
      '/karpathy/tinyllamas/resolve/8888888888888888888888888888888888888888/stories260K/tok512.bin',
    ]);
  });

  it('uses ../shared when it holds them, with no request', async () => {
    const dir = join(tmp, 'shared', 'models', 'stories260K');
    mkdirSync(dir, { recursive: true });
    for (const f of ['stories260K.bin', 'tok512.bin']) writeFileSync(join(dir, f), '');
    const seen = hub.requests.length;
    const found = await stories260K(join(tmp, 'shared'), () => {}, {
      env: { HF_ENDPOINT: hub.url },
    });
    expect(found).toEqual({
      model: join(dir, 'stories260K.bin'),
      tokenizer: join(dir, 'tok512.bin'),
      from: dir,
    });
    expect(hub.requests.length).toBe(seen);
  });
});

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const TSX = pathToFileURL(join(ROOT, 'node_modules/tsx/dist/loader.mjs')).href;

describe('pnpm example lora-sft without ../shared and without the hub', () => {
  it('skips (exit 0) with a line that says what was tried and how to get the files', async () => {
    const empty = join(tmp, 'empty');
    mkdirSync(empty, { recursive: true });
    const run = await new Promise<{ code: number; stdout: string }>((done) =>
      execFile(
        process.execPath,
        [
          '--conditions=@flowgrpo/source',
          '--import',
          TSX,
          join(ROOT, 'examples/lora-sft/src/main.ts'),
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
      /^lora-sft: skipped — stories260K is read from \.\.\/shared\/models\/stories260K \(or \$FLOWGRPO_SHARED\), which is absent, and the download of stories260K\/stories260K\.bin and stories260K\/tok512\.bin from the hub repo karpathy\/tinyllamas at https:\/\/huggingface\.co failed: \[HUB_OFFLINE\] /,
    );
    expect(run.stdout).toContain(
      'pnpm flowgrpo data fetch karpathy/tinyllamas --type model --file stories260K/stories260K.bin --file stories260K/tok512.bin',
    );
  }, 60_000);
});
