import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';

/**
 * A fresh folder `flowgrpo-<name>-XXXXXX` in the OS temp directory for one test file, removed
 * after its tests. Made at once rather than in a hook, so the file can hold it as a plain string.
 */
export function testDir(name: string): string {
  const dir = mkdtempSync(join(tmpdir(), `flowgrpo-${name}-`));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}
