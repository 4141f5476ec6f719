// "No snippet that does not compile": every ```ts / ```typescript block in the guides
// (docs/**/*.md, the generated docs/api aside), the READMEs (README.md, packages/*/README.md,
// examples/*/README.md) and the package docs (packages/*/docs/**/*.md) must be preceded by
// `<!-- snippet: docs/snippets/<file>.ts#<region> -->` and equal that region of the file, which
// `pnpm typecheck` compiles with a strict app's settings (scripts/typecheck-snippets.mjs). A whole file of the packed
// app may stand in for a region (`<!-- snippet: test-app/app/src/<file>.ts -->`): the app test
// compiles it against the packed packages and runs it. `node scripts/docs-snippets.mjs` copies the
// regions into the markdown. And the API reference script runs (on one package, to keep the test
// command short).
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';

const repo = join(import.meta.dirname, '..', '..');
const docs = join(repo, 'docs');

function markdownFiles(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    if (statSync(p).isDirectory())
      return name === 'api' || name === 'node_modules' ? [] : markdownFiles(p);
    return name.endsWith('.md') ? [p] : [];
  });
}

/** The `dir/<each folder>/file` paths that exist. */
function inEachFolder(dir: string, file: string): string[] {
  return readdirSync(join(repo, dir))
    .map((name) => join(repo, dir, name, file))
    .filter((p) => existsSync(p));
}

/** Every markdown file whose ```ts blocks must compile. */
export function checkedMarkdownFiles(): string[] {
  return [
    ...markdownFiles(docs),
    join(repo, 'README.md'),
    ...inEachFolder('packages', 'README.md'),
    ...inEachFolder('packages', 'docs').flatMap(markdownFiles),
    ...inEachFolder('examples', 'README.md'),
  ];
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

/** What a marker names: a region of docs/snippets/*.ts, or a whole file of the packed app. */
export function snippetSource(marker: string): { code: string | undefined; problem?: string } {
  const [path, name] = marker.split('#') as [string, string | undefined];
  if (/^docs\/snippets\/[\w-]+\.ts$/.test(path) && name) {
    const code = existsSync(join(repo, path)) ? region(join(repo, path), name) : undefined;
    return code === undefined ? { code, problem: `no region '${name}' in ${path}` } : { code };
  }
  if (/^test-app\/app\/src\/[\w-]+\.ts$/.test(path) && name === undefined) {
    if (!existsSync(join(repo, path))) return { code: undefined, problem: `no file ${path}` };
    return { code: readFileSync(join(repo, path), 'utf8').replace(/\n$/, '') };
  }
  return {
    code: undefined,
    problem: `'${marker}' is neither docs/snippets/<file>.ts#<region> nor test-app/app/src/<file>.ts`,
  };
}

interface Block {
  file: string;
  line: number;
  marker: string | undefined;
  code: string;
}

const FENCE = /^(\s*)```(?:ts|typescript)(?:\s.*)?$/;

/**
 * The ```ts / ```typescript blocks of a markdown text, each with the snippet marker before it.
 * A fence indented under a list item: its lines lose that indentation.
 */
export function tsBlocks(text: string, file: string): Block[] {
  const lines = text.split('\n');
  const blocks: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    const fence = FENCE.exec(lines[i]!);
    if (!fence) continue;
    const indent = fence[1]!.length;
    let j = i - 1;
    while (j >= 0 && lines[j]!.trim() === '') j--;
    const marker = /^<!-- snippet: (\S+) -->$/.exec(lines[j]?.trim() ?? '')?.[1];
    let end = lines.findIndex((l, k) => k > i && l.trim() === '```');
    if (end < 0) end = lines.length;
    const code = lines.slice(i + 1, end).map((l) => {
      const lead = l.length - l.trimStart().length;
      return l.slice(Math.min(lead, indent));
    });
    blocks.push({ file, line: i + 1, marker, code: code.join('\n') });
    i = end;
  }
  return blocks;
}

const files = checkedMarkdownFiles();
const blocks = files.flatMap((f) => tsBlocks(readFileSync(f, 'utf8'), f));

describe('docs: the snippet checker reads the markdown it is given', () => {
  it('finds ```ts and ```typescript blocks with their markers, and un-indents list items', () => {
    const md = [
      '<!-- snippet: docs/snippets/a.ts#one -->',
      '',
      '```ts',
      'const a = 1;',
      '```',
      '```typescript',
      'const b = 2;',
      '```',
      '- a list item:',
      '  <!-- snippet: docs/snippets/c.ts#three -->',
      '  ```ts',
      '  if (x) {',
      '    y();',
      '  }',
      '  ```',
      '```sh',
      'pnpm test',
      '```',
    ].join('\n');
    expect(tsBlocks(md, 'x.md')).toEqual([
      { file: 'x.md', line: 3, marker: 'docs/snippets/a.ts#one', code: 'const a = 1;' },
      // No marker line right before it: the check below fails such a block.
      { file: 'x.md', line: 6, marker: undefined, code: 'const b = 2;' },
      {
        file: 'x.md',
        line: 11,
        marker: 'docs/snippets/c.ts#three',
        code: 'if (x) {\n  y();\n}',
      },
    ]);
  });

  it('checks the guides, the READMEs and the package docs', () => {
    const shown = new Set(blocks.map((b) => relative(repo, b.file)));
    // One guide per package, each with at least one snippet (docs/guides/*.md).
    expect([...shown].filter((f) => f.startsWith('docs/guides/')).length).toBeGreaterThanOrEqual(8);
    // Markdown outside docs/ that had unchecked ```ts blocks before this check covered it.
    for (const f of [
      'README.md',
      'packages/gateway/README.md',
      'packages/grpo-math/README.md',
      'packages/models/README.md',
      'packages/reward-judge/README.md',
      'packages/tools/README.md',
      'packages/agent-solver/docs/engines.md',
      'packages/graph/docs/autodiff.md',
      'packages/models/docs/runtime.md',
      'packages/trainer-cuda/docs/train-loop.md',
      'packages/trainer-cuda/docs/trainers.md',
    ])
      expect(shown, f).toContain(f);
    // Every example's README is read, whether or not it has TypeScript blocks yet.
    const examples = readdirSync(join(repo, 'examples')).filter((e) =>
      existsSync(join(repo, 'examples', e, 'README.md')),
    );
    for (const e of examples) expect(files).toContain(join(repo, 'examples', e, 'README.md'));
  });
});

describe('docs: TypeScript snippets come from compiled files', () => {
  it.each(blocks.map((b) => [`${relative(repo, b.file)}:${b.line}`, b] as const))(
    '%s equals its snippet',
    (_where, b) => {
      expect(
        b.marker,
        'a ```ts block needs a <!-- snippet: docs/snippets/<file>.ts#<region> --> line before it',
      ).toBeDefined();
      const { code, problem } = snippetSource(b.marker!);
      expect(code, problem).toBeDefined();
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
