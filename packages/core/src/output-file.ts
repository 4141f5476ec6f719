import { lstatSync, readlinkSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { writeFileAtomically } from './atomic-file.js';
import { SymlinkRefusedError } from './inside-folder.js';
import { IsADirectoryError, systemError } from './system-errors.js';

// A file the user names for us to write (`flowgrpo eval --out results.json`, `data
// sft-from-rollouts --out rows.jsonl`, the files `data prepare` leaves in its --out folder). Two
// ways such a write costs the user something they had: the name is a symbolic link, so the
// write lands on whatever it points at (a data set, another run's results), or the process dies
// half-way and leaves neither the old file nor a whole new one. So a link is refused, naming it,
// before the work that fills the file starts (checkOutputFile), and the file is written beside
// its place and renamed over it (writeOutputFile): readers see the old file or the new one.

/**
 * Throws unless `path` can take a new file: not a symbolic link (SymlinkRefusedError, its target
 * named), not a folder (IsADirectoryError). `what` names the option ("--out").
 */
export function checkOutputFile(path: string, what: string): void {
  let stat: ReturnType<typeof lstatSync>;
  try {
    stat = lstatSync(path, { throwIfNoEntry: false });
  } catch (e) {
    // ENOTDIR: a file where a folder of the path belongs.
    throw systemError(e, { what, path }) ?? e;
  }
  if (stat === undefined) return;
  if (stat.isSymbolicLink()) {
    let target = '?';
    try {
      target = readlinkSync(path);
    } catch {}
    throw new SymlinkRefusedError({ path, target, folder: dirname(path), writer: what });
  }
  if (stat.isDirectory())
    throw new IsADirectoryError(
      `${what}: ${path} is a folder, where a file belongs`,
      { path, errno: 'EISDIR' },
      { hint: `name a file, e.g. ${join(path, 'results.json')}` },
    );
}

/**
 * Writes `data` to `path` whole or not at all (a temporary file beside it, renamed over it), after
 * checkOutputFile. A failed write (a full disk) removes the temporary file and leaves what was at
 * `path` as it was; the error is the typed one for the cause, naming `what`.
 */
export async function writeOutputFile(
  path: string,
  data: string | Uint8Array,
  what: string,
): Promise<void> {
  checkOutputFile(path, what);
  try {
    await writeFileAtomically(path, data);
  } catch (e) {
    throw systemError(e, { what, path }) ?? e;
  }
}
