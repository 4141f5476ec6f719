#!/usr/bin/env node
// Bundles the CLI into one ES module, dist/flowgrpo.js — the `flowgrpo` bin. Node then parses one
// file holding only the modules the CLI reaches, instead of resolving and evaluating every module
// of every workspace package one by one (most of a short `flowgrpo generate` run's start-up
// before: docs/performance.md, "Whole-process flowgrpo generate"). ONNX Runtime stays external
// (a native addon), and so does @huggingface/transformers (an optional peer, imported on
// demand). The session worker and the GRPO trainer's policy worker are entries of their own,
// dist/session-worker-main.js and dist/policy-worker-main.js, where SessionWorker and
// WorkerLoraPolicy look for them (next to the module that starts them).
import { cpSync, mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { build } from 'esbuild';

const pkg = join(dirname(fileURLToPath(import.meta.url)), '..');

/**
 * Writes the bundle into `outdir` (default dist/); returns the bin's path. `extraEntries` (name →
 * source) are bundled beside it with the same settings (the GPU bundle's measuring steps);
 * `sourcemap: false` leaves the maps out (the GPU bundle counts every megabyte).
 */
export async function bundleCli(
  outdir = join(pkg, 'dist'),
  extraEntries = {},
  { sourcemap = 'linked' } = {},
) {
  await build({
    entryPoints: {
      ...extraEntries,
      flowgrpo: join(pkg, 'src', 'bin.ts'),
      'session-worker-main': join(pkg, '..', 'models', 'src', 'runtime', 'session-worker-main.ts'),
      'policy-worker-main': join(
        pkg,
        '..',
        'trainer-cuda',
        'src',
        'update',
        'policy-worker-main.ts',
      ),
    },
    outdir,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    // The workspace packages' TypeScript sources, as the tests and `pnpm flowgrpo` run them.
    conditions: ['@flowgrpo/source'],
    external: ['onnxruntime-node', '@huggingface/transformers'],
    // Some bundled CommonJS dependencies call require() for Node built-ins.
    banner: {
      js: "import { createRequire as __flowgrpoRequire } from 'node:module'; const require = __flowgrpoRequire(import.meta.url);",
    },
    minifyWhitespace: true,
    minifySyntax: true,
    sourcemap,
    logLevel: 'warning',
  });
  copyViewerStatic(join(outdir, 'viewer-static'));
  return join(outdir, 'flowgrpo.js');
}

/**
 * `flowgrpo view`'s page and report.html's token view read files that a bundle cannot hold: the
 * viewer's static/ folder and uPlot's files. They go beside the bundle, where the viewer's
 * static-files.ts looks first.
 */
function copyViewerStatic(dir) {
  const viewer = join(pkg, '..', 'viewer');
  const requireViewer = createRequire(join(viewer, 'package.json'));
  mkdirSync(dir, { recursive: true });
  cpSync(join(viewer, 'static'), dir, { recursive: true });
  cpSync(requireViewer.resolve('uplot/dist/uPlot.iife.min.js'), join(dir, 'uplot.js'));
  cpSync(requireViewer.resolve('uplot/dist/uPlot.min.css'), join(dir, 'uplot.css'));
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) await bundleCli();
