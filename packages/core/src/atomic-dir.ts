import { existsSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';

// A folder written whole or not at all: its contents are built in a temporary sibling (same file
// system, so the final rename is atomic), then swapped in. A kill at any point leaves either the
// old folder or the new one in place — never a half-written one — plus at most a stray
// `.<name>.tmp-*` / `.<name>.old-*` sibling that the next write removes.

function staging(dir: string): { out: string; tmp: string } {
  const out = resolve(dir);
  mkdirSync(dirname(out), { recursive: true });
  sweep(out);
  return { out, tmp: mkdtempSync(join(dirname(out), `.${basename(out)}.tmp-`)) };
}

/**
 * Cleans up after an earlier interrupted write of `out`: a kill between the swap's two renames
 * leaves the previous folder as `.old-*` and no `out`, so that one is put back first; then
 * unfinished `.tmp-*` folders and `.old-*` copies are removed.
 */
function sweep(out: string): void {
  const parent = dirname(out);
  const prefix = `.${basename(out)}.`;
  const names = readdirSafe(parent).sort();
  const olds = names.filter((n) => n.startsWith(`${prefix}old-`));
  if (!existsSync(out) && olds.length > 0) renameSync(join(parent, olds.pop()!), out);
  for (const name of names) {
    if (name.startsWith(`${prefix}tmp-`) || olds.includes(name))
      rmSync(join(parent, name), { recursive: true, force: true });
  }
}

function readdirSafe(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

function swapIn(tmp: string, out: string): void {
  if (!existsSync(out)) {
    renameSync(tmp, out);
    return;
  }
  const old = join(dirname(out), `.${basename(out)}.old-${process.pid}-${Date.now()}`);
  renameSync(out, old);
  renameSync(tmp, out);
  rmSync(old, { recursive: true, force: true });
}

/** Builds `dir` with `write(tmpDir)` in a temporary sibling, then swaps it in. */
export function writeDirAtomicallySync<T>(dir: string, write: (tmp: string) => T): T {
  const { out, tmp } = staging(dir);
  let result: T;
  try {
    result = write(tmp);
  } catch (e) {
    rmSync(tmp, { recursive: true, force: true });
    throw e;
  }
  swapIn(tmp, out);
  return result;
}

/** The same for an asynchronous `write`. */
export async function writeDirAtomically<T>(
  dir: string,
  write: (tmp: string) => Promise<T>,
): Promise<T> {
  const { out, tmp } = staging(dir);
  let result: T;
  try {
    result = await write(tmp);
  } catch (e) {
    rmSync(tmp, { recursive: true, force: true });
    throw e;
  }
  swapIn(tmp, out);
  return result;
}
