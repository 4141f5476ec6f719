import { existsSync, lstatSync, readdirSync, readFileSync, readlinkSync, statSync } from 'node:fs';
import { join, relative, resolve, sep } from 'node:path';
import { FlowGrpoError, isWithin, realPathOf, SymlinkRefusedError } from '@flowgrpo/core';
import { listCheckpoints } from './checkpoint.js';
import { LOCK_FILE } from './run-lock.js';

// What a run checks about its output_dir before it writes anything there (run-lifecycle.ts runs
// these before it creates the folder or takes its lock; the CLI's preflight reports them with
// the rest). Three rules, each so that nothing a user had is lost:
//
//   - output_dir is never a folder the run reads, nor inside one, nor around one: the model,
//     tokenizer and data stay read-only (HF's folders included: a run config written as the
//     model's config.json would break the model). Paths are compared real (links resolved).
//   - no symbolic link at or under what a run writes (config.json, rollouts/, checkpoint-<n>/,
//     …): the run would write where it points. output_dir itself may be a link.
//   - HF's rule for a folder that is not a run: one that holds files is refused unless
//     overwrite_output_dir (a run then writes beside them and never moves them), and a file of
//     someone else's where a run writes (a model's config.json, an eval/ folder of data) is
//     refused even then, because overwriting would replace it.

/** What a run writes at the top of output_dir, and so what overwrite_output_dir replaces. */
export const RUN_FILES: ReadonlySet<string> = new Set([
  'metrics.jsonl',
  'config.json',
  'report.html',
  'rollouts',
  'eval',
  'adapters',
]);
const CHECKPOINT = /^checkpoint-\d+$/;
export const isRunFile = (name: string) => RUN_FILES.has(name) || CHECKPOINT.test(name);

/** The earlier run's files while an overwrite is under way (run-lifecycle.ts). */
export const PREVIOUS_RUN = {
  moving: '.flowgrpo-previous-run.moving',
  aside: '.flowgrpo-previous-run',
  deleting: '.flowgrpo-previous-run.deleting',
} as const;

/**
 * Names only flowgrpo gives: the lock, an overwrite's set-aside run, and the temporary siblings
 * of a folder written whole (`.checkpoint-3.tmp-…`) or of a file replaced by a rename.
 */
const isFlowgrpoName = (name: string) =>
  name === LOCK_FILE ||
  name.startsWith(PREVIOUS_RUN.aside) ||
  /^\.(checkpoint-\d+|artifacts)\.(tmp|old)-/.test(name) ||
  /^(metrics\.jsonl|config\.json)\.tmp-\d+$/.test(name);

/** Everything a run writes at the top of output_dir: its files, artifacts/, graphs/, its own names. */
const isRunEntry = (name: string) =>
  isRunFile(name) || name === 'artifacts' || name === 'graphs' || isFlowgrpoName(name);

/** A path a run or a command reads: a model, tokenizer, data file, adapter or checkpoint. */
export interface RunInput {
  /** The option or key that names it ('model', 'train_file', '--adapter'). */
  key: string;
  path: string;
  /**
   * It may be something a run in output_dir made: an artifacts folder (output_dir/artifacts, as
   * the CLI builds it) or a checkpoint (output_dir/checkpoint-<n>, to resume or start from).
   */
  runProduct?: boolean;
}

/** How an output and an input overlap. */
export type Overlap = 'same' | 'inside' | 'contains';

/** An output (output_dir, --out) that is, or is inside, or holds, what the run reads. */
export class OutputOverlapsInputError extends FlowGrpoError {
  static override readonly code = 'OUTPUT_OVERLAPS_INPUT';
  /** The output's key or option ('output_dir', '--out'). */
  readonly key: string;
  /** The output's real path. */
  readonly path: string;
  /** The input it overlaps (its key and real path). */
  readonly input: { key: string; path: string };
  readonly overlap: Overlap;
  constructor(fields: {
    key: string;
    path: string;
    input: { key: string; path: string };
    overlap: Overlap;
  }) {
    const { key, path, input, overlap } = fields;
    const is =
      overlap === 'same'
        ? `${key} ${path} is the ${input.key} itself`
        : overlap === 'inside'
          ? `${key} ${path} is inside the ${input.key} (${input.path})`
          : `${key} ${path} holds the ${input.key} (${input.path})`;
    super(`${is}: what a run reads is never written to`, {
      hint: `set ${key} to a path of its own, outside every model, tokenizer and data folder (e.g. runs/<name> beside them)`,
    });
    this.key = key;
    this.path = path;
    this.input = input;
    this.overlap = overlap;
  }
}

/** output_dir holds files that are not a flowgrpo run's (HF: "Output directory … is not empty"). */
export class OutputDirNotEmptyError extends FlowGrpoError {
  static override readonly code = 'OUTPUT_DIR_NOT_EMPTY';
  readonly dir: string;
  /** The entries in the way. */
  readonly entries: readonly string[];
  /** Whether overwrite_output_dir would let the run go on (beside them, never over them). */
  readonly overwriteHelps: boolean;
  constructor(
    message: string,
    fields: { dir: string; entries: readonly string[]; overwriteHelps: boolean },
    hint: string,
  ) {
    super(message, { hint });
    this.dir = fields.dir;
    this.entries = fields.entries;
    this.overwriteHelps = fields.overwriteHelps;
  }
}

/**
 * The inputs that `output` (a folder, or a file with `file: true`) is, lies inside, or holds —
 * compared on real paths. An input marked `runProduct` may lie at output/artifacts or
 * output/checkpoint-<n>: a run's own folders.
 */
export function outputOverlaps(
  output: { key: string; path: string; file?: boolean },
  inputs: readonly RunInput[],
): OutputOverlapsInputError[] {
  const out = realPathOf(output.path);
  const found: OutputOverlapsInputError[] = [];
  for (const input of inputs) {
    const path = realPathOf(input.path);
    let overlap: Overlap;
    if (path === out) overlap = 'same';
    else if (isWithin(out, path)) overlap = 'inside';
    else if (!output.file && isWithin(path, out)) {
      const first = relative(out, path).split(sep)[0]!;
      if (input.runProduct && (first === 'artifacts' || CHECKPOINT.test(first))) continue;
      overlap = 'contains';
    } else continue;
    found.push(
      new OutputOverlapsInputError({
        key: output.key,
        path: out,
        input: { key: input.key, path },
        overlap,
      }),
    );
  }
  return found;
}

/** The symbolic links at, or anywhere under, the entries of `dir` that a run writes. */
function runLinks(dir: string, names: readonly string[]): SymlinkRefusedError[] {
  const found: SymlinkRefusedError[] = [];
  const visit = (path: string) => {
    const stat = lstatSync(path, { throwIfNoEntry: false });
    if (!stat) return;
    if (stat.isSymbolicLink()) {
      found.push(
        new SymlinkRefusedError(
          { path, target: readLink(path), folder: dir, writer: 'the run' },
          {
            hint: `remove the link (rm ${path} removes the link only, not what it points to), or set output_dir to a folder without one`,
          },
        ),
      );
    } else if (stat.isDirectory()) for (const name of readdirSync(path)) visit(join(path, name));
  };
  for (const name of names) if (isRunEntry(name)) visit(join(dir, name));
  return found;
}

function readLink(path: string): string {
  try {
    return readlinkSync(path);
  } catch {
    return '?';
  }
}

/** config.json of a run (every trainer writes its name and config there first), not a model's. */
function isRunConfig(path: string): boolean {
  try {
    const value = JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
    return typeof value?.trainer === 'string' && 'output_dir' in value;
  } catch {
    return false;
  }
}

/** HF's rule for a folder that is not a run (see the top of this file). */
function notARun(
  dir: string,
  names: readonly string[],
  overwrite: boolean,
): OutputDirNotEmptyError | undefined {
  const runConfig = names.includes('config.json') && isRunConfig(join(dir, 'config.json'));
  const isRun =
    runConfig ||
    names.some(isFlowgrpoName) ||
    listCheckpoints(dir).length > 0 ||
    existsSync(join(dir, 'artifacts', 'artifacts.json'));
  const foreignConfig = names.includes('config.json') && !runConfig;
  const taken = names.filter(
    (n) =>
      isRunEntry(n) && !isFlowgrpoName(n) && (!isRun || (n === 'config.json' && foreignConfig)),
  );
  if (taken.length > 0)
    return new OutputDirNotEmptyError(
      `output_dir ${dir} holds ${taken.join(', ')}, where a run writes, and ${
        foreignConfig
          ? 'its config.json is not a run config (no "trainer" key: a model\'s?)'
          : 'it is not a flowgrpo run (no run config.json, no checkpoint)'
      }: the run would replace ${taken.length === 1 ? 'it' : 'them'}`,
      { dir, entries: taken, overwriteHelps: false },
      'set output_dir to a new or empty folder (e.g. runs/<name>), or move those files out of it',
    );
  const others = names.filter((n) => !isRunEntry(n));
  if (isRun || overwrite || others.length === 0) return undefined;
  const shown = `${others.slice(0, 3).join(', ')}${others.length > 3 ? `, … (${others.length} entries)` : ''}`;
  return new OutputDirNotEmptyError(
    `output_dir ${dir} already exists and is not empty (${shown}), and it is not a flowgrpo run`,
    { dir, entries: others, overwriteHelps: true },
    'set output_dir to a new or empty folder, or set overwrite_output_dir (flowgrpo train --overwrite) to write the run beside those files (they are kept)',
  );
}

/**
 * Every problem with writing a run into `output_dir` that can be seen before anything is made:
 * the inputs it overlaps (then nothing else: the fix is another output_dir), else the links on
 * what a run writes and HF's rule for a folder that is not a run. One that is a file has none
 * here (the claim names it).
 */
export function outputDirProblems(o: {
  output_dir: string;
  overwrite_output_dir: boolean;
  /** A path here is an input too (a run's own checkpoint-<n> in output_dir is fine). */
  resume_from_checkpoint?: boolean | string | undefined;
  inputs?: readonly RunInput[] | undefined;
}): FlowGrpoError[] {
  const dir = resolve(o.output_dir);
  const from = o.resume_from_checkpoint;
  const inputs = [
    ...(o.inputs ?? []),
    ...(typeof from === 'string' && from
      ? [{ key: 'resume_from_checkpoint', path: from, runProduct: true }]
      : []),
  ];
  const problems: FlowGrpoError[] = outputOverlaps({ key: 'output_dir', path: dir }, inputs);
  // Over an input, the fix is another output_dir: what this one holds is beside the point.
  if (problems.length > 0 || !existsSync(dir) || !statSync(dir).isDirectory()) return problems;
  const names = readdirSync(dir).sort();
  problems.push(...runLinks(dir, names));
  const notRun = notARun(dir, names, o.overwrite_output_dir);
  if (notRun) problems.push(notRun);
  return problems;
}
