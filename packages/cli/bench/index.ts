// `pnpm bench` for @flowgrpo/cli: whole-process `flowgrpo generate` of stories260K, greedy from
// "Once upon a time" until BOS (342 tokens), wall time from spawn to exit — the bundled bin
// (dist/flowgrpo.js, built here into node_modules/.cache so that its external onnxruntime-node
// resolves as in an install), and the source run through tsx as `pnpm flowgrpo` does it.
import { execFile } from 'node:child_process';
import { existsSync, rmSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
// @ts-expect-error a plain .mjs build script without types
import { bundleCli } from '../scripts/bundle.mjs';

const run = promisify(execFile);
const pkg = join(import.meta.dirname, '..');
const root = join(pkg, '..', '..');
const shared = process.env.FLOWGRPO_SHARED ?? join(root, '..', 'shared');
const stories = join(shared, 'models', 'stories260K');
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[s.length >> 1]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

console.log(`# @flowgrpo/cli benchmarks — Node ${process.version}, ${cpus().length} CPUs\n`);
// About 15 minutes on 2 cores (more the first time, for the demo it starts from): only when named,
// `pnpm --filter @flowgrpo/cli bench async-rollouts`.
if (process.argv.slice(2).includes('async-rollouts')) {
  await import('./async-rollouts.js');
  process.exit(0);
}
if (!existsSync(join(stories, 'stories260K.bin'))) {
  console.log(`skipped: ${join(stories, 'stories260K.bin')} absent`);
  process.exit(0);
}
const out = join(pkg, 'node_modules', '.cache', 'flowgrpo-bench');
rmSync(out, { recursive: true, force: true });
const bin = (await bundleCli(out)) as string;
const args = [
  'generate',
  '--model',
  join(stories, 'stories260K.bin'),
  '--tokenizer',
  join(stories, 'tok512.bin'),
  '--prompt',
  'Once upon a time',
  '--temperature',
  '0',
  '--max-new-tokens',
  '512',
  '--json',
];

async function timed(cmd: string, argv: string[]): Promise<{ s: number; tokens: number }> {
  const t0 = performance.now();
  const { stdout } = await run(cmd, argv, { cwd: root, maxBuffer: 1 << 24 });
  const s = (performance.now() - t0) / 1000;
  return { s, tokens: (JSON.parse(stdout) as { ids: number[] }).ids.length };
}

const rows: string[][] = [];
const measure = async (label: string, cmd: string, argv: string[], reps: number) => {
  const xs: { s: number; tokens: number }[] = [];
  for (let i = 0; i < reps; i++) xs.push(await timed(cmd, argv));
  const times = xs.map((x) => x.s);
  rows.push([
    label,
    String(reps),
    String(xs[0]!.tokens),
    median(times).toFixed(2),
    Math.min(...times).toFixed(2),
    Math.max(...times).toFixed(2),
  ]);
};
await timed(process.execPath, [bin, ...args]); // warm the page cache
await measure(
  'node dist/flowgrpo.js generate (the bundled bin)',
  process.execPath,
  [bin, ...args],
  7,
);
await measure(
  'node --import tsx src/bin.ts generate (as `pnpm flowgrpo`, minus pnpm)',
  process.execPath,
  ['--conditions=@flowgrpo/source', '--import', 'tsx', join(pkg, 'src', 'bin.ts'), ...args],
  3,
);
rmSync(out, { recursive: true, force: true });

const header = ['command', 'runs', 'tokens', 'median s', 'min s', 'max s'];
const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
const line = (cells: string[]) =>
  cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
console.log('## whole-process `flowgrpo generate`: stories260K, greedy, 342 tokens, spawn to exit');
console.log(line(header));
console.log(widths.map((w) => '-'.repeat(w)).join('  '));
for (const r of rows) console.log(line(r));
console.log(
  `  note: wall time of the whole process (node start, module loading, model load, artifacts build, session creation, generation, exit); load average at the end: ${loadavg()
    .map((x) => x.toFixed(2))
    .join(' ')}`,
);
