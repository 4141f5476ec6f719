import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { runCli } from '../src/main.js';
import { captureIO } from './support.js';

// `flowgrpo --version` prints the version field of packages/cli/package.json (read here as the
// expected value), in process and through the real bin.

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../../..');
const expected = (
  JSON.parse(readFileSync(join(ROOT, 'packages/cli/package.json'), 'utf8')) as { version: string }
).version;

describe('flowgrpo --version', () => {
  it('prints the package version and exits 0', async () => {
    expect(expected).toMatch(/^\d+\.\d+\.\d+/);
    for (const flag of ['--version', '-v']) {
      const io = captureIO(tmpdir());
      expect(await runCli([flag], io)).toBe(0);
      expect(io.out).toBe(`${expected}\n`);
      expect(io.err).toBe('');
    }
    const help = captureIO(tmpdir());
    await runCli(['--help'], help);
    expect(help.out).toContain("'flowgrpo --version'");
  });

  it('through the real bin', async () => {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ['--conditions=@flowgrpo/source', '--import', 'tsx', 'packages/cli/src/bin.ts', '--version'],
      { cwd: ROOT, timeout: 60_000 },
    );
    expect(stdout).toBe(`${expected}\n`);
  });
});
