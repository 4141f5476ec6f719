import { execFileSync, spawnSync } from 'node:child_process';
import {
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FakeHub, startFakeHub } from '../../../test-utils/fake-hub.js';
import {
  downloadHubDataset,
  downloadHubFiles,
  downloadHubModel,
  HubIntegrityError,
  HubNameError,
  hubRepoIdProblem,
  hubRevisionProblem,
  repoFilePathProblem,
  SymlinkRefusedError,
} from '../src/index.js';
import { testDir } from './temp-dir.js';

// Names from outside — a repo id or revision the user typed, the commit and file names a hub
// answers with, the commit a cache's ref file holds — against a local stand-in of the hub that
// answers hostile ones, and symbolic links placed in a real HF cache in a temp folder. Each name
// is refused naming it and where it came from, before any request or write it would lead to; no
// write goes through a link. Every case has a folder of its own (`root`) holding HF_HOME and,
// where a test needs one, a folder outside the cache: a file written outside the cache would
// show up in `root`, which is listed whole.

const dir = testDir('hub-names');
const COMMIT = 'a'.repeat(40);
const PR_COMMIT = 'b'.repeat(40);
const FILES = {
  'config.json': '{"model_type":"qwen2"}',
  'tokenizer.json': '{}',
  'model.safetensors': new Uint8Array(1000).fill(7),
};
let hub: FakeHub;
let n = 0;
const git = spawnSync('git', ['--version']).status === 0;

/** A fresh folder for one case: HF_HOME is root/home. */
function caseRoot(): { root: string; home: string; env: Record<string, string> } {
  const root = join(dir, `case-${++n}`);
  mkdirSync(root);
  const home = join(root, 'home');
  return { root, home, env: { HF_ENDPOINT: hub.url, HF_HOME: home } };
}

beforeAll(async () => {
  hub = await startFakeHub([
    {
      type: 'model',
      repo: 'acme/tiny',
      commit: COMMIT,
      refs: { 'refs/pr/1': PR_COMMIT, 'feature/x': COMMIT },
      files: FILES,
    },
    // Each answers its revision with a commit that, as a path, climbs out of snapshots/.
    {
      type: 'model',
      repo: 'evil/sha',
      commit: COMMIT,
      answerSha: '../../../../sha-escape',
      files: FILES,
    },
    { type: 'model', repo: 'liar/sha', commit: COMMIT, answerSha: 'c'.repeat(40), files: FILES },
    {
      type: 'dataset',
      repo: 'acme/data',
      commit: COMMIT,
      files: { 'main/train-00000-of-00001.parquet': new Uint8Array(500).fill(3) },
    },
  ]);
});
afterAll(() => hub.close());

const requestsSince = (from: number) => hub.requests.slice(from);
const refusal = async (p: Promise<unknown>) => {
  const e = await p.then(
    () => undefined,
    (x: unknown) => x,
  );
  expect(e, 'the call should have been refused').toBeDefined();
  return e as Error;
};

describe('the rules, against their references', () => {
  it("repo ids: huggingface_hub's validate_repo_id examples", () => {
    // From validate_repo_id's docstring (huggingface_hub/utils/_validators.py): valid "foo/bar",
    // "Foo-BAR_foo.bar123"; not valid "datasets/foo/bar", ".repo_id", "foo--bar", "foo.git";
    // "other..repo..id" is its example of the '..' rule; the name is at most 96 characters.
    for (const ok of ['foo/bar', 'org/Foo-BAR_foo.bar123', 'Qwen/Qwen2.5-0.5B-Instruct', 'a/b'])
      expect(hubRepoIdProblem(ok), ok).toBeUndefined();
    expect(hubRepoIdProblem(`org/${'x'.repeat(96)}`)).toBeUndefined();
    const bad: Record<string, string> = {
      'datasets/foo/bar': "it must be org/name, with exactly one '/'",
      foo: "it must be org/name, with exactly one '/'",
      'org/.repo_id': 'neither first nor last',
      'org/foo--bar': "it cannot contain '--' or '..'",
      'org/other..repo..id': "it cannot contain '--' or '..'",
      'org/foo.git': "it cannot end in '.git'",
      [`org/${'x'.repeat(97)}`]: 'at most 96 characters',
      '../x': 'neither first nor last',
      'org/café': 'letters, digits',
    };
    for (const [repo, why] of Object.entries(bad))
      expect(hubRepoIdProblem(repo), repo).toContain(why);
  });

  it.skipIf(!git)('revisions: valid exactly when git check-ref-format says so', () => {
    // git itself is the reference: a branch or tag the hub can have is a git ref name.
    const revisions = [
      'main',
      'v1.0',
      'v1.0+build.5',
      'refs/pr/1',
      'refs/convert/parquet',
      'feature/x',
      COMMIT,
      'ünïcode',
      '../x',
      'main/../../../../escape-ref',
      'a/../b',
      '/abs',
      'a//b',
      'a/',
      '.hidden',
      'a/.b',
      'x.lock',
      'a/x.lock/b',
      'a\\b',
      'a b',
      'tab\there',
      'a~1',
      'a^',
      'a:b',
      'a?',
      'a*',
      'a[0]',
      '@',
      'a@{1}',
      'a.',
      'a\u007fb',
    ];
    for (const r of revisions) {
      const byGit = spawnSync('git', ['check-ref-format', '--allow-onelevel', r]).status === 0;
      expect(hubRevisionProblem(r) === undefined, `${JSON.stringify(r)}: git says ${byGit}`).toBe(
        byGit,
      );
    }
    // What argv cannot carry to git, and the bound of one file name.
    expect(hubRevisionProblem('a\u0000b')).toBe('it contains a space or a control character');
    expect(hubRevisionProblem('')).toBe('it is empty');
    expect(hubRevisionProblem('x'.repeat(256))).toBe('it is longer than 255 characters');
  });

  it("repo file names: huggingface_hub's _validate_relative_filename cases, and no empty or '.' part", () => {
    // Its refusals: a '..' segment (by '/' or '\'), absolute, drive and UNC paths.
    for (const ok of [
      'config.json',
      'main/test-00000-of-00001.parquet',
      'a b/ü.bin',
      '.gitattributes',
    ])
      expect(repoFilePathProblem(ok), ok).toBeUndefined();
    const bad: Record<string, string> = {
      '../x': "a '..' part",
      'a/../../b': "a '..' part",
      '/etc/passwd': 'absolute',
      'a\\..\\b': "'\\'",
      '\\\\host\\share\\x': "'\\'",
      'C:/Windows/x': 'drive letter',
      'a/D:x': 'drive letter',
      'a//b': 'empty part',
      'a/': 'empty part',
      './a': "a '.' part",
      'a\u0000b': 'control character',
      'a\u001b[31mb': 'control character',
      '': 'it is empty',
    };
    for (const [file, why] of Object.entries(bad))
      expect(repoFilePathProblem(file), JSON.stringify(file)).toContain(why);
  });
});

describe('names from the user', () => {
  it('a revision with .. is refused naming it, before any request or write', async () => {
    for (const id of ['acme/tiny@../escape-ref', 'acme/tiny@main/../../../../escape-ref']) {
      const { root, env } = caseRoot();
      const from = hub.requests.length;
      const e = await refusal(downloadHubModel(id, { env }));
      expect(HubNameError.isInstance(e)).toBe(true);
      const revision = id.slice(id.indexOf('@') + 1);
      expect(e).toMatchObject({
        code: 'HUB_INVALID_NAME',
        repo: 'acme/tiny',
        kind: 'revision',
        source: 'user',
        value: revision,
      });
      expect(e.message).toBe(
        `acme/tiny: the revision ${JSON.stringify(revision)} (from the user) is not valid: it contains '..'`,
      );
      expect(requestsSince(from)).toEqual([]);
      // Not even HF_HOME was made.
      expect(readdirSync(root)).toEqual([]);
    }
  });

  it('an invalid repo id (an object from code, too) is refused the same way', async () => {
    const { root, env } = caseRoot();
    const from = hub.requests.length;
    const e = await refusal(downloadHubModel({ repo: '../../x', revision: 'main' }, { env }));
    expect(e).toMatchObject({ code: 'HUB_INVALID_NAME', kind: 'repo id', source: 'user' });
    expect(requestsSince(from)).toEqual([]);
    expect(readdirSync(root)).toEqual([]);
  });

  it('file names given to downloadHubFiles are checked before the revision is asked for', async () => {
    const { root, env } = caseRoot();
    const from = hub.requests.length;
    const e = await refusal(
      downloadHubFiles('acme/tiny', ['config.json', '../../x.json'], { env }),
    );
    expect(e).toMatchObject({
      code: 'HUB_INVALID_NAME',
      kind: 'file name',
      source: 'user',
      value: '../../x.json',
    });
    expect(requestsSince(from)).toEqual([]);
    expect(readdirSync(root)).toEqual([]);
  });

  it('a revision with / (refs/pr/1, feature/x) is sent URL-encoded and stored as a nested ref', async () => {
    const { home, env } = caseRoot();
    const repoFolder = join(home, 'hub', 'models--acme--tiny');
    for (const [revision, commit] of [
      ['refs/pr/1', PR_COMMIT],
      ['feature/x', COMMIT],
    ] as const) {
      const from = hub.requests.length;
      const snap = await downloadHubModel(`acme/tiny@${revision}`, { env });
      expect(snap.commit).toBe(commit);
      expect(snap.dir).toBe(join(repoFolder, 'snapshots', commit));
      // huggingface_hub quotes the revision with safe="" (quote(revision, safe="")).
      expect(requestsSince(from)[0]?.url).toBe(
        `/api/models/acme/tiny/revision/${revision.replaceAll('/', '%2F')}`,
      );
      // refs/<revision>, as Python's cache stores it: refs/refs/pr/1, refs/feature/x.
      expect(readFileSync(join(repoFolder, 'refs', ...revision.split('/')), 'utf8')).toBe(commit);
    }
    // The nested ref answers offline, without a request.
    const from = hub.requests.length;
    const offline = await downloadHubModel('acme/tiny@refs/pr/1', {
      env: { ...env, HF_HUB_OFFLINE: '1' },
    });
    expect(offline.commit).toBe(PR_COMMIT);
    expect(requestsSince(from)).toEqual([]);
  });
});

describe('names from the hub', () => {
  it('a commit id that climbs out of snapshots/ is refused; nothing is written anywhere', async () => {
    const { root, env } = caseRoot();
    const from = hub.requests.length;
    const e = await refusal(downloadHubModel('evil/sha', { env }));
    expect(e).toMatchObject({
      code: 'HUB_INVALID_NAME',
      repo: 'evil/sha',
      kind: 'commit',
      source: 'server',
      value: '../../../../sha-escape',
    });
    expect(e.message).toBe(
      `evil/sha@main: the commit "../../../../sha-escape" (from the hub at ${hub.url}) is not valid: a commit id is 40 lowercase hex digits`,
    );
    // One request (the revision), no file asked for, and nothing on disk: no ref, no snapshot,
    // no sha-escape/ beside HF_HOME (where the commit's path leads).
    expect(requestsSince(from).map((r) => r.path)).toEqual(['/api/models/evil/sha/revision/main']);
    expect(readdirSync(root)).toEqual([]);
  });

  it('a listing with a file name that is no path inside the repo is refused before anything is written', async () => {
    for (const bad of [
      '../../../../escape.json',
      '/etc/escape.json',
      'a/../../x',
      'C:/x',
      'a//b',
    ]) {
      const repo = `evil/list-${n}`;
      const h = await startFakeHub([
        {
          type: 'model',
          repo,
          commit: COMMIT,
          answerFiles: ['config.json', bad, 'model.safetensors'],
          files: FILES,
        },
      ]);
      try {
        const { root, home } = caseRoot();
        const e = await refusal(
          downloadHubModel(repo, { env: { HF_ENDPOINT: h.url, HF_HOME: home } }),
        );
        expect(e).toMatchObject({ kind: 'file name', source: 'server', value: bad });
        expect(e.message).toContain(`(from the hub at ${h.url})`);
        expect(h.downloads()).toEqual([]);
        expect(readdirSync(root)).toEqual([]);
      } finally {
        await h.close();
      }
    }
  });

  it('a shard name in model.safetensors.index.json that climbs out is refused; nothing is asked for it', async () => {
    const h = await startFakeHub([
      {
        type: 'model',
        repo: 'evil/index',
        commit: COMMIT,
        files: {
          'config.json': '{}',
          'model.safetensors.index.json': JSON.stringify({
            weight_map: { a: '../../../../escaped.safetensors' },
          }),
        },
      },
    ]);
    try {
      const { root, home } = caseRoot();
      const e = await refusal(
        downloadHubModel('evil/index', { env: { HF_ENDPOINT: h.url, HF_HOME: home } }),
      );
      expect(e).toMatchObject({
        code: 'HUB_INVALID_NAME',
        source: 'server',
        value: '../../../../escaped.safetensors',
      });
      expect(e.message).toMatch(/^evil\/index@main \(model\.safetensors\.index\.json\): /);
      expect(h.requests.some((r) => r.path.includes('escaped'))).toBe(false);
      expect(readdirSync(root)).toEqual(['home']);
      expect(existsSync(join(root, 'escaped.safetensors'))).toBe(false);
    } finally {
      await h.close();
    }
  });

  it('an ETag that is no sha1 or sha256 is refused: it would name the blob and check nothing', async () => {
    // Model files are fetched in this order: config.json, tokenizer.json, model.safetensors.
    const resolved = (f: string) => `/evil/etag/resolve/${COMMIT}/${f}`;
    for (const [file, etag, fetched] of [
      ['config.json', '../../../../escape', []],
      ['model.safetensors', 'opaque-tag-v1', [resolved('config.json'), resolved('tokenizer.json')]],
    ] as const) {
      const h = await startFakeHub([
        {
          type: 'model',
          repo: 'evil/etag',
          commit: COMMIT,
          answerEtags: { [file]: etag },
          files: FILES,
        },
      ]);
      try {
        const { root, home } = caseRoot();
        const e = await refusal(
          downloadHubModel('evil/etag', { env: { HF_ENDPOINT: h.url, HF_HOME: home } }),
        );
        expect(HubIntegrityError.isInstance(e)).toBe(true);
        expect(e.message).toBe(
          `the hub sent the ETag ${JSON.stringify(etag)} for evil/etag/${file}, which is no sha1 or sha256`,
        );
        // The bytes of that file were never asked for, and nothing lies beside HF_HOME.
        expect(h.downloads().map((r) => r.path)).toEqual(fetched);
        expect(readdirSync(root)).toEqual(['home']);
      } finally {
        await h.close();
      }
    }
  });

  it('a hub that answers another commit for a commit asked for is refused', async () => {
    const { env } = caseRoot();
    const e = await refusal(downloadHubModel(`liar/sha@${COMMIT}`, { env }));
    expect(HubIntegrityError.isInstance(e)).toBe(true);
    expect(e.message).toContain(`answered the commit ${'c'.repeat(40)} for the commit ${COMMIT}`);
  });
});

describe('names from the cache', () => {
  it('a ref file that holds no commit id is refused offline, naming the file', async () => {
    const { home, env } = caseRoot();
    const refs = join(home, 'hub', 'models--acme--tiny', 'refs');
    mkdirSync(refs, { recursive: true });
    writeFileSync(join(refs, 'main'), '../../../../x\n');
    const e = await refusal(
      downloadHubModel('acme/tiny', { env: { ...env, HF_HUB_OFFLINE: '1' } }),
    );
    expect(e).toMatchObject({ code: 'HUB_INVALID_NAME', kind: 'commit', source: 'cache' });
    expect(e.message).toBe(
      `acme/tiny@main: the commit "../../../../x" (from the cache ${join(refs, 'main')}) is not valid: a commit id is 40 lowercase hex digits`,
    );
  });
});

describe('symbolic links in the cache are not written through', () => {
  /** A folder outside the cache, with one file, that a link points at. */
  function outside(root: string): string {
    const o = join(root, 'outside');
    mkdirSync(o);
    writeFileSync(join(o, 'keep.txt'), 'mine');
    return o;
  }
  const untouched = (o: string) => {
    expect(readdirSync(o)).toEqual(['keep.txt']);
    expect(readFileSync(join(o, 'keep.txt'), 'utf8')).toBe('mine');
  };

  it('snapshots/<commit> linked out of the cache: refused before any file is asked for', async () => {
    const { root, home, env } = caseRoot();
    const o = outside(root);
    const snapshots = join(home, 'hub', 'models--acme--tiny', 'snapshots');
    mkdirSync(snapshots, { recursive: true });
    symlinkSync(o, join(snapshots, COMMIT));
    const before = hub.downloads().length;
    const e = await refusal(downloadHubModel('acme/tiny', { env }));
    expect(SymlinkRefusedError.isInstance(e)).toBe(true);
    expect(e).toMatchObject({
      code: 'SYMLINK_REFUSED',
      folder: join(home, 'hub', 'models--acme--tiny'),
    });
    expect(e.message).toContain(`goes through a symbolic link (to ${o})`);
    expect(hub.downloads().length).toBe(before);
    untouched(o);
  });

  it("a data set's config folder inside the snapshot linked out: refused", async () => {
    const { root, home, env } = caseRoot();
    const o = outside(root);
    const snapshot = join(home, 'hub', 'datasets--acme--data', 'snapshots', COMMIT);
    mkdirSync(snapshot, { recursive: true });
    symlinkSync(o, join(snapshot, 'main'));
    const e = await refusal(downloadHubDataset('acme/data', { env }));
    expect(e).toMatchObject({ code: 'SYMLINK_REFUSED' });
    expect(e.message).toContain(join(snapshot, 'main'));
    untouched(o);
  });

  it('blobs/ and refs/ linked out: refused, nothing written there', async () => {
    for (const folder of ['blobs', 'refs']) {
      const { root, home, env } = caseRoot();
      const o = outside(root);
      const repoFolder = join(home, 'hub', 'models--acme--tiny');
      mkdirSync(repoFolder, { recursive: true });
      symlinkSync(o, join(repoFolder, folder));
      const e = await refusal(downloadHubModel('acme/tiny', { env }));
      expect(e, folder).toMatchObject({ code: 'SYMLINK_REFUSED' });
      untouched(o);
    }
  });

  it('a link at refs/main is replaced, not written through', async () => {
    const { root, home, env } = caseRoot();
    const o = outside(root);
    const refs = join(home, 'hub', 'models--acme--tiny', 'refs');
    mkdirSync(refs, { recursive: true });
    symlinkSync(join(o, 'keep.txt'), join(refs, 'main'));
    await downloadHubModel('acme/tiny', { env });
    expect(lstatSync(join(refs, 'main')).isFile()).toBe(true);
    expect(readFileSync(join(refs, 'main'), 'utf8')).toBe(COMMIT);
    untouched(o);
  });

  it.skipIf(!git)(
    'a link at blobs/<hash>.incomplete is refused, its target untouched',
    async () => {
      const { root, home, env } = caseRoot();
      const o = outside(root);
      const blobs = join(home, 'hub', 'models--acme--tiny', 'blobs');
      mkdirSync(blobs, { recursive: true });
      // config.json is a plain git file: its blob is named by its git blob sha1.
      const sha1 = execFileSync('git', ['hash-object', '--stdin'], { input: FILES['config.json'] })
        .toString()
        .trim();
      symlinkSync(join(o, 'keep.txt'), join(blobs, `${sha1}.incomplete`));
      const e = await refusal(downloadHubModel('acme/tiny', { env }));
      expect(e).toMatchObject({
        code: 'SYMLINK_REFUSED',
        path: join(blobs, `${sha1}.incomplete`),
      });
      untouched(o);
    },
  );

  it('a cache folder that is itself a link (moved to another disk) is used as it is', async () => {
    const { root, home, env } = caseRoot();
    const disk = join(root, 'other-disk');
    mkdirSync(disk);
    mkdirSync(home);
    symlinkSync(disk, join(home, 'hub'));
    const snap = await downloadHubModel('acme/tiny', { env });
    expect(readFileSync(join(snap.dir, 'config.json'), 'utf8')).toBe(FILES['config.json']);
    expect(readdirSync(join(disk, 'models--acme--tiny', 'snapshots'))).toEqual([COMMIT]);
  });
});
