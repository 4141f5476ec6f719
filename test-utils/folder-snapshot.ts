import { createHash } from 'node:crypto';
import { lstatSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { join, relative } from 'node:path';

// What the tests of "a refusal writes nothing and loses nothing" compare: a folder before and
// after, and the error a refused call threw.

/** Every entry under `dir`: a file's sha256, a link's target, a folder's name — what could be lost. */
export function snapshot(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      const p = join(d, name);
      const stat = lstatSync(p);
      const key = relative(dir, p);
      if (stat.isSymbolicLink()) out[key] = `link → ${readlinkSync(p)}`;
      else if (stat.isDirectory()) {
        out[key] = 'folder';
        walk(p);
      } else out[key] = createHash('sha256').update(readFileSync(p)).digest('hex');
    }
  };
  walk(dir);
  return out;
}

/** The error `f` throws (or the promise rejects with). */
export async function thrown(f: () => unknown): Promise<unknown> {
  try {
    await f();
  } catch (e) {
    return e;
  }
  throw new Error('nothing was thrown');
}

/** The error `f` throws, synchronously. */
export function thrownSync(f: () => unknown): unknown {
  try {
    f();
  } catch (e) {
    return e;
  }
  throw new Error('nothing was thrown');
}
