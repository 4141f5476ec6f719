import { mkdir, rename, rm, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';

/**
 * Writes `data` to `path` whole or not at all, creating the parent folder when needed: a
 * temporary file beside it (same file system, so the rename is atomic), renamed over it. Readers
 * see the old file or the new one; a failed write (a full disk) removes the temporary file and
 * leaves `path` as it was. A symbolic link at `path` is replaced, never written through.
 */
export async function writeFileAtomically(path: string, data: string | Uint8Array): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  const temp = `${path}.${process.pid}.${Date.now()}.tmp`;
  try {
    await writeFile(temp, data);
    await rename(temp, path);
  } catch (e) {
    await rm(temp, { force: true }).catch(() => {});
    throw e;
  }
}
