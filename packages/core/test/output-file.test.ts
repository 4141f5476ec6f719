import {
  mkdirSync,
  readdirSync,
  readFileSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  checkOutputFile,
  IsADirectoryError,
  NotADirectoryError,
  SymlinkRefusedError,
  writeOutputFile,
} from '../src/index.js';
import { testDir } from './temp-dir.js';

const tmp = testDir('output-file');

describe('a file the user names for us to write', () => {
  it('replaces a file whole and leaves no temporary file beside it', async () => {
    const path = join(tmp, 'results.json');
    writeFileSync(path, 'old');
    await writeOutputFile(path, '{"new":true}\n', '--out');
    expect(readFileSync(path, 'utf8')).toBe('{"new":true}\n');
    expect(readdirSync(tmp).filter((f) => f.includes('results.json'))).toEqual(['results.json']);
  });

  it('never writes through a symbolic link: the link is named and what it points at is kept', async () => {
    const theirs = join(tmp, 'their-data.jsonl');
    writeFileSync(theirs, 'a data set\n');
    const link = join(tmp, 'rows.jsonl');
    symlinkSync(theirs, link);
    const error = await writeOutputFile(link, 'rows\n', '--out').catch((e: unknown) => e);
    expect(SymlinkRefusedError.isInstance(error)).toBe(true);
    expect((error as Error).message).toBe(
      `${link} is a symbolic link (→ ${theirs}); --out writes inside ${tmp} and never through a link`,
    );
    expect(readFileSync(theirs, 'utf8')).toBe('a data set\n');
    // A dangling link is refused as well: writing would create a file where it points.
    const dangling = join(tmp, 'dangling.json');
    symlinkSync(join(tmp, 'nowhere', 'x.json'), dangling);
    expect(() => checkOutputFile(dangling, '--out')).toThrow(SymlinkRefusedError);
  });

  it('refuses a folder, and a failed write keeps the old file and leaves no temporary file', async () => {
    const folder = join(tmp, 'a-folder');
    mkdirSync(folder);
    expect(() => checkOutputFile(folder, '--out')).toThrow(IsADirectoryError);
    // A path that cannot be written (its parent is a file): the system's error, typed, naming the
    // option, and nothing changes.
    const parentIsFile = join(tmp, 'results.json', 'inner.json');
    const error = await writeOutputFile(parentIsFile, 'x', '--out').catch((e: unknown) => e);
    expect(NotADirectoryError.isInstance(error)).toBe(true);
    expect((error as Error).message).toContain('--out');
    expect(readFileSync(join(tmp, 'results.json'), 'utf8')).toBe('{"new":true}\n');
    expect(statSync(tmp).isDirectory()).toBe(true);
  });
});
