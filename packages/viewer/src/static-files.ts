import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

// Where the page's files are. From this package (sources or dist/): its static/ folder, and
// uPlot's own files from node_modules. Inside the CLI's one-file bundle (packages/cli/scripts/
// bundle.mjs) import.meta.url is the bundle's, so the bundle carries a copy of them all in
// viewer-static/ beside it, under the names the page asks for.

const bundled = fileURLToPath(new URL('./viewer-static/', import.meta.url));
const inPackage = fileURLToPath(new URL('../static/', import.meta.url));

/** The page's files by the name it asks for (/static/<name>), and nothing else. */
export const STATIC_NAMES = [
  'index.html',
  'app.js',
  'app.css',
  'tokens.js',
  'tokens.css',
  'uplot.js',
  'uplot.css',
] as const;
export type StaticName = (typeof STATIC_NAMES)[number];

const UPLOT: Partial<Record<StaticName, string>> = {
  'uplot.js': 'uplot/dist/uPlot.iife.min.js',
  'uplot.css': 'uplot/dist/uPlot.min.css',
};

/** The path of one of the page's files. */
export function staticPath(name: StaticName): string {
  if (existsSync(`${bundled}${name}`)) return `${bundled}${name}`;
  const uplot = UPLOT[name];
  return uplot ? createRequire(import.meta.url).resolve(uplot) : `${inPackage}${name}`;
}
