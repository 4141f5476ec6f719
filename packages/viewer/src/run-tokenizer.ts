import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { isAbsolute, join, normalize, relative, resolve, sep } from 'node:path';

// Which tokenizer.json shows a run's token ids as text. A full fine-tuning checkpoint carries its
// own copy; a LoRA checkpoint (adapter_config.json + weights, as PEFT writes it) and an artifacts
// folder carry none, so the run's own record is read for the tokenizer it used, in this order:
//   1. the newest checkpoint's tokenizer.json;
//   2. config.json's `tokenizer`, then its `model` / `model_name_or_path` (a folder, or the file);
//   3. the base model the newest checkpoint's adapter_config.json names (base_model_name_or_path;
//      a multi-role checkpoint: its roles' folders);
//   4. config.json's `artifacts` folder.
// A path is read as it was meant when the run was made: an absolute one that is gone but lay
// inside the recorded output_dir is looked for at the same place inside the run directory now (a
// run folder moved or copied elsewhere), and a relative one is relative to the run's working
// directory — known when output_dir was recorded relative to it, and otherwise not guessed at.
// Only reads; every place tried is returned, so a page can say where it looked.

export interface TokenizerTried {
  /** What named the place: "checkpoint-10", "config.json tokenizer", … */
  from: string;
  /** The file looked for, or the recorded path that could not be placed. */
  path: string;
  /** Why it was passed over. */
  reason: string;
}

export interface TokenizerLookup {
  /** The tokenizer.json used, its text, and what named it; absent when none was found. */
  found?: { path: string; from: string; json: string };
  /** The places passed over before it (all of them when none was found). */
  tried: TokenizerTried[];
}

/** A recorded path as a place to look: the file itself when it names a .json, else the folder's. */
const tokenizerFile = (p: string) =>
  p.endsWith('.json') && !(existsSync(p) && statSync(p).isDirectory())
    ? p
    : join(p, 'tokenizer.json');

/**
 * Where a path recorded by a run is now (see the top of this file), or a reason it cannot be said.
 */
export function recordedPath(
  runDir: string,
  outputDir: unknown,
  p: string,
): { path: string } | { reason: string } {
  if (isAbsolute(p)) {
    if (existsSync(p) || typeof outputDir !== 'string' || !isAbsolute(outputDir))
      return { path: p };
    const inside = relative(outputDir, p);
    const moved = inside !== '' && !inside.startsWith(`..${sep}`) && inside !== '..';
    return { path: moved ? join(runDir, inside) : p };
  }
  if (typeof outputDir === 'string' && !isAbsolute(outputDir)) {
    // output_dir was `out/run` and the run is /home/u/proj/out/run: the run's cwd was /home/u/proj.
    const tail = normalize(outputDir).replace(/[\\/]+$/, '');
    if (tail === '.') return { path: resolve(runDir, p) };
    if (!tail.startsWith('..') && runDir.endsWith(`${sep}${tail}`))
      return { path: resolve(runDir.slice(0, -tail.length), p) };
  }
  return {
    reason:
      'a relative path, and config.json does not record the working directory the run was started in',
  };
}

/** The base models the newest checkpoint's adapters name (PEFT's base_model_name_or_path). */
function adapterBases(runDir: string, checkpoint: string): { from: string; path: string }[] {
  const configs = [join(checkpoint, 'adapter_config.json')];
  try {
    for (const e of readdirSync(join(runDir, checkpoint), { withFileTypes: true }).sort((a, b) =>
      a.name.localeCompare(b.name),
    ))
      if (e.isDirectory()) configs.push(join(checkpoint, e.name, 'adapter_config.json'));
  } catch {
    // an unreadable checkpoint: nothing named there
  }
  const out: { from: string; path: string }[] = [];
  for (const file of configs) {
    let base: unknown;
    try {
      base = (
        JSON.parse(readFileSync(join(runDir, file), 'utf8')) as {
          base_model_name_or_path?: unknown;
        }
      )?.base_model_name_or_path;
    } catch {
      continue;
    }
    if (typeof base === 'string' && base !== '')
      out.push({ from: `${file} base_model_name_or_path`, path: base });
  }
  return out;
}

/** Why a tokenizer.json cannot show tokens, or undefined when it can. */
function unusable(json: string): string | undefined {
  try {
    const parsed = JSON.parse(json) as { model?: { vocab?: unknown } } | null;
    return parsed?.model?.vocab ? undefined : 'not a tokenizer.json (it has no model.vocab)';
  } catch (e) {
    return `not JSON (${(e as Error).message})`;
  }
}

/**
 * The tokenizer.json of the run in `runDir`, given its config.json (undefined before the trainer
 * wrote it) and its checkpoint folders' names, oldest first.
 */
export function findRunTokenizer(
  runDir: string,
  config: Record<string, unknown> | undefined,
  checkpoints: readonly string[],
): TokenizerLookup {
  const newest = checkpoints.at(-1);
  const named: { from: string; path: string | undefined; recorded?: string }[] = [];
  if (newest) named.push({ from: newest, path: join(runDir, newest) });
  for (const key of ['tokenizer', 'model', 'model_name_or_path'])
    if (typeof config?.[key] === 'string')
      named.push({ from: `config.json ${key}`, path: undefined, recorded: config[key] });
  if (newest)
    for (const b of adapterBases(runDir, newest))
      named.push({ from: b.from, path: undefined, recorded: b.path });
  if (typeof config?.artifacts === 'string')
    named.push({ from: 'config.json artifacts', path: undefined, recorded: config.artifacts });

  const tried: TokenizerTried[] = [];
  const seen = new Set<string>();
  for (const n of named) {
    let folder = n.path;
    if (folder === undefined) {
      const placed = recordedPath(runDir, config?.output_dir, n.recorded!);
      if ('reason' in placed) {
        tried.push({ from: n.from, path: n.recorded!, reason: placed.reason });
        continue;
      }
      folder = placed.path;
    }
    const file = tokenizerFile(folder);
    // The same file named twice (the model and its adapters' base): looked at once.
    if (seen.has(file)) continue;
    seen.add(file);
    if (!existsSync(file)) {
      tried.push({ from: n.from, path: file, reason: 'no such file' });
      continue;
    }
    let json: string;
    try {
      json = readFileSync(file, 'utf8');
    } catch (e) {
      tried.push({ from: n.from, path: file, reason: (e as Error).message });
      continue;
    }
    const bad = unusable(json);
    if (bad) {
      tried.push({ from: n.from, path: file, reason: bad });
      continue;
    }
    return { found: { path: file, from: n.from, json }, tried };
  }
  return { tried };
}
