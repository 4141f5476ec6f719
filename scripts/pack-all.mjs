#!/usr/bin/env node
// `pnpm pack:all [--out DIR]`: one tarball per public package (packages/*, `"private"` not set)
// into one folder (default packs/), with pnpm rewriting the `workspace:` ranges to versions —
// the tarballs docs/install.md installs an app from. The packages must be built first
// (`pnpm pack:all` runs `pnpm build` before this script). The list is read from the folders, so a
// package added later is packed too.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const at = args.indexOf('--out');
const out = resolve(at >= 0 && args[at + 1] ? args[at + 1] : join(root, 'packs'));
mkdirSync(out, { recursive: true });

const packages = readdirSync(join(root, 'packages'))
  .map((name) => join(root, 'packages', name))
  .filter((dir) => existsSync(join(dir, 'package.json')))
  .filter((dir) => JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')).private !== true);
for (const dir of packages) {
  const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
  if (!existsSync(join(dir, 'dist'))) {
    process.stderr.write(`pack:all: ${manifest.name} is not built (no dist/): run pnpm build\n`);
    process.exit(1);
  }
  execFileSync('pnpm', ['pack', '--pack-destination', out], { cwd: dir, stdio: 'ignore' });
  process.stdout.write(`${manifest.name}@${manifest.version}\n`);
}
process.stdout.write(`${packages.length} tarballs in ${out}\n`);
