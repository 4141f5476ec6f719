import { randomBytes } from 'node:crypto';
import { constants as fsConstants } from 'node:fs';
import {
  lstat,
  mkdir,
  open,
  opendir,
  readdir,
  realpath,
  rename,
  rm,
  rmdir,
} from 'node:fs/promises';
import { dirname, join, sep } from 'node:path';
import { isSafeRelativePath, type WorkspaceFile } from './sandbox-launcher.js';

// Copying a host workspace into a sandboxed run and the run's files back, within budgets: a number
// of entries (files and directories alike), a number of bytes, and the call's deadline, shared
// with the run. Code that leaves 200,000 empty files fits any byte budget, and writing them on
// the host takes minutes: every copy stops at its budget and says what it left out, and nothing is
// written once the deadline has passed or the caller has aborted — so nothing lands in the
// workspace after the call returned.
//
// Nothing the user had is lost to a budget: a run may replace or delete only what it was given.
// Entries that were not carried in (over budget, or links, which never are) are never touched on
// the way back — where the run used such a path itself (a directory where the host has a file it
// never saw, a file where the host has a directory with entries it never saw, a file over one it
// never saw), the host's entry stays, the run's entry and everything under it are not written, and
// the result names the path. A file the run changed replaces the old one by a rename (never a
// window without either); a directory is replaced by a file only when every entry under it went
// in. Deletions made by the run are applied only when the copy-back was complete — a file absent
// from a cut-short copy may just not have been copied.

/**
 * Why entries were left out: over the entry count, over the byte budget, past the deadline, a
 * path longer than the host allows (a tree thousands of directories deep), or, on the way back, a
 * path where the host workspace kept an entry the run was never given.
 */
export type SyncLimitReason = 'files' | 'bytes' | 'time' | 'paths' | 'kept';

export interface SyncBudget {
  /** Entries (files and directories) at most. */
  maxEntries: number;
  maxBytes: number;
  /** `performance.now()` time after which nothing more is copied. */
  deadline: number;
  signal?: AbortSignal | undefined;
}

/** What one copy did, for the run's result. */
export interface WorkspaceSyncReport {
  /** Files and directories copied. */
  copiedFiles: number;
  /** Bytes of file contents copied. */
  copiedBytes: number;
  /** Files and directories left out; a lower bound when `reasons` includes 'time'. */
  skippedFiles: number;
  reasons: SyncLimitReason[];
  /**
   * With reason 'kept': where the host workspace kept an entry the run was never given and the
   * run's entry there (with anything under it) was not written; the first `KEPT_LISTED`.
   */
  kept?: string[];
}

export interface CarriedWorkspace {
  files: WorkspaceFile[];
  dirs: string[];
  report: WorkspaceSyncReport;
}

export function emptySyncReport(): WorkspaceSyncReport {
  return { copiedFiles: 0, copiedBytes: 0, skippedFiles: 0, reasons: [] };
}

/** Adds `reason` to `reasons` once. */
export function addReason(reasons: SyncLimitReason[], reason: SyncLimitReason): void {
  if (!reasons.includes(reason)) reasons.push(reason);
}

const stopped = (budget: Pick<SyncBudget, 'deadline' | 'signal'>) =>
  budget.signal?.aborted === true || performance.now() > budget.deadline;

/**
 * Regular files and directories under `dir`, within the budget (symlinks and special files are
 * skipped). Past the deadline it stops walking; otherwise it counts what it leaves out.
 */
export async function readWorkspaceFiles(
  dir: string,
  budget: SyncBudget,
): Promise<CarriedWorkspace> {
  const files: WorkspaceFile[] = [];
  const dirs: string[] = [];
  const report = emptySyncReport();
  const entriesLeft = () => budget.maxEntries - files.length - dirs.length;
  const walk = async (rel: string): Promise<boolean> => {
    for (const entry of await readdir(join(dir, rel), { withFileTypes: true })) {
      if (stopped(budget)) {
        addReason(report.reasons, 'time');
        return false;
      }
      const child = rel ? `${rel}/${entry.name}` : entry.name;
      if (entry.isDirectory()) {
        if (entriesLeft() > 0) dirs.push(child);
        else {
          report.skippedFiles++;
          addReason(report.reasons, 'files');
        }
        if (!(await walk(child))) return false;
      } else if (entry.isFile()) {
        if (entriesLeft() <= 0) {
          report.skippedFiles++;
          addReason(report.reasons, 'files');
          continue;
        }
        const handle = await open(join(dir, child), fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW);
        try {
          const info = await handle.stat();
          if (report.copiedBytes + info.size > budget.maxBytes) {
            report.skippedFiles++;
            addReason(report.reasons, 'bytes');
            continue;
          }
          const data = await handle.readFile();
          report.copiedBytes += data.length;
          files.push({ path: child, data, mode: info.mode & 0o777 });
        } finally {
          await handle.close();
        }
      }
    }
    return true;
  };
  await walk('');
  report.copiedFiles = files.length + dirs.length;
  return { files, dirs, report };
}

/**
 * A path longer than the host allows (a tree thousands of directories deep): that entry is not
 * written, like one over a budget, instead of failing the copy.
 */
const tooLong = (error: unknown) => (error as { code?: unknown } | null)?.code === 'ENAMETOOLONG';

/** A directory, or a parent, that cannot be made because the host has a file in the way. */
const fileInTheWay = (error: unknown) => {
  const code = (error as { code?: unknown } | null)?.code;
  return code === 'EEXIST' || code === 'ENOTDIR';
};

/** Files written back at once. */
const WRITERS = 8;

/** Paths named in a result where the host kept its entry: enough to act on, bounded in size. */
const KEPT_LISTED = 10;

/** A path as it is in the host workspace: absent, a directory, a regular file, or something else. */
async function kindOf(full: string): Promise<'none' | 'dir' | 'file' | 'other'> {
  const info = await lstat(full).catch(() => undefined);
  if (!info) return 'none';
  if (info.isDirectory()) return 'dir';
  return info.isFile() ? 'file' : 'other';
}

/**
 * Writes the run's files and directories back into `dir`, within `budget.deadline` and the
 * caller's abort. `carried` is what went in; `complete` says whether the run's side reported
 * every entry (no budget cut it short): only then are entries the run deleted removed. Only
 * directories and regular files are created (never links), each path is checked to stay inside
 * `dir`, and a path the run turned from a file into a directory (or back) is replaced when what
 * was there went in; otherwise the host's entry is kept and named in `kept`.
 */
export async function writeWorkspaceFiles(
  dir: string,
  run: { files: WorkspaceFile[]; dirs: string[]; complete: boolean },
  carried: { files: WorkspaceFile[]; dirs: string[] },
  budget: Pick<SyncBudget, 'deadline' | 'signal'>,
): Promise<{
  written: number;
  writtenBytes: number;
  notWritten: number;
  timedOut: boolean;
  tooLong: number;
  kept: string[];
}> {
  const dirs = run.dirs.filter(isSafeRelativePath);
  const files = run.files.filter((f) => isSafeRelativePath(f.path));
  const carriedFiles = new Set(carried.files.map((f) => f.path));
  const carriedDirs = new Set(carried.dirs);
  let written = 0;
  let writtenBytes = 0;
  const total = dirs.length + files.length;
  let longPaths = 0;
  const kept: string[] = [];
  const cut = () => ({
    written,
    writtenBytes,
    notWritten: total - written,
    timedOut: true,
    tooLong: longPaths,
    kept,
  });
  const root = await realpath(dir);
  // Directories known to be real and inside the workspace (checked, or made by this copy).
  const inside = new Set<string>([dir]);
  // A parent the run did not report (left out by a budget) may be a link the host workspace
  // already had: nothing is ever created where its parent resolves outside the workspace.
  // Checked on the nearest parent that exists, before any directory is made below it.
  const parentInside = async (full: string): Promise<boolean> => {
    if (inside.has(dirname(full))) return true;
    for (let parent = dirname(full); ; parent = dirname(parent)) {
      const real = await realpath(parent).catch(() => undefined);
      if (real !== undefined) return real === root || real.startsWith(`${root}${sep}`);
    }
  };
  // The run's directories not made because the host kept its entry there (or above): nothing
  // under them is written either.
  const blocked = new Set<string>();
  const keep = (rel: string) => {
    if (kept.length < KEPT_LISTED) kept.push(rel);
  };
  // Walks up to the nearest directory known to be made or checked; the run lists a directory
  // before what is in it, so that is mostly the parent.
  const underBlocked = (full: string): boolean => {
    if (blocked.size === 0) return false;
    for (let parent = dirname(full); !inside.has(parent); parent = dirname(parent)) {
      if (blocked.has(parent)) return true;
      if (parent === dirname(parent)) return false;
    }
    return false;
  };
  // Whether the run saw all of the host directory `rel`: it and every entry under it went in.
  // Stops at the first entry that did not (a directory left out may hold any number).
  const sawAllOf = async (rel: string): Promise<boolean> => {
    if (!carriedDirs.has(rel)) return false;
    const stack = [rel];
    for (let at = stack.pop(); at !== undefined; at = stack.pop()) {
      for await (const entry of await opendir(join(dir, at))) {
        const child = `${at}/${entry.name}`;
        if (entry.isDirectory() && carriedDirs.has(child)) stack.push(child);
        else if (!(entry.isFile() && carriedFiles.has(child))) return false;
      }
    }
    return true;
  };
  for (const rel of dirs) {
    if (stopped(budget)) return cut();
    const full = join(dir, rel);
    if (underBlocked(full)) {
      blocked.add(full);
      continue;
    }
    if (!(await parentInside(full))) continue;
    const host = await kindOf(full);
    // A directory where the host has a file the run was given replaces it; a file it was not
    // given, or a link, stays.
    if (host === 'other' || (host === 'file' && !carriedFiles.has(rel))) {
      blocked.add(full);
      keep(rel);
      continue;
    }
    try {
      if (host === 'file') await rm(full, { force: true });
      await mkdir(full, { recursive: true, mode: 0o700 });
    } catch (error) {
      if (tooLong(error)) longPaths++;
      else if (fileInTheWay(error)) {
        // A file above it that the run did not report (a cut-short copy back).
        blocked.add(full);
        keep(rel);
      } else throw error;
      continue;
    }
    inside.add(full);
    written++;
  }
  let late = false;
  const writeOne = async (file: WorkspaceFile): Promise<void> => {
    const full = join(dir, file.path);
    const parent = dirname(full);
    if (underBlocked(full) || !(await parentInside(full))) return;
    if (!inside.has(parent)) {
      try {
        await mkdir(parent, { recursive: true, mode: 0o700 });
      } catch (error) {
        if (!fileInTheWay(error)) throw error;
        // A file above it that the run did not report (a cut-short copy back) stays.
        keep(file.path);
        return;
      }
      inside.add(parent);
    }
    // The run may replace a file it was given, or a directory all of whose entries it was
    // given; a file or directory it never saw, or a link, stays.
    const host = await kindOf(full);
    if (
      host === 'other' ||
      (host === 'file' && !carriedFiles.has(file.path)) ||
      (host === 'dir' && !(await sawAllOf(file.path)))
    ) {
      keep(file.path);
      return;
    }
    // Written beside the target under a fresh name, then renamed over it: the old file stays
    // whole until the new one is, and a link appearing at the target meanwhile is replaced, never
    // followed.
    const temp = join(parent, `.flowgrpo-sync-${randomBytes(6).toString('hex')}`);
    const handle = await open(
      temp,
      fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_EXCL | fsConstants.O_NOFOLLOW,
      0o600 | (file.mode & 0o755),
    );
    try {
      await handle.writeFile(file.data);
    } finally {
      await handle.close();
    }
    try {
      // A directory the run turned into a file goes only now, once the file is whole.
      if (host === 'dir') await rm(full, { recursive: true, force: true });
      await rename(temp, full);
    } catch (error) {
      await rm(temp, { force: true });
      throw error;
    }
    written++;
    writtenBytes += file.data.length;
  };
  // A few files at once (the file system calls run on libuv's threads); each worker checks the
  // deadline before every file, and all of them have stopped before this returns.
  // A failure (a full disk) stops the others too, and is raised once they all have stopped.
  let next = 0;
  let failure: { error: unknown } | undefined;
  const worker = async () => {
    while (next < files.length && !failure) {
      if (stopped(budget)) {
        late = true;
        return;
      }
      try {
        await writeOne(files[next++]!);
      } catch (error) {
        if (tooLong(error)) longPaths++;
        else failure ??= { error };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(WRITERS, files.length) }, worker));
  if (failure) throw failure.error;
  if (late) return cut();
  if (run.complete) {
    // The run's deletions: carried-in files it no longer has, then carried-in directories it no
    // longer has, deepest first, and only when empty (what is in them was not carried in).
    const runFiles = new Set(files.map((f) => f.path));
    for (const file of carried.files) {
      if (!runFiles.has(file.path) && (await kindOf(join(dir, file.path))) === 'file') {
        await rm(join(dir, file.path), { force: true });
      }
    }
    const keptDirs = new Set(dirs);
    const gone = carried.dirs.filter((d) => !keptDirs.has(d)).sort((a, b) => b.length - a.length);
    for (const rel of gone) await rmdir(join(dir, rel)).catch(() => {});
  }
  return {
    written,
    writtenBytes,
    notWritten: total - written,
    timedOut: false,
    tooLong: longPaths,
    kept,
  };
}
