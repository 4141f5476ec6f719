// Where the real data sets and weights live: $FLOWGRPO_SHARED, else the `shared` folder beside
// this repository (../shared from its root). Examples that need it print why they stop without it.
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const repoRoot = fileURLToPath(new URL('../../../', import.meta.url));

/** The shared folder, or undefined when it is absent. */
export function sharedDir(env: NodeJS.ProcessEnv = process.env): string | undefined {
  const dir = env.FLOWGRPO_SHARED
    ? resolve(env.FLOWGRPO_SHARED)
    : resolve(repoRoot, '..', 'shared');
  return existsSync(join(dir, 'data')) ? dir : undefined;
}
