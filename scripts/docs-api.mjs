#!/usr/bin/env node
// `pnpm docs:api`: the API reference of every package's public entry points (src/index.ts, and
// the /testing subpaths), generated from the TypeScript sources and their doc comments with
// TypeDoc, as HTML into docs/api/ (not committed: regenerate it).
//   node scripts/docs-api.mjs [--out DIR] [--package FOLDER …]   e.g. --package grpo-math
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Application, TSConfigReader } from 'typedoc';

const root = fileURLToPath(new URL('..', import.meta.url));
const ALL = [
  'core',
  'graph',
  'grpo-math',
  'reward-judge',
  'tools',
  'agent-solver',
  'models',
  'gateway',
  'trainer-cuda',
  'cli',
];

const { values } = parseArgs({
  options: {
    out: { type: 'string', default: join(root, 'docs', 'api') },
    package: { type: 'string', multiple: true },
  },
});
const folders = values.package ?? ALL;
for (const f of folders)
  if (!ALL.includes(f)) throw new Error(`unknown package folder '${f}' (one of ${ALL.join(', ')})`);

// Each public entry point of the package.json exports (e.g. @flowgrpo/agent and its /testing).
const entryPoints = [];
for (const f of folders) {
  const pkg = JSON.parse(readFileSync(join(root, 'packages', f, 'package.json'), 'utf8'));
  for (const target of Object.values(pkg.exports ?? {})) {
    const src = target['@flowgrpo/source'];
    if (src && existsSync(join(root, 'packages', f, src)))
      entryPoints.push(join(root, 'packages', f, src));
  }
  if (!pkg.exports) entryPoints.push(join(root, 'packages', f, 'src', 'index.ts'));
}

const app = await Application.bootstrapWithPlugins(
  {
    name: 'flowgrpo API',
    entryPoints,
    entryPointStrategy: 'resolve',
    tsconfig: join(root, 'tsconfig.json'),
    out: resolve(values.out),
    readme: 'none',
    disableSources: true,
    excludePrivate: true,
    excludeInternal: true,
    // The packages' own sources are checked by `pnpm typecheck`; TypeDoc only documents them.
    skipErrorChecking: true,
    // A type from another package that is not exported there is shown by name, not an error.
    validation: { notExported: false, invalidLink: true, notDocumented: false },
    logLevel: 'Warn',
  },
  [new TSConfigReader()],
);
const project = await app.convert();
if (!project) {
  console.error('docs:api: TypeDoc could not convert the sources');
  process.exit(1);
}
await app.generateDocs(project, resolve(values.out));
console.log(
  `docs:api: ${entryPoints.length} entry points (${folders.join(', ')}) → ${resolve(values.out)}/index.html`,
);
