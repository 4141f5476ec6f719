import { existsSync } from 'node:fs';
import { lstat, mkdir, readdir, readFile, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ToolError, WorkspacePathError } from '../src/errors.js';
import { runPython } from '../src/python-sandbox.js';
import { createPythonTool } from '../src/python-tool.js';
import { ToolRegistry } from '../src/tool-registry.js';
import { Workspace, withWorkspace } from '../src/workspace.js';
import { readWorkspaceFiles, writeWorkspaceFiles } from '../src/workspace-sync.js';

describe('Workspace', () => {
  it('creates a private temp dir, resolves paths inside it only, and removes it', async () => {
    const ws = await Workspace.create({ prefix: 'flowgrpo-test-' });
    expect(existsSync(ws.dir)).toBe(true);
    expect(ws.resolve('a/b.txt')).toBe(join(ws.dir, 'a', 'b.txt'));
    expect(() => ws.resolve('../escape.txt')).toThrow(ToolError);
    expect(() => ws.resolve('/etc/passwd')).toThrow(/outside the workspace/);
    await writeFile(ws.resolve('f.txt'), 'x');
    expect(await ws.listFiles()).toEqual(['f.txt']);
    await ws.cleanup();
    expect(existsSync(ws.dir)).toBe(false);
    await ws.cleanup(); // idempotent
  });

  it('resolve refuses a path that leaves through a link in the workspace, or a dangling one', async () => {
    // Real links in a real workspace: a name a tool call gives must not reach a file outside
    // through them (a write through a dangling link would create its target wherever it points).
    await withWorkspace(async (outside) => {
      await withWorkspace(async (ws) => {
        await mkdir(join(ws.dir, 'sub'));
        await symlink(outside.dir, join(ws.dir, 'out'));
        await symlink(join(outside.dir, 'not-yet'), join(ws.dir, 'nowhere'));
        await symlink('sub', join(ws.dir, 'alias'));
        for (const [path, why] of [
          ['out/x.txt', `goes through the link ${join(ws.dir, 'out')} to `],
          ['out', 'outside the workspace'],
          ['nowhere', 'which leads nowhere'],
          ['../escape.txt', 'is outside the workspace'],
        ] as const) {
          const error = (() => {
            try {
              ws.resolve(path);
            } catch (e) {
              return e;
            }
          })();
          expect(WorkspacePathError.isInstance(error), path).toBe(true);
          expect(error).toMatchObject({ code: 'WORKSPACE_PATH_OUTSIDE', path, workspace: ws.dir });
          expect((error as Error).message).toContain(why);
        }
        // A link that stays inside, and names not made yet, resolve as before.
        expect(ws.resolve('alias/f.txt')).toBe(join(ws.dir, 'alias', 'f.txt'));
        expect(ws.resolve('sub/new/deeper.txt')).toBe(join(ws.dir, 'sub', 'new', 'deeper.txt'));
        expect(await outside.listFiles()).toEqual([]);
      });
    });
  });

  it('withWorkspace removes the dir even when the callback throws', async () => {
    let dir = '';
    await expect(
      withWorkspace(async (ws) => {
        dir = ws.dir;
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    expect(dir).not.toBe('');
    expect(existsSync(dir)).toBe(false);
  });
});

// The python tool's workspace copy (src/workspace-sync.ts and the sandbox's launcher), with real
// bubblewrap runs: bounded by a file count, bytes and the call's deadline, reporting what it left
// out, never writing after the call returned, and never costing a file the workspace had.
describe('workspace copy-back', () => {
  const makeFiles = (n: number) =>
    `import os\nfor i in range(${n}): open(f'f{i:06d}', 'w').close()\nprint('made', ${n})`;

  it('stops at the file limit and says how many files it left out, and why', async () => {
    await withWorkspace(async (ws) => {
      const run = await runPython(makeFiles(300), {
        cwd: ws.dir,
        timeoutMs: 20_000,
        limits: { workspaceFiles: 100 },
      });
      expect(run.stdout).toBe('made 300\n');
      expect(run.workspaceSync).toEqual({
        copiedFiles: 100,
        copiedBytes: 0,
        skippedFiles: 200,
        reasons: ['files'],
      });
      expect(await ws.listFiles()).toHaveLength(100);
    });
  });

  it('200,000 empty files: the call returns with what was copied; nothing lands after it', async () => {
    await withWorkspace(async (ws) => {
      const registry = new ToolRegistry([createPythonTool({ name: 'python' })]);
      // The registry's limit is the call's: before the fix the copy back of 200,000 files went
      // on for over a minute after the registry had answered TOOL_TIMEOUT.
      const result = await registry.run(
        'python',
        { code: makeFiles(200_000), timeout: 30 },
        { workspace: ws, timeoutMs: 30_000 },
      );
      const atDelivery = await ws.listFiles();
      expect(result, JSON.stringify(result).slice(0, 600)).toMatchObject({
        ok: true,
        output: { stdout: 'made 200000\n' },
      });
      const report = (result.output as { workspace_not_copied: Record<string, unknown> })
        .workspace_not_copied as { files: number; why: string[]; copied_files: number };
      // The file limit (4096 by default) cut it; on a machine slow enough for the deadline to
      // come first, that is said too, and the counts are then a lower bound.
      expect(report.why[0]).toBe('more files than the workspace file limit');
      expect(report.copied_files).toBeLessThanOrEqual(4096);
      if (report.why.length === 1) {
        expect(report.copied_files).toBe(4096);
        expect(report.files).toBe(200_000 - 4096);
      }
      expect(atDelivery).toHaveLength(report.copied_files);
      // No copy-back work is left running: what is there at delivery is all there will be.
      await new Promise((r) => setTimeout(r, 1_000));
      expect(await ws.listFiles()).toEqual(atDelivery);
    });
  }, 120_000);

  it('a file not carried in (over the byte budget) survives the run', async () => {
    await withWorkspace(async (ws) => {
      await writeFile(join(ws.dir, 'big.bin'), Buffer.alloc(2 * 1024 * 1024, 7));
      await writeFile(join(ws.dir, 'small.txt'), 'carried');
      const run = await runPython(
        "import os\nprint(sorted(os.listdir('.')))\nopen('out.txt', 'w').write('new')",
        { cwd: ws.dir, limits: { workspaceBytes: 1024 * 1024 } },
      );
      // The code never saw big.bin; before the fix the copy back deleted it as "gone".
      expect(run.stdout).toBe("['small.txt']\n");
      expect(await ws.listFiles()).toEqual(['big.bin', 'out.txt', 'small.txt']);
      expect((await readFile(join(ws.dir, 'big.bin'))).length).toBe(2 * 1024 * 1024);
    });
  });

  it("applies the run's deletions only after a complete copy back", async () => {
    await withWorkspace(async (ws) => {
      await mkdir(join(ws.dir, 'dir'));
      await writeFile(join(ws.dir, 'dir', 'a.txt'), 'a');
      await writeFile(join(ws.dir, 'b.txt'), 'b');
      // Complete: the removed file and the emptied directory go on the host too.
      const clean = await runPython(
        "import os, shutil\nshutil.rmtree('dir')\nos.remove('b.txt')\nopen('c.txt', 'w').write('c')",
        { cwd: ws.dir },
      );
      expect(clean.workspaceSync).toMatchObject({ skippedFiles: 0, reasons: [] });
      expect(await ws.listFiles()).toEqual(['c.txt']);
      expect(existsSync(join(ws.dir, 'dir'))).toBe(false);
      // Cut short by the file limit: a file missing from the copy may only not have been
      // copied, so nothing is deleted.
      const cut = await runPython(makeFiles(5), { cwd: ws.dir, limits: { workspaceFiles: 3 } });
      expect(cut.workspaceSync).toMatchObject({
        copiedFiles: 3,
        skippedFiles: 3,
        reasons: ['files'],
      });
      expect(await ws.listFiles()).toContain('c.txt');
    });
  });

  it('writes nothing past the deadline or after an abort, and keeps what was there', async () => {
    await withWorkspace(async (ws) => {
      await writeFile(join(ws.dir, 'old.txt'), 'old');
      const run = {
        files: [
          { path: 'old.txt', data: Buffer.from('new'), mode: 0o644 },
          { path: 'x.txt', data: Buffer.from('x'), mode: 0o644 },
        ],
        dirs: ['d'],
        complete: true,
      };
      const carried = await readWorkspaceFiles(ws.dir, {
        maxEntries: 10,
        maxBytes: 1024,
        deadline: Number.POSITIVE_INFINITY,
      });
      const late = await writeWorkspaceFiles(ws.dir, run, carried, {
        deadline: performance.now() - 1,
      });
      expect(late).toEqual({
        written: 0,
        writtenBytes: 0,
        notWritten: 3,
        timedOut: true,
        tooLong: 0,
        kept: [],
      });
      const controller = new AbortController();
      controller.abort();
      const aborted = await writeWorkspaceFiles(ws.dir, run, carried, {
        deadline: Number.POSITIVE_INFINITY,
        signal: controller.signal,
      });
      expect(aborted.written).toBe(0);
      expect(await ws.listFiles()).toEqual(['old.txt']);
      expect(await readFile(join(ws.dir, 'old.txt'), 'utf8')).toBe('old');
      // With time left, the file is replaced whole and the new ones appear.
      const done = await writeWorkspaceFiles(ws.dir, run, carried, {
        deadline: Number.POSITIVE_INFINITY,
      });
      expect(done).toEqual({
        written: 3,
        writtenBytes: 4,
        notWritten: 0,
        timedOut: false,
        tooLong: 0,
        kept: [],
      });
      expect(await readFile(join(ws.dir, 'old.txt'), 'utf8')).toBe('new');
      expect(await ws.listFiles()).toEqual(['old.txt', 'x.txt']);
    });
  });

  it('a tree 1,200 directories deep goes back and comes in again', async () => {
    // os.walk and os.makedirs recurse once per level and fail near 1,000: the sandbox's launcher
    // crashed on both (the run was reported as SIGKILL, with the launcher's traceback as stderr).
    await withWorkspace(async (ws) => {
      const made = await runPython(
        "import os\nfor i in range(1200):\n    os.mkdir('d'); os.chdir('d')\nopen('leaf', 'w').write('x')",
        { cwd: ws.dir, timeoutMs: 20_000 },
      );
      expect(made).toMatchObject({ exitCode: 0, signal: null, stderr: '' });
      expect(made.workspaceSync).toEqual({
        copiedFiles: 1201,
        copiedBytes: 1,
        skippedFiles: 0,
        reasons: [],
      });
      expect(await ws.listFiles()).toEqual([`${'d/'.repeat(1200)}leaf`]);
      const read = await runPython(`print(open('${'d/'.repeat(1200)}leaf').read())`, {
        cwd: ws.dir,
        timeoutMs: 20_000,
      });
      expect(read).toMatchObject({ stdout: 'x\n', exitCode: 0, stderr: '' });
    });
  }, 60_000);

  it('never copies back a link the code made, nor anything through one', async () => {
    // The code makes links of every kind next to its real files — to a file and a directory
    // outside the workspace, to the workspace's parent, inside it, dangling — and leaves a
    // process behind that keeps turning the directories d0…d7 into links to /usr/lib and back.
    // Before the launcher killed such processes ahead of its walk, that walk (made long by 3,000
    // files of 4 kB, 12 MB through the pipe) entered a d<i> as a directory that had become a link
    // meanwhile, and /usr/lib's files came back as d<i>/os-release, …: 2 runs in 3 here. Expected
    // (from what the code wrote): only its regular files come back, with their contents; no link.
    const code = [
      'import os',
      "for i in range(3000): open(f'e{i:04d}', 'w').write('e' * 4000)",
      "open('real.txt', 'w').write('real')",
      "os.makedirs('sub')",
      "open('sub/data.txt', 'w').write('data')",
      'for i in range(8):',
      "    os.makedirs(f'd{i}')",
      "    open(f'd{i}/inside.txt', 'w').write('inside')",
      "os.symlink('/etc/ld.so.cache', 'to-file')",
      "os.symlink('/usr/lib', 'to-dir')",
      "os.symlink('..', 'up')",
      "os.symlink('../real.txt', 'sub/to-real')",
      "os.symlink('/nowhere', 'dangling')",
      'r, w = os.pipe()',
      'if os.fork() == 0:',
      '    os.setsid()',
      '    while True:',
      '        for i in range(8):',
      "            os.rename(f'd{i}', f'd{i}.real')",
      "            os.symlink('/usr/lib', f'd{i}')",
      "        os.write(w, b'x')",
      '        for i in range(8):',
      "            os.unlink(f'd{i}')",
      "            os.rename(f'd{i}.real', f'd{i}')",
      '# The swapping has begun before the code ends.',
      'os.read(r, 1)',
      "print('left a swapper running')",
    ].join('\n');
    await withWorkspace(async (ws) => {
      const run = await runPython(code, { cwd: ws.dir, timeoutMs: 60_000 });
      expect(run).toMatchObject({ stdout: 'left a swapper running\n', exitCode: 0 });
      expect(run.workspaceSync?.reasons).toEqual([]);
      const files = await ws.listFiles();
      const filler = /^e\d{4}$/;
      // Each d<i> was caught as the directory or as its renamed self (the swapper's first step).
      const swapped = /^d\d(\.real)?\/inside\.txt$/;
      expect(files.filter((f) => !filler.test(f) && !swapped.test(f))).toEqual([
        'real.txt',
        'sub/data.txt',
      ]);
      expect(files.filter((f) => filler.test(f))).toHaveLength(3000);
      expect(files.filter((f) => swapped.test(f)).length).toBeLessThanOrEqual(8);
      const expected: Record<string, string> = { 'real.txt': 'real', 'sub/data.txt': 'data' };
      for (const f of files.filter((f) => !filler.test(f)))
        expect(await readFile(join(ws.dir, f), 'utf8')).toBe(expected[f] ?? 'inside');
      const entries = await readdir(ws.dir, { recursive: true, withFileTypes: true });
      expect(entries.filter((e) => e.isSymbolicLink())).toEqual([]);
    });
  }, 120_000);

  it('never writes through a link the host workspace had, even under a parent left out', async () => {
    await withWorkspace(async (outside) => {
      await withWorkspace(async (ws) => {
        await symlink(outside.dir, join(ws.dir, 'out'));
        // As a cut-short copy back can have it: a file under a directory it did not report.
        const back = await writeWorkspaceFiles(
          ws.dir,
          {
            files: [{ path: 'out/x.txt', data: Buffer.from('x'), mode: 0o644 }],
            dirs: ['out/sub'],
            complete: false,
          },
          { files: [], dirs: [] },
          { deadline: Number.POSITIVE_INFINITY },
        );
        expect(back).toMatchObject({ written: 0, notWritten: 2 });
        expect(await outside.listFiles()).toEqual([]);
        expect(existsSync(join(outside.dir, 'sub'))).toBe(false);
      });
    });
  });

  // A run may replace or delete only what it was given. Where the host has an entry the run never
  // saw (over a budget, or a link) and the run used that path for something else, the host's entry
  // stays and the result names the path.
  it('an over-budget file survives a directory the run made at its name, and is reported', async () => {
    await withWorkspace(async (ws) => {
      const big = Buffer.alloc(2 * 1024 * 1024);
      for (let i = 0; i < big.length; i++) big[i] = (i * 7919) % 251;
      await writeFile(join(ws.dir, 'data'), big);
      const registry = new ToolRegistry([
        createPythonTool({ name: 'python', limits: { workspaceBytes: 1024 * 1024 } }),
      ]);
      // The code never saw `data`: before the fix the copy back deleted the file to make the
      // directory.
      const result = await registry.run(
        'python',
        {
          code: "import os\nos.makedirs('data/sub')\nopen('data/sub/x.txt', 'w').write('x')\nopen('out.txt', 'w').write('o')",
        },
        { workspace: ws },
      );
      expect(result, JSON.stringify(result).slice(0, 600)).toMatchObject({
        ok: true,
        output: {
          workspace_not_copied: {
            files: 3,
            why: ['the workspace already had an entry there that the run was never given (kept)'],
            kept: ['data'],
          },
        },
      });
      expect((await readFile(join(ws.dir, 'data'))).equals(big)).toBe(true);
      expect(await ws.listFiles()).toEqual(['data', 'out.txt']);
    });
  });

  it('a directory with entries the run never saw survives a file the run made at its name', async () => {
    await withWorkspace(async (ws) => {
      // Only `cache` itself goes in: its file is over the byte budget, so the run sees it empty.
      await mkdir(join(ws.dir, 'cache'));
      await writeFile(join(ws.dir, 'cache', 'big.bin'), Buffer.alloc(2 * 1024 * 1024, 5));
      const run = await runPython(
        "import os\nprint(os.listdir('cache'))\nos.rmdir('cache')\nopen('cache', 'w').write('c')",
        { cwd: ws.dir, limits: { workspaceBytes: 1024 * 1024 } },
      );
      expect(run.stdout).toBe('[]\n');
      expect(run.workspaceSync).toEqual({
        copiedFiles: 0,
        copiedBytes: 0,
        skippedFiles: 1,
        reasons: ['kept'],
        kept: ['cache'],
      });
      expect(await ws.listFiles()).toEqual(['cache/big.bin']);
      const big = await readFile(join(ws.dir, 'cache', 'big.bin'));
      expect(big.equals(Buffer.alloc(2 * 1024 * 1024, 5))).toBe(true);
    });
  });

  it('keeps what the run was never given, and skips what the run wrote under it', async () => {
    await withWorkspace(async (ws) => {
      await mkdir(join(ws.dir, 'notes'));
      await writeFile(join(ws.dir, 'notes', 'a.txt'), 'mine');
      await writeFile(join(ws.dir, 'plain'), 'plain');
      await writeFile(join(ws.dir, 'same.txt'), 'host');
      await symlink('plain', join(ws.dir, 'link'));
      // Nothing was carried in (as when the file limit cut the copy in before these). The files
      // under `plain` come without their directories, as a cut-short copy back can have them:
      // before the fix making their parents failed the whole copy back (EEXIST, ENOTDIR).
      const back = await writeWorkspaceFiles(
        ws.dir,
        {
          files: [
            { path: 'notes', data: Buffer.from('run'), mode: 0o644 },
            { path: 'same.txt', data: Buffer.from('run'), mode: 0o644 },
            { path: 'link', data: Buffer.from('run'), mode: 0o644 },
            { path: 'plain/y', data: Buffer.from('run'), mode: 0o644 },
            { path: 'plain/deeper/z', data: Buffer.from('run'), mode: 0o644 },
            { path: 'fresh.txt', data: Buffer.from('run'), mode: 0o644 },
          ],
          dirs: [],
          complete: false,
        },
        { files: [], dirs: [] },
        { deadline: Number.POSITIVE_INFINITY },
      );
      expect(back).toMatchObject({ written: 1, notWritten: 5, timedOut: false });
      expect([...back.kept].sort()).toEqual([
        'link',
        'notes',
        'plain/deeper/z',
        'plain/y',
        'same.txt',
      ]);
      expect(await readFile(join(ws.dir, 'notes', 'a.txt'), 'utf8')).toBe('mine');
      expect(await readFile(join(ws.dir, 'plain'), 'utf8')).toBe('plain');
      expect(await readFile(join(ws.dir, 'same.txt'), 'utf8')).toBe('host');
      expect((await lstat(join(ws.dir, 'link'))).isSymbolicLink()).toBe(true);
      expect(await readFile(join(ws.dir, 'fresh.txt'), 'utf8')).toBe('run');
      expect((await readdir(ws.dir)).sort()).toEqual([
        'fresh.txt',
        'link',
        'notes',
        'plain',
        'same.txt',
      ]);
    });
  });

  it('a file the run turned into a directory, and a directory into a file, change on the host', async () => {
    await withWorkspace(async (ws) => {
      await writeFile(join(ws.dir, 'x'), 'file');
      await mkdir(join(ws.dir, 'y', 'sub'), { recursive: true });
      await writeFile(join(ws.dir, 'y', 'sub', 'a.txt'), 'a');
      const run = await runPython(
        "import os, shutil\nos.remove('x')\nos.makedirs('x/in')\nopen('x/in/f', 'w').write('1')\nshutil.rmtree('y')\nopen('y', 'w').write('2')",
        { cwd: ws.dir },
      );
      expect(run.workspaceSync).toEqual({
        copiedFiles: 4,
        copiedBytes: 2,
        skippedFiles: 0,
        reasons: [],
      });
      expect(await ws.listFiles()).toEqual(['x/in/f', 'y']);
      expect(await readFile(join(ws.dir, 'y'), 'utf8')).toBe('2');
    });
  });

  it('the copy in stops at its budgets and counts what it left out', async () => {
    await withWorkspace(async (ws) => {
      for (const name of ['a', 'b', 'c', 'd']) await writeFile(join(ws.dir, name), '0123456789');
      const byFiles = await readWorkspaceFiles(ws.dir, {
        maxEntries: 3,
        maxBytes: 1024,
        deadline: Number.POSITIVE_INFINITY,
      });
      expect(byFiles.report).toEqual({
        copiedFiles: 3,
        copiedBytes: 30,
        skippedFiles: 1,
        reasons: ['files'],
      });
      const byBytes = await readWorkspaceFiles(ws.dir, {
        maxEntries: 10,
        maxBytes: 25,
        deadline: Number.POSITIVE_INFINITY,
      });
      expect(byBytes.report).toMatchObject({ copiedFiles: 2, skippedFiles: 2, reasons: ['bytes'] });
      const late = await readWorkspaceFiles(ws.dir, {
        maxEntries: 10,
        maxBytes: 1024,
        deadline: performance.now() - 1,
      });
      expect(late.files).toEqual([]);
      expect(late.report.reasons).toEqual(['time']);
    });
  });
});
