#!/usr/bin/env node
// The JavaScript of the GPU bundle, each entry one ES module file in OUTDIR (scripts/gpu/bundle.sh):
// the flowgrpo CLI and the trainer's session worker (packages/cli/scripts/bundle.mjs, as `pnpm
// build` makes them) and the measuring steps (packages/trainer-cuda/bench/gpu/main.ts →
// measure.js, beside session-worker-main.js where SessionWorker looks for it). onnxruntime-node
// stays external: bundle.sh ships it as a package next to these files.
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const outdir = process.argv[2];
if (!outdir) {
  console.error('usage: bundle-js.mjs OUTDIR');
  process.exit(2);
}
// esbuild is a devDependency of @flowgrpo/cli: resolve it from there (the root has none).
const cli = join(root, 'packages', 'cli');
const { build } = await import(
  pathToFileURL(createRequire(join(cli, 'package.json')).resolve('esbuild')).href
);
const { bundleCli } = await import(pathToFileURL(join(cli, 'scripts', 'bundle.mjs')).href);

await bundleCli(outdir);
await build({
  entryPoints: { measure: join(root, 'packages', 'trainer-cuda', 'bench', 'gpu', 'main.ts') },
  outdir,
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  conditions: ['@flowgrpo/source'],
  external: ['onnxruntime-node', '@huggingface/transformers'],
  banner: {
    js: "import { createRequire as __flowgrpoRequire } from 'node:module'; const require = __flowgrpoRequire(import.meta.url);",
  },
  minifyWhitespace: true,
  minifySyntax: true,
  logLevel: 'warning',
});
