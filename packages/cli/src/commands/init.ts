import { readFileSync } from 'node:fs';
import { isAbsolute, join, relative, resolve } from 'node:path';
import { createRng } from '@flowgrpo/core';
import { type CliIO, type Command, numberOption, stringOption, UsageError } from '../command.js';
import {
  checkNoLinks,
  checkNoneExist,
  checkTarget,
  type Files,
  listFiles,
  writeFiles,
} from '../init/scaffold.js';
import { TEMPLATE_NAMES, TEMPLATES, type TemplateName } from '../init/templates.js';
import { createTemplateModel } from '../init/tiny-model.js';
import { type WordProblem, wordProblems } from '../init/word-problems.js';
import { templatesDir } from '../templates-dir.js';

const usage = `Usage:
  flowgrpo init [DIR] [--template NAME] [--model PATH] [--seed N] [--force]

Writes a runnable starting point into DIR (default: the working directory): run configs (JSON,
every key explained in DIR/README.md), data generated from the seed in the documented format
(data/train.jsonl and data/eval.jsonl: {"question", "answer"} math word problems, GSM8K's
"#### N"; data/sft.jsonl: an imperfect teacher's logs as TRL rows, made with the prompt the
template's agent sends in GRPO), a tiny Qwen2-architecture model created from the seed (model/;
--model names your own instead), and prints the next commands: SFT → GRPO → eval → export. On
2 CPU cores they run in about 2 minutes, and the eval shows GRPO ahead of the SFT model it
started from (each template's README.md says by how much to expect).

Templates:
${TEMPLATE_NAMES.map((n) => `  ${n.padEnd(14)} ${TEMPLATES[n].summary}`).join('\n')}

DIR must be new or empty; --force adds the files to a folder that holds others, and even then an
existing file is never replaced, nor a symbolic link inside DIR written through (init stops
before writing anything, naming it). DIR itself may be a link to a folder.

Options:
  --template NAME  ${TEMPLATE_NAMES.join(' | ')} (default math-tags)
  --model PATH     a HF model folder to start from instead of the tiny model (the configs name it)
  --seed N         seed of the data, the teacher's logs and the tiny model (default 1)
  --force          write into a folder that is not empty (never over a file)`;

function jsonl(rows: readonly object[]): string {
  return rows.map((r) => `${JSON.stringify(r)}\n`).join('');
}

/** A shell word: quoted only when it needs to be. */
const shellWord = (s: string) => (/^[\w./@:=+-]+$/.test(s) ? s : `'${s.replaceAll("'", `'\\''`)}'`);

/**
 * The template's files as they will be written: its own folder (the configs' seed set to the
 * seed; with --model, the configs naming that model as model and as tokenizer), the data from
 * the seed — GRPO's and the held-out {question, answer} rows, and data/sft.jsonl, the teacher's
 * logs on questions of their own.
 */
function templateFiles(
  name: TemplateName,
  model: string | undefined,
  seed: number,
): { files: Files; own: ReadonlyMap<string, string>; sftRows: object[] } {
  const template = TEMPLATES[name];
  const own = join(templatesDir(), name);
  const text = new Map(listFiles(own).map((p) => [p, readFileSync(join(own, p), 'utf8')]));
  // The run configs: one seed for the data, the model and the trainers (as the demo's --seed),
  // and with --model the user's model as model and as tokenizer.
  for (const [path, contents] of text) {
    if (!path.endsWith('.json') || path === 'package.json' || path === 'tsconfig.json') continue;
    const config = JSON.parse(contents) as Record<string, unknown>;
    const set = {
      ...('seed' in config && { seed }),
      ...(model !== undefined && config.model === 'model' && { model }),
      ...(model !== undefined && config.tokenizer === 'model' && { tokenizer: model }),
    };
    // Rewritten only when a value changes: a file as the template has it keeps its layout.
    if (Object.entries(set).some(([k, v]) => config[k] !== v))
      text.set(path, `${JSON.stringify({ ...config, ...set }, null, 2)}\n`);
  }
  const files: Files = new Map(text);
  const rows = wordProblems(seed, template.rows);
  const plain = (split: WordProblem[]) =>
    split.map(({ question, answer }) => ({ question, answer }));
  files.set('data/train.jsonl', jsonl(plain(rows.train)));
  files.set('data/eval.jsonl', jsonl(plain(rows.eval)));
  const teacher = createRng(`${seed}:teacher`);
  const sftRows = rows.logs.flatMap((row) => template.sftRows(row, text, teacher));
  files.set('data/sft.jsonl', jsonl(sftRows));
  return { files, own: text, sftRows };
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
    const { files, own, sftRows } = templateFiles(name as TemplateName, model, seed);
    const paths = [...files.keys(), ...(model === undefined ? ['model'] : [])];
    checkNoLinks(dir, paths);
    checkNoneExist(dir, paths);
    writeFiles(dir, files);
    if (model === undefined) {
      checkNoLinks(dir, ['model']); // again just before: nothing followed that appeared since
      await createTemplateModel(join(dir, 'model'), seed, template.model, sftRows);
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
    const commands = template.commands(own, model ?? 'model', model ?? 'model');
    if (where !== '.') commands.unshift([`cd ${shellWord(where)}`, '']);
    for (const [command, what] of commands)
      io.stdout(`${what ? `  # ${what.trim()}\n` : ''}  ${command}\n`);
    return 0;
  },
};
