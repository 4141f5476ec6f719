// "No snippet that does not compile": every ```ts block in docs/**/*.md (the generated docs/api
// aside) must be preceded by `<!-- snippet: docs/snippets/<file>.ts#<region> -->` and equal that
// region of the file, which `pnpm typecheck` compiles (root tsconfig.json includes docs/snippets).
// And the API reference script runs (on one package, to keep the test command short).
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';

const repo = join(import.meta.dirname, '..', '..');
const docs = join(repo, 'docs');

function markdownFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    if (statSync(p).isDirectory())
      return name === 'api' || name === 'node_modules' ? [] : markdownFiles(p);
    return name.endsWith('.md') ? [p] : [];
  });
}

/** The lines between `// #region name` and `// #endregion name`, de-indented. */
export function region(file: string, name: string): string | undefined {
  const lines = readFileSync(file, 'utf8').split('\n');
  const start = lines.findIndex((l) => l.trim() === `// #region ${name}`);
  const end = lines.findIndex((l, i) => i > start && l.trim() === `// #endregion ${name}`);
  if (start < 0 || end < 0) return undefined;
  const body = lines.slice(start + 1, end);
  const indent = Math.min(
    ...body.filter((l) => l.trim()).map((l) => l.length - l.trimStart().length),
  );
  return body.map((l) => l.slice(indent)).join('\n');
}

interface Block {
  file: string;
  line: number;
  marker: string | undefined;
  code: string;
}

function tsBlocks(file: string): Block[] {
  const lines = readFileSync(file, 'utf8').split('\n');
  const blocks: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    if (lines[i]!.trim() !== '```ts') continue;
    let j = i - 1;
    while (j >= 0 && lines[j]!.trim() === '') j--;
    const marker = /^<!-- snippet: (\S+) -->$/.exec(lines[j]?.trim() ?? '')?.[1];
    const end = lines.findIndex((l, k) => k > i && l.trim() === '```');
    blocks.push({ file, line: i + 1, marker, code: lines.slice(i + 1, end).join('\n') });
    i = end;
  }
  return blocks;
}

const blocks = markdownFiles(docs).flatMap(tsBlocks);

describe('docs: TypeScript snippets come from compiled files', () => {
  it('finds the guides’ snippets', () => {
    // One guide per package, each with at least one snippet (docs/guides/*.md).
    const guides = new Set(
      blocks.map((b) => relative(docs, b.file)).filter((f) => f.startsWith('guides/')),
    );
    expect(guides.size).toBeGreaterThanOrEqual(8);
  });

  it.each(blocks.map((b) => [`${relative(repo, b.file)}:${b.line}`, b] as const))(
    '%s equals its snippet region',
    (_where, b) => {
      expect(
        b.marker,
        'a ```ts block needs a <!-- snippet: file#region --> line before it',
      ).toBeDefined();
      const [path, name] = b.marker!.split('#') as [string, string];
      expect(path).toMatch(/^docs\/snippets\/[\w-]+\.ts$/);
      const code = region(join(repo, path), name);
      expect(code, `no region '${name}' in ${path}`).toBeDefined();
      expect(b.code).toBe(code);
    },
  );

  it('every snippet region is shown somewhere', () => {
    const used = new Set(blocks.map((b) => b.marker));
    const dir = join(docs, 'snippets');
    for (const f of readdirSync(dir)) {
      for (const m of readFileSync(join(dir, f), 'utf8').matchAll(/\/\/ #region (\S+)/g))
        expect(used.has(`docs/snippets/${f}#${m[1]}`), `docs/snippets/${f}#${m[1]}`).toBe(true);
    }
  });
});

describe('docs: the API reference script (pnpm docs:api)', () => {
  const out = mkdtempSync(join(tmpdir(), 'flowgrpo-docs-api-'));
  afterAll(() => rmSync(out, { recursive: true, force: true }));

  it('generates HTML from the sources with TypeDoc (one package here)', async () => {
    await promisify(execFile)(
      process.execPath,
      [join(repo, 'scripts', 'docs-api.mjs'), '--package', 'grpo-math', '--out', out],
      { timeout: 150_000 },
    );
    expect(existsSync(join(out, 'index.html'))).toBe(true);
    // A documented export of @flowgrpo/grpo and its doc comment.
    const page = readFileSync(join(out, 'functions', 'computeAdvantages.html'), 'utf8');
    expect(page).toContain('Group-relative advantages');
  }, 180_000);
});
