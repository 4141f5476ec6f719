#!/usr/bin/env node
// Copies each snippet into the ```ts (or ```typescript) block that follows its marker line in the
// markdown docs/test checks: docs/**/*.md (docs/api aside), README.md, packages/*/README.md,
// packages/*/docs/**/*.md and examples/*/README.md. A marker is
// `<!-- snippet: docs/snippets/<file>.ts#<region> -->` (that region of the file) or
// `<!-- snippet: test-app/app/src/<file>.ts -->` (the whole file). Edit the .ts file (which
// `pnpm typecheck` compiles), then run `node scripts/docs-snippets.mjs`; docs/test checks that
// the markdown matches. A block indented under a list item keeps its indentation.
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = fileURLToPath(new URL('..', import.meta.url));

function region(path, name) {
  const lines = readFileSync(join(repo, path), 'utf8').split('\n');
  const start = lines.findIndex((l) => l.trim() === `// #region ${name}`);
  const end = lines.findIndex((l, i) => i > start && l.trim() === `// #endregion ${name}`);
  if (start < 0 || end < 0) throw new Error(`no region ${name} in ${path}`);
  const body = lines.slice(start + 1, end);
  const indent = Math.min(
    ...body.filter((l) => l.trim()).map((l) => l.length - l.trimStart().length),
  );
  return body.map((l) => l.slice(indent)).join('\n');
}

function snippet(marker) {
  const [path, name] = marker.split('#');
  return name === undefined
    ? readFileSync(join(repo, path), 'utf8').replace(/\n$/, '')
    : region(path, name);
}

function markdownFiles(dir) {
  if (!existsSync(dir)) return [];
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    if (statSync(p).isDirectory())
      return name === 'api' || name === 'node_modules' ? [] : markdownFiles(p);
    return name.endsWith('.md') ? [p] : [];
  });
}

const inEachFolder = (dir, file) =>
  readdirSync(join(repo, dir))
    .map((name) => join(repo, dir, name, file))
    .filter((p) => existsSync(p));

const files = [
  ...markdownFiles(join(repo, 'docs')),
  join(repo, 'README.md'),
  ...inEachFolder('packages', 'README.md'),
  ...inEachFolder('packages', 'docs').flatMap(markdownFiles),
  ...inEachFolder('examples', 'README.md'),
];

let changed = 0;
for (const file of files) {
  const text = readFileSync(file, 'utf8');
  const next = text.replace(
    /^([ \t]*)<!-- snippet: (\S+) -->(\n(?:[ \t]*\n)*)[ \t]*```(ts|typescript)\n(?:[\s\S]*?\n)?[ \t]*```[ \t]*$/gm,
    (_m, indent, marker, gap, lang) => {
      const code = snippet(marker)
        .split('\n')
        .map((l) => (l ? indent + l : l))
        .join('\n');
      return `${indent}<!-- snippet: ${marker} -->${gap}${indent}\`\`\`${lang}\n${code}\n${indent}\`\`\``;
    },
  );
  if (next !== text) {
    writeFileSync(file, next);
    changed++;
  }
}
console.log(`docs-snippets: ${changed} file(s) updated`);
