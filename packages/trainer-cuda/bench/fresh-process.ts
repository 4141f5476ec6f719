// A bench child script run in a fresh Node process, so that what it measures (its VmHWM above
// all) is its own and not the bench's: the script's last stdout line, parsed as JSON.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

export async function freshProcessJson<T>(script: string, args: readonly string[]): Promise<T> {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ['--conditions=@flowgrpo/source', '--import', 'tsx', script, ...args],
    { timeout: 3_600_000, maxBuffer: 1 << 24 },
  );
  return JSON.parse(stdout.trim().split('\n').at(-1)!) as T;
}
