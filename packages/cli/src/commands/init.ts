import { readFileSync } from 'node:fs';
import { isAbsolute, join, relative, resolve } from 'node:path';
import { createTinyQwen2 } from '@flowgrpo/models';
import { type CliIO, type Command, numberOption, stringOption, UsageError } from '../command.js';
import {
  checkNoLinks,
  checkNoneExist,
  checkTarget,
  type Files,
  listFiles,
  writeFiles,
} from '../init/scaffold.js';
import type { PlainRow } from '../init/sft-rows.js';
import { TEMPLATE_NAMES, TEMPLATES, type TemplateName } from '../init/templates.js';
import { templatesDir } from '../templates-dir.js';

const usage = `Usage:
  flowgrpo init [DIR] [--template NAME] [--model PATH] [--seed N] [--force]

Writes a runnable starting point into DIR (default: the working directory): run configs (JSON,
every key explained in DIR/README.md), data in the documented format (data/train.jsonl and
data/eval.jsonl: {"question", "answer"} rows, GSM8K's "#### N"; data/sft.jsonl: TRL's
{"messages"} rows made with the prompt the template's agent sends in GRPO), a tiny
Qwen2-architecture model created from the seed (model/; --model names your own instead), and
prints the next commands: SFT → GRPO → eval → export. The first runs in minutes on a CPU.

Templates:
${TEMPLATE_NAMES.map((n) => `  ${n.padEnd(14)} ${TEMPLATES[n].summary}`).join('\n')}

DIR must be new or empty; --force adds the files to a folder that holds others, and even then an
existing file is never replaced, nor a symbolic link inside DIR written through (init stops
before writing anything, naming it). DIR itself may be a link to a folder.

Options:
  --template NAME  ${TEMPLATE_NAMES.join(' | ')} (default math-tags)
  --model PATH     a HF model folder to start from instead of the tiny model (the configs name it)
  --seed N         seed of the tiny model (default 1)
  --force          write into a folder that is not empty (never over a file)`;

/** The tiny model init creates: byte-level tokenizer, positions for the Flow planner's prompt. */
const TINY = {
  hiddenSize: 32,
  layers: 1,
  heads: 2,
  kvHeads: 1,
  intermediateSize: 64,
  maxPositionEmbeddings: 4096,
} as const;

function readRows(file: string): PlainRow[] {
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as PlainRow);
}

/** A shell word: quoted only when it needs to be. */
const shellWord = (s: string) => (/^[\w./@:=+-]+$/.test(s) ? s : `'${s.replaceAll("'", `'\\''`)}'`);

/**
 * The template's files as they will be written: its own folder, the shared data, data/sft.jsonl
 * and, with --model, the configs naming that model (as model and as tokenizer).
 */
function templateFiles(name: TemplateName, model: string | undefined): Files {
  const root = templatesDir();
  const own = join(root, name);
  const text = new Map(listFiles(own).map((p) => [p, readFileSync(join(own, p), 'utf8')]));
  if (model !== undefined)
    for (const [path, contents] of text) {
      if (!path.endsWith('.json') || path === 'package.json' || path === 'tsconfig.json') continue;
      const config = JSON.parse(contents) as Record<string, unknown>;
      if (config.model === 'model') config.model = model;
      if (config.tokenizer === 'model') config.tokenizer = model;
      text.set(path, `${JSON.stringify(config, null, 2)}\n`);
    }
  const files: Files = new Map(text);
  for (const split of ['train', 'eval'])
    files.set(`data/${split}.jsonl`, readFileSync(join(root, 'data', `${split}.jsonl`), 'utf8'));
  const sft = readRows(join(root, 'data', 'train.jsonl')).map((row) =>
    JSON.stringify(TEMPLATES[name].sftRow(row, text)),
  );
  files.set('data/sft.jsonl', `${sft.join('\n')}\n`);
  return files;
}

export const initCommand: Command = {
  name: 'init',
  summary: 'write a runnable starting point: run configs, data, a tiny model, the next commands',
  usage,
  options: {
    template: { type: 'string' },
    model: { type: 'string' },
    seed: { type: 'string' },
    force: { type: 'boolean' },
  },
  async run(args, io: CliIO): Promise<number> {
    if (args.positionals.length > 1)
      throw new UsageError(`init takes one folder, got ${args.positionals.length}`);
    const name = stringOption(args, 'template') ?? 'math-tags';
    if (!(TEMPLATE_NAMES as readonly string[]).includes(name))
      throw new UsageError(`--template must be ${TEMPLATE_NAMES.join(', ')}, got '${name}'`);
    const template = TEMPLATES[name as TemplateName];
    const seed = numberOption(args, 'seed') ?? 1;
    if (!Number.isInteger(seed)) throw new UsageError(`--seed must be an integer, got ${seed}`);
    const model = stringOption(args, 'model');
    const dir = resolve(io.cwd, args.positionals[0] ?? '.');

    // Every check before the first write: nothing is half-written, nothing replaced.
    checkTarget(dir, args.values.force === true);
    const files = templateFiles(name as TemplateName, model);
    const paths = [...files.keys(), ...(model === undefined ? ['model'] : [])];
    checkNoLinks(dir, paths);
    checkNoneExist(dir, paths);
    writeFiles(dir, files);
    if (model === undefined) {
      checkNoLinks(dir, ['model']); // again just before: nothing followed that appeared since
      await createTinyQwen2(join(dir, 'model'), { seed, ...TINY });
    }

    // The folder as the user named it: an absolute DIR stays absolute (a relative path from the
    // working directory to /tmp/run reads `../../tmp/run`), a relative one is shown normalised.
    const given = args.positionals[0];
    const where = given !== undefined && isAbsolute(given) ? dir : relative(io.cwd, dir) || '.';
    io.stdout(
      `wrote ${where}/: ${name} — ${template.summary}\n` +
        `  README.md explains every file and every key of the configs\n` +
        `  ${model === undefined ? `model/ (a tiny Qwen2 created from seed ${seed})` : `configs naming --model ${model}`}, data/ (train.jsonl, eval.jsonl, sft.jsonl)\n\nNext:\n`,
    );
    const commands = template.commands(model ?? 'model');
    if (where !== '.') commands.unshift([`cd ${shellWord(where)}`, '']);
    for (const [command, what] of commands)
      io.stdout(`${what ? `  # ${what.trim()}\n` : ''}  ${command}\n`);
    return 0;
  },
};
