import { existsSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { ConfigError } from '@flowgrpo/core';

function isDir(path: string): boolean {
  return existsSync(path) && statSync(path).isDirectory();
}

/**
 * Where the real data sets live: `--data-dir`, else `$FLOWGRPO_SHARED/data`, else `../shared/data`
 * beside the working directory (the layout of a clone with the shared folder next to it).
 *
 * Each place that is named explicitly must exist: a `--data-dir` or a `$FLOWGRPO_SHARED` that
 * points nowhere is a ConfigError naming it, never a silent fall-back to another folder (which
 * would train on data the user did not ask for, or hide a typo).
 */
export function resolveDataDir(cwd: string, env: NodeJS.ProcessEnv, explicit?: string): string {
  if (explicit) {
    const dir = resolve(cwd, explicit);
    if (!isDir(dir)) {
      throw new ConfigError(
        `--data-dir ${dir} is not a folder (no data folder found)`,
        { key: 'data-dir' },
        { hint: 'give --data-dir the folder holding the raw data sets (gsm8k/, nq/, …)' },
      );
    }
    return dir;
  }
  if (env.FLOWGRPO_SHARED) {
    const root = resolve(cwd, env.FLOWGRPO_SHARED);
    if (!isDir(root)) {
      throw new ConfigError(
        `FLOWGRPO_SHARED points to ${root}, which is not a folder; set it to the shared folder (the one holding data/) or unset it`,
        { key: 'FLOWGRPO_SHARED' },
        { hint: 'export FLOWGRPO_SHARED=<the shared folder>, or unset it' },
      );
    }
    const dir = join(root, 'data');
    if (!isDir(dir)) {
      throw new ConfigError(
        `FLOWGRPO_SHARED=${root} has no data/ folder (looked for ${dir})`,
        { key: 'FLOWGRPO_SHARED' },
        { hint: 'point FLOWGRPO_SHARED at the folder that holds data/, or pass --data-dir' },
      );
    }
    return dir;
  }
  const fallback = resolve(cwd, '..', 'shared', 'data');
  if (!isDir(fallback)) {
    throw new ConfigError(
      `no data folder found (looked in ${fallback}); pass --data-dir or set FLOWGRPO_SHARED`,
      { key: 'data-dir' },
      { hint: 'pass --data-dir <folder with the raw data sets>, or export FLOWGRPO_SHARED' },
    );
  }
  return fallback;
}
