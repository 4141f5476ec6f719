import { lstatSync, readlinkSync, realpathSync } from 'node:fs';
import { basename, dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import type { FlowGrpoErrorOptions } from './errors.js';
import { FileSystemError } from './system-errors.js';

// Where flowgrpo writes into a user's folder (`flowgrpo init DIR`, a run's output_dir), every file
// stays inside that folder on the real path. A symbolic link the user placed inside it — `data`
// pointing at a data set elsewhere, `metrics.jsonl` at a file of theirs — would send the write out
// of the folder onto something that is not ours, so it is refused, naming the link, before the
// first byte. The folder itself may be a link (the user named it: a run folder on another disk).

/** A symbolic link on a path flowgrpo would write: the write would land where it points. */
export class SymlinkRefusedError extends FileSystemError {
  static override readonly code = 'SYMLINK_REFUSED';
  /** The folder being written into. */
  readonly folder: string;
  /** Where the link points (as readlink gives it). */
  readonly target: string;
  constructor(
    fields: { path: string; target: string; folder: string; writer: string },
    options?: FlowGrpoErrorOptions,
  ) {
    super(
      `${fields.path} is a symbolic link (→ ${fields.target}); ${fields.writer} writes inside ${fields.folder} and never through a link`,
      { path: fields.path },
      {
        hint: `remove the link (rm ${fields.path} removes the link only, not what it points to), or give ${fields.writer} a folder without one`,
        ...options,
      },
    );
    this.folder = fields.folder;
    this.target = fields.target;
  }
}

/** A name that would put a file outside the folder it belongs to (`..`, an absolute path). */
export class PathOutsideFolderError extends FileSystemError {
  static override readonly code = 'PATH_OUTSIDE_FOLDER';
  readonly folder: string;
  constructor(fields: { path: string; folder: string; writer: string }) {
    super(
      `${fields.writer} would write ${fields.path}, which is outside ${fields.folder}`,
      { path: fields.path },
      { hint: 'name a file inside the folder (no absolute path, no "..")' },
    );
    this.folder = fields.folder;
  }
}

/** True when `path` is `folder` or lies inside it (both absolute). */
export function isWithin(path: string, folder: string): boolean {
  const rel = relative(folder, path);
  return rel === '' || (rel !== '..' && !rel.startsWith(`..${sep}`) && !isAbsolute(rel));
}

/**
 * `path` (absolute, or relative to the working directory) with every symbolic link resolved, as
 * the file system will follow it. A path that does not exist yet is its nearest existing
 * ancestor's real path followed by the rest as given.
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
