// The demo's folder is its own (claimDemoDir): a project folder is refused before anything is
// written, byte for byte as it was; an empty folder, a demo's, or a demo's from before the marker
// are claimed; a link inside one is refused. On real temp folders and links.
import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { SymlinkRefusedError } from '@flowgrpo/core';
import { OutputDirNotEmptyError } from '@flowgrpo/trainer';
import { afterAll, describe, expect, it } from 'vitest';
import { snapshot, thrown, thrownSync } from '../../../test-utils/folder-snapshot.js';
import { claimDemoDir, DEMO_MARKER } from '../src/demo/demo-dir.js';
import { runDemo } from '../src/demo/pipeline.js';

// Real paths: the errors name them so; a link-free temp root compares equal to them.
const root = realpathSync(mkdtempSync(join(tmpdir(), 'flowgrpo-demo-dir-')));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe("the demo's folder", () => {
  it('runDemo into a project folder is refused before anything; empty, a demo, or an earlier demo: claimed', async () => {
    const project = join(root, 'my-project');
    mkdirSync(join(project, 'data'), { recursive: true });
    writeFileSync(join(project, 'data', 'train.jsonl'), '{"question": "mine"}\n');
    const before = snapshot(project);
    const e = (await thrown(() =>
      runDemo({ outDir: project, quick: true }),
    )) as OutputDirNotEmptyError;
    expect(OutputDirNotEmptyError.isInstance(e)).toBe(true);
    expect(e.message).toContain(`${project} holds data and is not a demo's folder`);
    expect(snapshot(project)).toEqual(before);

    const empty = join(root, 'demo-empty');
    claimDemoDir(empty, 'demo');
    expect(readdirSync(empty)).toEqual([DEMO_MARKER]);
    claimDemoDir(empty, 'demo'); // a demo's: claimed again
    // A demo folder from before the marker, known by its results.json (as runDemo writes it).
    const earlier = join(root, 'demo-earlier');
    mkdirSync(earlier);
    writeFileSync(
      join(earlier, 'results.json'),
      JSON.stringify({ outDir: earlier, evals: [], seed: 1 }),
    );
    claimDemoDir(earlier, 'demo');
    // A link inside a demo's folder: the demo would write through it.
    symlinkSync(join(root, 'elsewhere-demo'), join(empty, 'data'));
    const link = thrownSync(() => claimDemoDir(empty, 'demo')) as SymlinkRefusedError;
    expect([link.code, link.path]).toEqual(['SYMLINK_REFUSED', join(empty, 'data')]);
  });
});
