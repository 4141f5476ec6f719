import { lstatSync, readlinkSync, realpathSync } from 'node:fs';
import { mkdir, realpath } from 'node:fs/promises';
import { basename, dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import type { FlowGrpoErrorOptions } from './errors.js';
import { FileSystemError } from './system-errors.js';

// Where flowgrpo writes into a folder — a user's (`flowgrpo init DIR`, a run's output_dir) or
// the hub cache, on behalf of a name from outside (a repo's file list, a revision, a commit) —
// every file stays inside that folder on the real path. Checking the name is not enough: a
// symbolic link below the folder, placed by the user, another tool or an earlier hostile
// download (`data` pointing at a data set elsewhere, `snapshots/<commit>` out of the cache),
// would carry the write onto something that is not ours. So it is refused, naming the link,
// before the first byte. The folder itself may be a link: the user chose it (a run folder or a
// cache on another disk).

/** A name that would put a file outside the folder it belongs to (`..`, an absolute path). */
export class PathOutsideFolderError extends FileSystemError {
  static override readonly code: string = 'PATH_OUTSIDE_FOLDER';
  /** The folder the path had to stay in. */
  readonly folder: string;
  constructor(
    fields: { path: string; folder: string; writer: string; message?: string },
    options?: FlowGrpoErrorOptions,
  ) {
    super(
      fields.message ??
        `${fields.writer} would write ${fields.path}, which is outside ${fields.folder}`,
      { path: fields.path },
      { hint: 'name a file inside the folder (no absolute path, no "..")', ...options },
    );
    this.folder = fields.folder;
  }
}

/**
 * A symbolic link on a path flowgrpo would write: the write would land where it points. `through`:
 * the link is a folder above `path`, not `path` itself.
 */
export class SymlinkRefusedError extends PathOutsideFolderError {
  static override readonly code = 'SYMLINK_REFUSED';
  /** Where the link points (readlink), or where the path really leads (`through`). */
  readonly target: string;
  constructor(
    fields: { path: string; target: string; folder: string; writer: string; through?: boolean },
    options?: FlowGrpoErrorOptions,
  ) {
    super(
      {
        ...fields,
        message: fields.through
          ? `${fields.path} goes through a symbolic link (to ${fields.target}); ${fields.writer} writes only into real folders inside ${fields.folder}`
          : `${fields.path} is a symbolic link (→ ${fields.target}); ${fields.writer} writes inside ${fields.folder} and never through a link`,
      },
      {
        hint: fields.through
          ? `remove the link (or move what it points at into ${fields.folder}); flowgrpo does not write through links it did not make`
          : `remove the link (rm ${fields.path} removes the link only, not what it points to), or give ${fields.writer} a folder without one`,
        ...options,
      },
    );
    this.target = fields.target;
  }
}

/** True when `path` is `folder` or lies inside it, by name (both absolute). */
export function isWithin(path: string, folder: string): boolean {
  const rel = relative(folder, path);
  return rel === '' || (rel !== '..' && !rel.startsWith(`..${sep}`) && !isAbsolute(rel));
}

/**
 * `path` (absolute, or relative to the working directory) with every symbolic link resolved, as
 * the file system will follow it. A path that does not exist yet (or a link that leads nowhere)
 * is its nearest existing ancestor's real path followed by the rest as given.
 */
export function realPathOf(path: string): string {
  const rest: string[] = [];
  for (let at = resolve(path); ; at = dirname(at)) {
    try {
      return join(realpathSync(at), ...rest);
    } catch {
      if (dirname(at) === at) return resolve(path);
      rest.unshift(basename(at));
    }
  }
}

function linkTarget(path: string): string {
  try {
    return readlinkSync(path);
  } catch {
    return '?';
  }
}

/**
 * The absolute path of `rel` inside `folder`, checked for a write: `rel` stays inside `folder`,
 * no existing part of it below `folder` is a symbolic link (SymlinkRefusedError names the first),
 * and the real path of its parent is inside the real path of `folder`. `writer` says who writes
 * ("flowgrpo init", "the run") in the messages.
 */
export function pathInside(folder: string, rel: string, writer: string): string {
  const root = resolve(folder);
  const target = resolve(root, rel);
  if (!isWithin(target, root)) throw new PathOutsideFolderError({ path: target, folder, writer });
  let at = root;
  for (const part of relative(root, target).split(sep).filter(Boolean)) {
    at = join(at, part);
    let link: boolean;
    try {
      link = lstatSync(at).isSymbolicLink();
    } catch {
      break; // the rest does not exist yet: it is created as folders and files of its own
    }
    if (link) throw new SymlinkRefusedError({ path: at, target: linkTarget(at), folder, writer });
  }
  // What the file system will follow: a link that appeared since, or above a `..`, shows here.
  if (target !== root && !isWithin(realPathOf(dirname(target)), realPathOf(root)))
    throw new PathOutsideFolderError({ path: target, folder, writer });
  return target;
}

/** The nearest of `path` and its parents that exists (a dangling link counts: it is there). */
function nearestExisting(path: string): string {
  for (let p = path; ; p = dirname(p)) {
    if (lstatSync(p, { throwIfNoEntry: false })) return p;
    if (dirname(p) === p) return p;
  }
}

/** Throws SymlinkRefusedError unless `at` is a real folder: `root`'s real path plus the same names. */
async function checkReal(root: string, realRoot: string, at: string, writer: string) {
  const expected = join(realRoot, relative(root, at));
  const real = await realpath(at).catch(() => undefined);
  if (real !== expected)
    throw new SymlinkRefusedError({
      path: at,
      target: real ?? `${linkTarget(at)} (which leads nowhere)`,
      folder: root,
      writer,
      through: true,
    });
}

/**
 * Checks, creating nothing, that the folder `dir` would lie inside `root` with no symbolic link
 * on the way: below `root` by name, and the part of it that exists made of real folders. `writer`
 * says who writes, in the error. A `root` that does not exist yet passes: nothing below it does.
 */
export async function checkFolderInside(root: string, dir: string, writer: string): Promise<void> {
  if (!isWithin(dir, root))
    throw new PathOutsideFolderError(
      { path: dir, folder: root, writer },
      { hint: 'this is a bug in the caller: the name should have been refused before' },
    );
  const realRoot = await realpath(root).catch(() => undefined);
  if (realRoot !== undefined) await checkReal(root, realRoot, nearestExisting(dir), writer);
}

/**
 * Creates the folder `dir` (and the folders between it and `root`) inside `root` with no symbolic
 * link on the way: checkFolderInside before anything is created under it, and again after.
 */
export async function makeFolderInside(root: string, dir: string, writer: string): Promise<void> {
  await checkFolderInside(root, dir, writer);
  await mkdir(dir, { recursive: true });
  await checkReal(root, await realpath(root), dir, writer);
}
