#!/usr/bin/env node
// The JavaScript of the GPU bundle, each entry one ES module file in OUTDIR (scripts/gpu/bundle.sh):
// the flowgrpo CLI and the trainer's session worker (packages/cli/scripts/bundle.mjs, as `pnpm
// build` makes them) and the measuring steps (packages/trainer-cuda/bench/gpu/main.ts →
// measure.js, beside session-worker-main.js where SessionWorker looks for it). onnxruntime-node
// stays external: bundle.sh ships it as a package next to these files.
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const outdir = process.argv[2];
if (!outdir) {
  console.error('usage: bundle-js.mjs OUTDIR');
  process.exit(2);
}
const cli = join(root, 'packages', 'cli');
const { bundleCli } = await import(pathToFileURL(join(cli, 'scripts', 'bundle.mjs')).href);

// One esbuild configuration for all of it: the CLI's, with the measuring steps as an extra entry.
await bundleCli(
  outdir,
  { measure: join(root, 'packages', 'trainer-cuda', 'bench', 'gpu', 'main.ts') },
  { sourcemap: false },
);
