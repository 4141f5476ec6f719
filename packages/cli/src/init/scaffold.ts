import { existsSync, mkdirSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { FlowGrpoError, NotADirectoryError, pathInside, systemError } from '@flowgrpo/core';

// Writing a starting point into the user's folder without ever costing them a file: a folder
// that holds anything is refused unless --force, and even then a file the template would write
// that already exists is refused (all of them named) before the first byte is written, as is a
// symbolic link on the way to one (`data` → a folder elsewhere: the files would land there). Each
// file is then created with the 'wx' flag, its folder's real path checked again just before, so
// one that appears meanwhile is not replaced, and a link that appears meanwhile is not followed.

/** Who writes, in the messages of a refused link. */
const WRITER = 'flowgrpo init';

/** `flowgrpo init` into a folder that holds files (without --force), or over existing files. */
export class FolderNotEmptyError extends FlowGrpoError {
  static override readonly code = 'FOLDER_NOT_EMPTY';
  readonly path: string;
  constructor(message: string, path: string, options?: { hint?: string }) {
    super(message, options);
    this.path = path;
  }
}

/** Path (relative to the folder, '/'-separated) → contents. */
export type Files = Map<string, string | Uint8Array>;

/** Refuses `dir` when it is a file, or holds anything and `force` is off. */
export function checkTarget(dir: string, force: boolean): void {
  if (!existsSync(dir)) return;
  if (!statSync(dir).isDirectory())
    throw new NotADirectoryError(
      `${dir} is a file, where init writes a folder`,
      { path: dir, errno: 'ENOTDIR' },
      { hint: 'give init a new or empty folder: flowgrpo init my-run' },
    );
  const entries = readdirSync(dir);
  if (entries.length > 0 && !force)
    throw new FolderNotEmptyError(
      `${dir} is not empty (${entries.length} entr${entries.length === 1 ? 'y' : 'ies'}: ${entries.slice(0, 3).join(', ')}${entries.length > 3 ? ', …' : ''})`,
      dir,
      {
        hint: 'give init a new or empty folder (flowgrpo init my-run), or pass --force to add the files beside these (an existing file is never replaced)',
      },
    );
}

/** Refuses when any of `paths` (relative to `dir`) exists: they would be overwritten. */
export function checkNoneExist(dir: string, paths: Iterable<string>): void {
  const taken = [...paths].filter((p) => existsSync(join(dir, p)));
  if (taken.length === 0) return;
  throw new FolderNotEmptyError(
    `${dir} already holds ${taken.join(', ')}, which init would write`,
    dir,
    {
      hint: `move or rename ${taken.length === 1 ? 'that file' : 'those files'} first, or init into a new folder (init never replaces a file)`,
    },
  );
}

/**
 * Refuses when any of `paths` (relative to `dir`) would be written through a symbolic link inside
 * `dir` (SymlinkRefusedError naming it): checked for all of them before the first write.
 */
export function checkNoLinks(dir: string, paths: Iterable<string>): void {
  for (const path of paths) pathInside(dir, path, WRITER);
}

/** Writes every file, creating folders as needed; 'wx': an existing file is an error, not lost. */
export function writeFiles(dir: string, files: Files): void {
  for (const [path, contents] of files) {
    const target = pathInside(dir, path, WRITER);
    try {
      mkdirSync(dirname(target), { recursive: true });
      // Again once its folders exist: a link made since the first check is refused, not followed.
      pathInside(dir, path, WRITER);
      writeFileSync(target, contents, { flag: 'wx' });
    } catch (cause) {
      throw systemError(cause, { what: 'flowgrpo init', path: target }) ?? cause;
    }
  }
}

/** Every file under `root`, as '/'-separated paths relative to it. */
export function listFiles(root: string, under = root): string[] {
  return readdirSync(under, { withFileTypes: true }).flatMap((entry) => {
    const path = join(under, entry.name);
    return entry.isDirectory()
      ? listFiles(root, path)
      : [relative(root, path).split('\\').join('/')];
  });
}
