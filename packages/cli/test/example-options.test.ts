import { execFile } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

// The examples' entry points parse their options with @flowgrpo/core's parseCommandLine: a
// mistyped option is one `[USAGE_ERROR]` line (with the closest option) and the example's usage,
// exit 2 — not parseArgs' ERR_PARSE_ARGS_UNKNOWN_OPTION with a stack trace. Each example really
// runs (`pnpm example <name>`'s runner), stopping at its option parsing.

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../../..');
const EXAMPLES = readdirSync(join(ROOT, 'examples')).sort();

const example = (name: string, args: string[]) =>
  promisify(execFile)(process.execPath, [join(ROOT, 'scripts/example.mjs'), name, ...args], {
    cwd: ROOT,
    timeout: 100_000,
  }).then(
    (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
    (e: { code: number; stdout: string; stderr: string }) => e,
  );

describe('examples: an unknown option is a usage error, exit 2', () => {
  it('every example', async () => {
    expect(EXAMPLES.length).toBeGreaterThanOrEqual(9);
    const runs = await Promise.all(EXAMPLES.map((name) => example(name, ['--qiuck'])));
    runs.forEach((r, i) => {
      const name = EXAMPLES[i]!;
      expect(r.code, `${name}: ${r.stderr}`).toBe(2);
      expect(r.stderr, name).toMatch(
        /^\[USAGE_ERROR\] unknown option '--qiuck' \(did you mean --quick\?\)\n\nUsage: pnpm example /,
      );
      expect(r.stderr, name).not.toMatch(/^\s+at /m);
      expect(r.stderr, name).not.toContain('ERR_PARSE_ARGS');
    });
  });

  it('--help prints the usage, exit 0', async () => {
    const r = await example('autodiff-mlp', ['--help']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^Usage: pnpm example autodiff-mlp /);
  });
});
