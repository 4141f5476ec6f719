import { lstat, mkdir, realpath } from 'node:fs/promises';
import { dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import type { FlowGrpoErrorOptions } from './errors.js';
import { FileSystemError } from './system-errors.js';

// Files written on behalf of a name from outside (a repo's file list, a revision, a commit) must
// land in the folder they belong to. Checking the name is not enough: a symbolic link to a folder
// somewhere below that folder — placed by the user, another tool, or an earlier hostile download —
// would carry the write elsewhere. So the folders a file goes into are checked on their real
// paths: below the root, each one must be a real folder (its real path is the root's real path
// plus the same names), before anything is created under it and again once it exists. The root
// itself may be a link (a cache moved to another disk and linked back): the user chose it.

/** A write that would leave the folder it belongs to, by name or through a symbolic link. */
export class OutsideFolderError extends FileSystemError {
  static override readonly code = 'PATH_OUTSIDE_FOLDER';
  /** The folder the path had to stay in. */
  readonly folder: string;
  constructor(
    message: string,
    fields: { path: string; folder: string },
    options?: FlowGrpoErrorOptions,
  ) {
    super(message, { path: fields.path }, options);
    this.folder = fields.folder;
  }
}

/** True when `path` is `root` or below it, by name. */
export function isInside(root: string, path: string): boolean {
  const rel = relative(root, path);
  return rel === '' || (rel !== '..' && !rel.startsWith(`..${sep}`) && !isAbsolute(rel));
}

/** The nearest of `path` and its parents that exists (a dangling link counts: it is there). */
async function nearestExisting(path: string): Promise<string> {
  for (let p = path; ; p = dirname(p)) {
    try {
      await lstat(p);
      return p;
    } catch {
      if (dirname(p) === p) return p;
    }
  }
}

/**
 * The real path `path` has or would have: the nearest existing part resolved (links followed),
 * the rest appended as named. A dangling link resolves to nothing: undefined.
 */
export async function realPathOf(path: string): Promise<string | undefined> {
  const abs = resolve(path);
  const existing = await nearestExisting(abs);
  const real = await realpath(existing).catch(() => undefined);
  return real === undefined ? undefined : join(real, relative(existing, abs));
}

/** Throws OutsideFolderError unless `at` is a real folder: `root`'s real path plus the same names. */
async function checkReal(root: string, realRoot: string, at: string, what: string): Promise<void> {
  const expected = join(realRoot, relative(root, at));
  const real = await realpath(at).catch(() => undefined);
  if (real !== expected)
    throw new OutsideFolderError(
      `${what}: ${at} goes through a symbolic link${real === undefined ? ' that leads nowhere' : ` (to ${real})`}; files are written only into real folders inside ${root}`,
      { path: at, folder: root },
      {
        hint: `remove the link (or move what it points at into ${root}); flowgrpo does not write through links it did not make`,
      },
    );
}

/**
 * Checks, creating nothing, that the folder `dir` would lie inside `root` with no symbolic link
 * on the way: below `root` by name, and the part of it that exists made of real folders. `what`
 * says what the folder is for, in the error. A `root` that does not exist yet passes: nothing
 * below it exists either.
 */
export async function checkFolderInside(root: string, dir: string, what: string): Promise<void> {
  if (!isInside(root, dir))
    throw new OutsideFolderError(
      `${what}: ${dir} is not inside ${root}`,
      { path: dir, folder: root },
      { hint: 'this is a bug in the caller: the name should have been refused before' },
    );
  const realRoot = await realpath(root).catch(() => undefined);
  if (realRoot !== undefined) await checkReal(root, realRoot, await nearestExisting(dir), what);
}

/**
 * Creates the folder `dir` (and the folders between it and `root`) inside `root` with no symbolic
 * link on the way: checkFolderInside before anything is created under it, and again after.
 */
export async function makeFolderInside(root: string, dir: string, what: string): Promise<void> {
  await checkFolderInside(root, dir, what);
  await mkdir(dir, { recursive: true });
  await checkReal(root, await realpath(root), dir, what);
}
