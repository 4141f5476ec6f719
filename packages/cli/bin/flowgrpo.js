#!/usr/bin/env node
// The installed `flowgrpo` command. It runs the one-file bundle that `pnpm build` writes
// (dist/flowgrpo.js); it is a file of its own so that the bin exists before the first build
// (pnpm links workspace bins at install time, and warned about a missing target).
import { existsSync } from 'node:fs';

const bundle = new URL('../dist/flowgrpo.js', import.meta.url);
if (!existsSync(bundle)) {
  process.stderr.write(
    'flowgrpo: the CLI is not built: run `pnpm build` (or, in the repository, `pnpm flowgrpo …`, which runs the sources)\n',
  );
  process.exit(1);
}
await import(bundle.href);
