#!/usr/bin/env node
// Copies each snippet region of docs/snippets/*.ts into the ```ts block that follows its
// `<!-- snippet: docs/snippets/<file>.ts#<region> -->` line in docs/**/*.md. Edit the .ts file
// (which `pnpm typecheck` compiles), then run `node scripts/docs-snippets.mjs`; docs/test checks
// that the markdown matches.
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
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

function markdownFiles(dir) {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    if (statSync(p).isDirectory())
      return name === 'api' || name === 'node_modules' ? [] : markdownFiles(p);
    return name.endsWith('.md') ? [p] : [];
  });
}

let changed = 0;
for (const file of markdownFiles(join(repo, 'docs'))) {
  const text = readFileSync(file, 'utf8');
  const next = text.replace(
    /<!-- snippet: (\S+)#(\S+) -->\n+```ts\n[\s\S]*?\n?```/g,
    (_m, path, name) =>
      `<!-- snippet: ${path}#${name} -->\n\n\`\`\`ts\n${region(path, name)}\n\`\`\``,
  );
  if (next !== text) {
    writeFileSync(file, next);
    changed++;
  }
}
console.log(`docs-snippets: ${changed} file(s) updated`);
