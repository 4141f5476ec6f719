import {
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { NotADirectoryError, SymlinkRefusedError } from '@flowgrpo/core';
import { OutputDirNotEmptyError } from '@flowgrpo/trainer';

// The demo's output folder is the demo's own: it writes its data, its model, artifacts, runs,
// report.html and results.json there, and a second demo into it replaces the first's. So it
// claims only a folder that is missing, empty, or a demo's (marked by MARKER, written first) —
// never a project that happens to be named with --out, whose data/train.jsonl it would replace —
// and refuses a symbolic link anywhere in it, which a write would follow out of the folder.

/** Written into the folder first: the next demo knows the folder as a demo's. */
export const DEMO_MARKER = '.flowgrpo-demo';

/** A folder from before the marker: results.json of a finished demo (its outDir and evals). */
function isEarlierDemo(dir: string): boolean {
  try {
    const r = JSON.parse(readFileSync(join(dir, 'results.json'), 'utf8')) as Record<
      string,
      unknown
    >;
    return typeof r.outDir === 'string' && Array.isArray(r.evals) && typeof r.seed === 'number';
  } catch {
    return false;
  }
}

function linksUnder(dir: string): string[] {
  const found: string[] = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    const stat = lstatSync(path);
    if (stat.isSymbolicLink()) found.push(path);
    else if (stat.isDirectory()) found.push(...linksUnder(path));
  }
  return found;
}

/**
 * Claims `dir` for a demo (`what`: 'demo', 'demo --two-roles'): refused with a typed error when it
 * is a file, holds anything but an earlier demo, or holds a symbolic link; then created and
 * marked. Nothing is written before every check has passed.
 */
export function claimDemoDir(dir: string, what: string): void {
  if (existsSync(dir)) {
    if (!statSync(dir).isDirectory())
      throw new NotADirectoryError(
        `${dir} is a file, where the ${what} writes its folder`,
        { path: dir },
        { hint: 'give --out a new folder (or move the file away)' },
      );
    const names = readdirSync(dir).sort();
    if (names.length > 0 && !names.includes(DEMO_MARKER) && !isEarlierDemo(dir))
      throw new OutputDirNotEmptyError(
        `${dir} holds ${names.slice(0, 3).join(', ')}${names.length > 3 ? ', …' : ''} and is not a demo's folder: the ${what} writes its data, model and runs there and replaces what it finds`,
        { dir, entries: names, overwriteHelps: false },
        'give --out a new or empty folder (e.g. out/demo), or move that folder away',
      );
    const link = linksUnder(dir)[0];
    if (link)
      throw new SymlinkRefusedError({
        path: link,
        target: readlinkSync(link),
        folder: dir,
        writer: `the ${what}`,
      });
  }
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, DEMO_MARKER), `${JSON.stringify({ demo: what })}\n`);
}
