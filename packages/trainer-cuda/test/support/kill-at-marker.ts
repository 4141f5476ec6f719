import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Runs a script of this folder (test/support) in a child process and SIGKILLs it once it has written
 * `marker`: the scripts write it from inside a step, after a checkpoint, so the kill lands
 * mid-run at a known point — no timing involved. Resolves with the signal the child died of.
 */
export async function killAtMarker(
  script: string,
  args: readonly string[],
  marker: string,
): Promise<NodeJS.Signals | null> {
  const child = spawn(
    process.execPath,
    [
      '--conditions=@flowgrpo/source',
      '--import',
      'tsx',
      join(import.meta.dirname, script),
      ...args,
    ],
    { stdio: 'ignore' },
  );
  const exited = new Promise<NodeJS.Signals | null>((resolve) =>
    child.on('exit', (_c, s) => resolve(s)),
  );
  while (!existsSync(marker)) {
    if (child.exitCode !== null) throw new Error(`${script} exited with ${child.exitCode}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  child.kill('SIGKILL');
  return exited;
}
