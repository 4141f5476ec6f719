#!/usr/bin/env node
// Enforces the one-way import order of docs/architecture.md (core ← {graph, grpo, reward, tools}
// ← agent ← models ← gateway ← trainer ← cli; core ← viewer), the one-way order of the rooms
// (src/ folders) inside a package that has them, that the sources of core, graph and grpo import
// no ML runtime, and that every bare import in a package's sources is declared in its
// package.json. Runs as part of `pnpm lint`.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { dirname, join, relative, resolve, sep } from 'node:path';

const root = new URL('..', import.meta.url).pathname;
// Which @flowgrpo packages each package may import (the layering; transitive deps included).
const allowed = {
  '@flowgrpo/core': [],
  '@flowgrpo/graph': ['@flowgrpo/core'],
  '@flowgrpo/grpo': ['@flowgrpo/core'],
  '@flowgrpo/reward': ['@flowgrpo/core'],
  '@flowgrpo/tools': ['@flowgrpo/core'],
  // The run viewer reads run directories only: it runs beside any trainer, depending on none.
  '@flowgrpo/viewer': ['@flowgrpo/core'],
  '@flowgrpo/agent': [
    '@flowgrpo/core',
    '@flowgrpo/graph',
    '@flowgrpo/grpo',
    '@flowgrpo/reward',
    '@flowgrpo/tools',
  ],
  '@flowgrpo/models': [
    '@flowgrpo/core',
    '@flowgrpo/graph',
    '@flowgrpo/grpo',
    '@flowgrpo/reward',
    '@flowgrpo/tools',
    '@flowgrpo/agent',
  ],
  '@flowgrpo/gateway': [
    '@flowgrpo/core',
    '@flowgrpo/graph',
    '@flowgrpo/grpo',
    '@flowgrpo/reward',
    '@flowgrpo/tools',
    '@flowgrpo/agent',
    '@flowgrpo/models',
  ],
  '@flowgrpo/trainer': [
    '@flowgrpo/core',
    '@flowgrpo/graph',
    '@flowgrpo/grpo',
    '@flowgrpo/reward',
    '@flowgrpo/tools',
    '@flowgrpo/agent',
    '@flowgrpo/models',
    '@flowgrpo/gateway',
    // report.html embeds the viewer's token view of the selected sample.
    '@flowgrpo/viewer',
  ],
  '@flowgrpo/cli': [
    '@flowgrpo/core',
    '@flowgrpo/graph',
    '@flowgrpo/grpo',
    '@flowgrpo/reward',
    '@flowgrpo/tools',
    '@flowgrpo/agent',
    '@flowgrpo/models',
    '@flowgrpo/gateway',
    '@flowgrpo/trainer',
    '@flowgrpo/viewer',
  ],
};
// Rooms (folders of src/) and the rooms each may import, for packages split by job
// (docs/architecture.md, "Inside the trainer"). A file at the root of src/ (the index) may import
// any room; a folder of src/ not listed here is an error, so a new room is placed on purpose.
const rooms = {
  '@flowgrpo/trainer': {
    'optimizer-step': [],
    graphs: [],
    eval: [],
    run: ['optimizer-step'],
    update: ['optimizer-step', 'graphs', 'run'],
    report: ['eval', 'run'],
    trainers: ['optimizer-step', 'graphs', 'eval', 'run', 'update', 'report'],
    served: ['optimizer-step', 'graphs', 'eval', 'run', 'update', 'report', 'trainers'],
    // The demo's task pieces (its pipelines are the CLI's: packages/cli/src/demo).
    demo: ['eval'],
  },
};
// The room of a file under src/ ('' for a file at the root of src/).
function roomOf(srcDir, file) {
  const rel = relative(srcDir, file);
  return rel.includes(sep) ? rel.split(sep)[0] : '';
}
// Packages whose sources must stay runtime-free (they describe graphs; the trainer runs them).
const noRuntime = new Set(['@flowgrpo/core', '@flowgrpo/graph', '@flowgrpo/grpo']);
const runtimes = /^(onnxruntime-|@tensorflow\/|@huggingface\/transformers$)/;
const builtins = new Set([...builtinModules, ...builtinModules.map((m) => `node:${m}`)]);

function* tsFiles(dir) {
  let entries;
  try {
    entries = readdirSync(dir);
  } catch {
    return;
  }
  for (const name of entries) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) yield* tsFiles(p);
    else if (/\.(ts|mts)$/.test(name)) yield p;
  }
}

const problems = [];
for (const folder of readdirSync(join(root, 'packages'))) {
  const dir = join(root, 'packages', folder);
  let pkg;
  try {
    pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
  } catch {
    continue;
  }
  const declared = new Set([
    ...Object.keys(pkg.dependencies ?? {}),
    ...Object.keys(pkg.peerDependencies ?? {}),
    ...Object.keys(pkg.optionalDependencies ?? {}),
  ]);
  const devDeclared = new Set([...declared, ...Object.keys(pkg.devDependencies ?? {})]);
  const layer = allowed[pkg.name];
  if (!layer) problems.push(`${pkg.name}: not in the layering table of scripts/check-imports.mjs`);
  for (const sub of ['src', 'test', 'bench']) {
    for (const file of tsFiles(join(dir, sub))) {
      const text = readFileSync(file, 'utf8');
      const table = sub === 'src' ? rooms[pkg.name] : undefined;
      const from = table ? roomOf(join(dir, 'src'), file) : '';
      if (from && !(from in table))
        problems.push(
          `${relative(root, file)}: room '${from}' is not in scripts/check-imports.mjs`,
        );
      const re =
        /(?:^|[\s;])(?:import|export)\s[^'";]*?from\s+['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/gm;
      for (const m of text.matchAll(re)) {
        const spec = m[1] ?? m[2];
        if (spec.startsWith('.') && table && from in table) {
          const to = roomOf(join(dir, 'src'), resolve(dirname(file), spec));
          if (from && to && to !== from && !table[from].includes(to))
            problems.push(`${relative(root, file)}: room '${from}' may not import room '${to}'`);
        }
        if (spec.startsWith('.') || builtins.has(spec)) continue;
        const name = spec.startsWith('@')
          ? spec.split('/').slice(0, 2).join('/')
          : spec.split('/')[0];
        const where = relative(root, file);
        if (name === pkg.name) problems.push(`${where}: imports its own package by name`);
        else if (sub === 'src' && noRuntime.has(pkg.name) && runtimes.test(name))
          problems.push(`${where}: ${pkg.name} must not import a runtime ('${name}')`);
        else if (name.startsWith('@flowgrpo/') && layer && !layer.includes(name))
          problems.push(`${where}: ${pkg.name} may not import ${name} (docs/architecture.md)`);
        else if (!(sub === 'src' ? declared : devDeclared).has(name) && name !== 'vitest')
          problems.push(`${where}: imports '${name}', not declared in ${folder}/package.json`);
      }
    }
  }
}
if (problems.length) {
  console.error(`check-imports: ${problems.length} problem(s)\n${problems.join('\n')}`);
  process.exit(1);
}
console.log('check-imports: package layering and declared dependencies OK');
