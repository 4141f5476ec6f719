import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { ConfigError } from '@flowgrpo/core';

/**
 * Where the real data sets live: `--data-dir`, else `$FLOWGRPO_SHARED/data`, else `../shared/data`
 * beside the working directory (the layout of a clone with the shared folder next to it).
 */
export function resolveDataDir(cwd: string, env: NodeJS.ProcessEnv, explicit?: string): string {
  const candidates = explicit
    ? [resolve(cwd, explicit)]
    : [
        ...(env.FLOWGRPO_SHARED ? [resolve(cwd, env.FLOWGRPO_SHARED, 'data')] : []),
        resolve(cwd, '..', 'shared', 'data'),
      ];
  const found = candidates.find((dir) => existsSync(dir));
  if (!found) {
    throw new ConfigError(
      `no data folder found (looked in ${candidates.join(', ')}); pass --data-dir or set FLOWGRPO_SHARED`,
      { key: 'data-dir' },
    );
  }
  return found;
}
