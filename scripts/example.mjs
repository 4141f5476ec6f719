#!/usr/bin/env node
// `pnpm example <name> [args…]`: runs examples/<name>/src/main.ts from the TypeScript sources
// (the workspace packages resolve to their src/ through the @flowgrpo/source condition, so no
// build is needed). The example runs in the directory pnpm was started from, so relative paths
// given as flags (--model ./my-model, --out out/x) mean what they say there.
// `pnpm example` alone lists the examples.
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const examples = readdirSync(join(root, 'examples'))
  .filter((name) => existsSync(join(root, 'examples', name, 'src', 'main.ts')))
  .sort();

function list() {
  const lines = examples.map((name) => {
    const pkg = JSON.parse(readFileSync(join(root, 'examples', name, 'package.json'), 'utf8'));
    return `  ${name.padEnd(18)} ${pkg.description ?? ''}`;
  });
  return `Usage: pnpm example <name> [--quick] [flags]\n\nExamples:\n${lines.join('\n')}\n\nEach example's README (examples/<name>/README.md) lists its flags; --help prints them.\n`;
}

// pnpm passes a `--` separator through when the user types one.
const args = process.argv.slice(2).filter((a, i) => !(i === 1 && a === '--'));
const [name, ...rest] = args;
if (!name || name === '--help' || name === '-h') {
  process.stdout.write(list());
  process.exit(0);
}
if (!examples.includes(name)) {
  process.stderr.write(`unknown example '${name}'\n\n${list()}`);
  process.exit(1);
}

// tsx resolved from this repository, so the example also runs from a directory outside it.
const tsx = import.meta.resolve('tsx');
const child = spawn(
  process.execPath,
  [
    '--conditions=@flowgrpo/source',
    '--import',
    tsx,
    join(root, 'examples', name, 'src', 'main.ts'),
    ...rest,
  ],
  { stdio: 'inherit', cwd: process.env.INIT_CWD ?? process.cwd() },
);
// Ctrl-C reaches the child directly (same process group): wait for it to finish cleanly.
process.on('SIGINT', () => {});
process.on('SIGTERM', () => child.kill('SIGTERM'));
child.on('exit', (code, signal) => process.exit(code ?? (signal === 'SIGINT' ? 130 : 1)));
