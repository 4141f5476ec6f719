// Where the outside references live (../shared/anchors, ../shared/models) and how the bench
// builds and runs them: llama2.c's run.c compiled with gcc in a temporary folder, PyTorch's train
// step through python3. Each helper returns a reason instead of a result when something is
// missing, so a section prints one line and goes on.

import { execFile, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export const SHARED =
  process.env.FLOWGRPO_SHARED ?? join(import.meta.dirname, '..', '..', '..', '..', 'shared');
export const ANCHORS = join(SHARED, 'anchors');
export const STORIES = join(SHARED, 'models', 'stories260K');

export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** Compiles a C file with gcc into `out`; the error line when gcc or the sources are missing. */
export function compileC(
  sources: string[],
  out: string,
  flags: string[],
): { ok: true } | { ok: false; reason: string } {
  for (const s of sources) if (!existsSync(s)) return { ok: false, reason: `${s} absent` };
  const r = spawnSync('gcc', [...flags, '-o', out, ...sources, '-lm', '-lpthread'], {
    encoding: 'utf8',
  });
  if (r.error) return { ok: false, reason: `gcc not runnable: ${r.error.message}` };
  if (r.status !== 0) return { ok: false, reason: `gcc failed: ${r.stderr.trim().split('\n')[0]}` };
  return { ok: true };
}

/**
 * run.c's in-process timing (bench/anchors/llama2c-bench.c): `reps` calls of its generate(),
 * greedy; per call the microseconds and the sampled tokens.
 */
export async function runLlama2c(
  exe: string,
  prompt: string,
  steps: number,
  reps: number,
): Promise<{ us: number; tokens: number }[]> {
  const { stderr } = await run(
    exe,
    [
      join(STORIES, 'stories260K.bin'),
      join(STORIES, 'tok512.bin'),
      prompt,
      String(steps),
      String(reps),
    ],
    { maxBuffer: 1 << 24 },
  );
  return stderr
    .split('\n')
    .map((l) => /^(\d+) (\d+)$/.exec(l.trim()))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => ({ us: Number(m[1]), tokens: Number(m[2]) }));
}

export const LLAMA2C_HARNESS = join(import.meta.dirname, 'anchors', 'llama2c-bench.c');

/** Builds run.c's in-process harness with -Ofast -march=native; the exe path or why not. */
export function buildLlama2c(dir: string): { exe: string } | { reason: string } {
  const runC = join(ANCHORS, 'llama2c', 'run.c');
  if (!existsSync(runC)) return { reason: `${runC} absent` };
  const exe = join(dir, 'llama2c-bench');
  const r = compileC([LLAMA2C_HARNESS], exe, [
    '-Ofast',
    '-march=native',
    `-I${join(ANCHORS, 'llama2c')}`,
  ]);
  return r.ok ? { exe } : { reason: r.reason };
}

/** The machine's 1/5/15-minute load averages, for the notes (a shared 2-core machine). */
export function loadAverage(): string {
  return loadavg()
    .map((x) => x.toFixed(2))
    .join(' ');
}
