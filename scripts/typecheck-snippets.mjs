#!/usr/bin/env node
// Typechecks the docs' snippets (docs/snippets/*.ts) the way a user's app compiles them: `strict`,
// `exactOptionalPropertyTypes`, `noUncheckedIndexedAccess`, NodeNext (docs/snippets/tsconfig.json).
// The packages resolve to their TypeScript sources here (the `@flowgrpo/source` condition), so the
// program also holds the packages' own files, which the root tsconfig checks under the repo's
// settings; an app sees only their .d.ts. So only diagnostics in the snippets count: a library type
// that a strict app cannot satisfy (TS2379 on `apiKey: process.env.OPENAI_API_KEY`) is reported at
// the snippet that trips on it. Runs as part of `pnpm typecheck`.
import { dirname, join, relative, sep } from 'node:path';
import ts from 'typescript';

const root = join(dirname(new URL(import.meta.url).pathname), '..');
const snippets = join(root, 'docs', 'snippets') + sep;
const configPath = join(snippets, 'tsconfig.json');

const read = ts.readConfigFile(configPath, ts.sys.readFile);
const config = ts.parseJsonConfigFileContent(read.config, ts.sys, dirname(configPath));
const program = ts.createProgram({ rootNames: config.fileNames, options: config.options });
const diagnostics = [
  ...(read.error ? [read.error] : []),
  ...config.errors,
  ...ts.getPreEmitDiagnostics(program),
].filter((d) => d.file === undefined || d.file.fileName.startsWith(snippets.split(sep).join('/')));

if (diagnostics.length > 0) {
  process.stderr.write(
    ts.formatDiagnosticsWithColorAndContext(diagnostics, {
      getCanonicalFileName: (f) => f,
      getCurrentDirectory: () => root,
      getNewLine: () => '\n',
    }),
  );
  process.stderr.write(
    `\n${diagnostics.length} error(s) in ${relative(root, snippets)} under its strict settings ` +
      `(${relative(root, configPath)}).\n`,
  );
  process.exit(1);
}
