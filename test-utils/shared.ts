// Locates the read-only ../shared folder (real data sets, model weights, reference outputs).
// Tests that need it use `describe.skipIf(!SHARED_DIR)`; the reason is printed once per file.
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');

function locate(): string | undefined {
  const fromEnv = process.env.FLOWGRPO_SHARED;
  if (fromEnv) return existsSync(fromEnv) ? resolve(fromEnv) : undefined;
  const beside = resolve(repoRoot, '..', 'shared');
  return existsSync(join(beside, 'README.md')) ? beside : undefined;
}

/** Absolute path of the shared folder, or undefined when it is absent. */
export const SHARED_DIR: string | undefined = locate();

/** Path inside the shared folder; only call it when SHARED_DIR is defined. */
export function sharedPath(...parts: string[]): string {
  if (!SHARED_DIR) throw new Error('shared folder absent');
  return join(SHARED_DIR, ...parts);
}

/** Prints why a suite is skipped (once per test file) and returns true when it must be. */
export function skipWithoutShared(what: string): boolean {
  if (SHARED_DIR) return false;
  console.warn(
    `[skip] ${what}: ../shared (or $FLOWGRPO_SHARED) is absent — real data and weights tests skipped`,
  );
  return true;
}
