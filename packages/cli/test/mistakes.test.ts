import { execFile, execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import {
  deviceAvailability,
  initLoraParams,
  type LoraConfig,
  loadDecoderConfig,
  saveLoraAdapter,
} from '@flowgrpo/models';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../src/main.js';
import { captureIO } from './support.js';
import { grpoConfig, questionRows, tinyModel, writeConfig, writeJsonl } from './train-fixtures.js';

// The mistakes users make, one row each: the command line (and the files the row writes into its
// own folder), the [CODE] the CLI must print, and the exit status (1 for a mistake in what was
// given, 2 for a usage mistake, with the usage). Every row's output must be `[CODE] message` with
// a fix (or the usage), and no stack trace. Nothing here trains: the fixtures are a tiny model, an
// artifacts directory, an adapter of another model's shape, and small files, built once.

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../../..');
const tmp = mkdtempSync(join(tmpdir(), 'flowgrpo-cli-mistakes-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

interface Fixtures {
  /** This row's own folder (empty at the start). */
  dir: string;
  /** A tiny HF model folder. */
  model: string;
  /** An artifacts directory built from `model` (flowgrpo export). */
  artifacts: string;
  /** A PEFT adapter made for a model of another shape. */
  otherAdapter: string;
  /** SampleRows (.jsonl). */
  rows: string;
  /** A valid GRPO run config over `model` with `extra` keys, written into `dir`. */
  config: (extra?: Record<string, unknown>, drop?: string[]) => string;
  /** Writes `text` to `name` in `dir`; returns its path. */
  file: (name: string, text: string) => string;
  /** Makes the folder `name` in `dir`; returns its path. */
  folder: (name: string) => string;
}

interface Mistake {
  name: string;
  argv: (f: Fixtures) => string[];
  code: string;
  exit: 1 | 2;
  /** Text the message must hold (the path, the key, the suggestion). */
  says?: string | RegExp | ((f: Fixtures) => string);
}

let fixtures: Omit<Fixtures, 'dir' | 'config' | 'file' | 'folder'>;
let cudaAvailable = true;

beforeAll(async () => {
  const model = await tinyModel(join(tmp, 'tiny'));
  // An adapter for a model with another hidden size: same module names, other shapes.
  const other = await tinyModel(join(tmp, 'tiny-other'));
  const otherConfig = { ...(await loadDecoderConfig(other)), hiddenSize: 16 };
  const lora: LoraConfig = { r: 2, alpha: 4, targetModules: ['q_proj', 'v_proj'] };
  const otherAdapter = join(tmp, 'other-adapter');
  await saveLoraAdapter(otherAdapter, otherConfig, lora, initLoraParams(otherConfig, lora, 1));
  const artifacts = join(tmp, 'artifacts');
  const built = captureIO(tmp);
  expect(await runCli(['export', '--model', model, '--out', artifacts], built), built.err).toBe(0);
  fixtures = {
    model,
    artifacts,
    otherAdapter,
    rows: writeJsonl(join(tmp, 'rows.jsonl'), questionRows(4)),
  };
  cudaAvailable = (await deviceAvailability('cuda')).available;
}, 120_000);

let rowCount = 0;
function rowFixtures(): Fixtures {
  const dir = join(tmp, `row-${rowCount++}`);
  mkdirSync(dir);
  const file = (name: string, text: string) => {
    const path = join(dir, name);
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, text);
    return path;
  };
  return {
    ...fixtures,
    dir,
    file,
    folder: (name) => {
      const path = join(dir, name);
      mkdirSync(path, { recursive: true });
      return path;
    },
    config: (extra = {}, drop = []) => {
      const c = grpoConfig(dir, fixtures.model, {
        train_file: fixtures.rows,
        output_dir: join(dir, 'run'),
        ...extra,
      });
      for (const k of drop) delete c[k];
      return writeConfig(join(dir, 'run.json'), c);
    },
  };
}

const MISTAKES: Mistake[] = [
  // ---- train: the config file ----------------------------------------------------------------
  { name: 'train without --config', argv: () => ['train'], code: 'USAGE_ERROR', exit: 2 },
  {
    name: 'train: a mistyped option',
    argv: (f) => ['train', '--confg', f.config()],
    code: 'USAGE_ERROR',
    exit: 2,
    says: "unknown option '--confg' (did you mean --config?)",
  },
  {
    name: 'train: the config does not exist',
    argv: (f) => ['train', '--config', join(f.dir, 'nope.json')],
    code: 'FILE_NOT_FOUND',
    exit: 1,
    says: (f) => join(f.dir, 'nope.json'),
  },
  {
    name: 'train: the config is a folder',
    argv: (f) => ['train', '--config', f.folder('configs')],
    code: 'IS_A_DIRECTORY',
    exit: 1,
    says: '--config',
  },
  {
    name: 'train: the config is not valid JSON (trailing comma)',
    argv: (f) => ['train', '--config', f.file('run.json', '{\n  "trainer": "grpo",\n}\n')],
    code: 'CONFIG_ERROR',
    exit: 1,
    says: /run\.json:3:1: not valid JSON/,
  },
  {
    name: 'train: the config is empty',
    argv: (f) => ['train', '--config', f.file('run.json', '')],
    code: 'CONFIG_ERROR',
    exit: 1,
    says: 'the file is empty',
  },
  {
    name: 'train: the config is a JSON array',
    argv: (f) => ['train', '--config', f.file('run.json', '[]')],
    code: 'CONFIG_ERROR',
    exit: 1,
    says: 'expected a JSON object',
  },
  {
    name: 'train: no "trainer" key',
    argv: (f) => ['train', '--config', f.config({}, ['trainer'])],
    code: 'CONFIG_ERROR',
    exit: 1,
    says: "trainer: must be 'sft' or 'grpo' (missing)",
  },
  {
    name: 'train: a mistyped key',
    argv: (f) => ['train', '--config', f.config({ learning_rat: 1e-3 })],
    code: 'CONFIG_ERROR',
    exit: 1,
    says: "unknown key 'learning_rat' (did you mean learning_rate?)",
  },
  {
    name: 'train: a mistyped key inside an object',
    argv: (f) => ['train', '--config', f.config({ agent: { type: 'tag', tols: ['calculator'] } })],
    code: 'CONFIG_ERROR',
    exit: 1,
    says: "agent: unknown key 'tols' (did you mean tools?)",
  },
  {
    name: 'train: a mistyped LoRA key',
    argv: (f) => ['train', '--config', f.config({ lora: { r: 2, lora_alhpa: 4 } })],
    code: 'CONFIG_ERROR',
    exit: 1,
    says: "lora: unknown key 'lora_alhpa' (did you mean lora_alpha?)",
  },
  {
    name: 'train: a GRPO key in an SFT config',
    argv: (f) => [
      'train',
      '--config',
      f.config({ trainer: 'sft', num_generations: 4 }, ['agent', 'reward']),
    ],
    code: 'CONFIG_ERROR',
    exit: 1,
    says: "'num_generations' (a GRPO key; this config's trainer is 'sft')",
  },
  {
    name: 'train: a number given as a string',
    argv: (f) => ['train', '--config', f.config({ max_steps: 'ten' })],
    code: 'CONFIG_ERROR',
    exit: 1,
    says: 'max_steps',
  },
  {
    name: 'train: an unknown reward',
    argv: (f) => ['train', '--config', f.config({ reward: 'bleu' })],
    code: 'CONFIG_ERROR',
    exit: 1,
    says: 'reward',
  },
  {
    name: 'train: an unknown tool',
    argv: (f) => ['train', '--config', f.config({ agent: { type: 'tag', tools: ['calculater'] } })],
    code: 'CONFIG_ERROR',
    exit: 1,
    says: "unknown tool 'calculater'",
  },
  {
    name: "train: reward 'judge' without an endpoint",
    argv: (f) => ['train', '--config', f.config({ reward: 'judge' })],
    code: 'CONFIG_ERROR',
    exit: 1,
    says: 'judge',
  },
  {
    name: 'train: an unknown device',
    argv: (f) => ['train', '--config', f.config(), '--device', 'tpu'],
    code: 'USAGE_ERROR',
    exit: 2,
    says: '--device must be',
  },
  // ---- train: the paths in the config -------------------------------------------------------
  {
    name: 'train: the model folder does not exist',
    argv: (f) => ['train', '--config', f.config({ model: join(f.dir, 'no-model') })],
    code: 'FILE_NOT_FOUND',
    exit: 1,
    says: (f) => join(f.dir, 'no-model'),
  },
  {
    name: 'train: the model is a file',
    argv: (f) => ['train', '--config', f.config({ model: join(f.model, 'config.json') })],
    code: 'CONFIG_ERROR',
    exit: 1,
    says: 'is a file',
  },
  {
    name: 'train: the model folder holds no model',
    argv: (f) => ['train', '--config', f.config({ model: f.folder('empty-model') })],
    code: 'CONFIG_ERROR',
    exit: 1,
    says: 'neither a HF model folder',
  },
  {
    name: 'train: the tokenizer folder does not exist',
    argv: (f) => ['train', '--config', f.config({ tokenizer: join(f.dir, 'no-tok') })],
    code: 'FILE_NOT_FOUND',
    exit: 1,
    says: (f) => join(f.dir, 'no-tok'),
  },
  {
    name: 'train: train_file does not exist',
    argv: (f) => ['train', '--config', f.config({ train_file: join(f.dir, 'train.jsonl') })],
    code: 'FILE_NOT_FOUND',
    exit: 1,
    says: (f) => join(f.dir, 'train.jsonl'),
  },
  {
    name: 'train: train_file is a folder',
    argv: (f) => ['train', '--config', f.config({ train_file: f.folder('data') })],
    code: 'IS_A_DIRECTORY',
    exit: 1,
    says: (f) => join(f.dir, 'data'),
  },
  {
    name: 'train: train_file is not JSONL',
    argv: (f) => [
      'train',
      '--config',
      f.config({ train_file: f.file('train.jsonl', '{"id": 0,\n') }),
    ],
    code: 'DATA_FORMAT_ERROR',
    exit: 1,
    says: 'train.jsonl',
  },
  {
    name: 'train: output_dir is a file',
    argv: (f) => ['train', '--config', f.config({ output_dir: f.file('out', 'not a folder') })],
    code: 'NOT_A_DIRECTORY',
    exit: 1,
    says: (f) => join(f.dir, 'out'),
  },
  {
    name: 'train: a tool that needs an LLM engine, without one',
    argv: (f) => ['train', '--config', f.config({ agent: { type: 'tag', tools: ['wikipedia'] } })],
    code: 'CONFIG_ERROR',
    exit: 1,
    says: 'need agent.engine',
  },
  {
    name: 'train: an API key variable that is not set',
    argv: (f) => [
      'train',
      '--config',
      f.config({
        agent: {
          type: 'tag',
          tools: ['calculator'],
          engine: {
            base_url: 'http://127.0.0.1:9/v1',
            model: 'm',
            api_key_env: 'FLOWGRPO_TEST_NO_SUCH_KEY',
          },
        },
      }),
    ],
    code: 'CONFIG_ERROR',
    exit: 1,
    says: 'FLOWGRPO_TEST_NO_SUCH_KEY',
  },
  // ---- eval -----------------------------------------------------------------------------------
  { name: 'eval without a model', argv: () => ['eval'], code: 'USAGE_ERROR', exit: 2 },
  {
    name: 'eval: the model does not exist',
    argv: (f) => ['eval', '--model', join(f.dir, 'm'), '--data', f.rows, '--agent', 'tag'],
    code: 'FILE_NOT_FOUND',
    exit: 1,
  },
  {
    name: 'eval: the data file does not exist',
    argv: (f) => ['eval', '--model', f.model, '--data', join(f.dir, 'val.jsonl'), '--agent', 'tag'],
    code: 'FILE_NOT_FOUND',
    exit: 1,
    says: '--data',
  },
  {
    name: 'eval: the data file is a folder',
    argv: (f) => ['eval', '--model', f.model, '--data', f.dir, '--agent', 'tag'],
    code: 'IS_A_DIRECTORY',
    exit: 1,
  },
  {
    name: 'eval: the adapter does not exist',
    argv: (f) => [
      'eval',
      '--model',
      f.model,
      '--data',
      f.rows,
      '--agent',
      'tag',
      '--adapter',
      join(f.dir, 'ckpt'),
    ],
    code: 'FILE_NOT_FOUND',
    exit: 1,
  },
  {
    name: 'eval: the adapter is a file',
    argv: (f) => [
      'eval',
      '--model',
      f.model,
      '--data',
      f.rows,
      '--agent',
      'tag',
      '--adapter',
      f.rows,
    ],
    code: 'NOT_A_DIRECTORY',
    exit: 1,
    says: '--adapter',
  },
  {
    name: 'eval: the adapter is a run folder, not a checkpoint',
    argv: (f) => {
      f.folder('run/checkpoint-2');
      f.folder('run/checkpoint-10');
      return [
        'eval',
        '--model',
        f.model,
        '--data',
        f.rows,
        '--agent',
        'tag',
        '--adapter',
        join(f.dir, 'run'),
      ];
    },
    code: 'DATA_FORMAT_ERROR',
    exit: 1,
    says: /is not a PEFT adapter folder[\s\S]*checkpoint-10/,
  },
  {
    name: "eval: an adapter of another model's shape",
    argv: (f) => [
      'eval',
      '--model',
      f.model,
      '--data',
      f.rows,
      '--agent',
      'tag',
      '--adapter',
      f.otherAdapter,
    ],
    code: 'DATA_FORMAT_ERROR',
    exit: 1,
    says: 'trained for another model',
  },
  {
    name: 'eval: an unknown agent',
    argv: (f) => ['eval', '--model', f.model, '--data', f.rows, '--agent', 'react'],
    code: 'USAGE_ERROR',
    exit: 2,
  },
  {
    name: 'eval: --limit 0',
    argv: (f) => ['eval', '--model', f.model, '--data', f.rows, '--agent', 'tag', '--limit', '0'],
    code: 'USAGE_ERROR',
    exit: 2,
  },
  {
    name: 'eval: --out in a folder that does not exist',
    argv: (f) => [
      'eval',
      '--model',
      f.model,
      '--data',
      f.rows,
      '--agent',
      'tag',
      '--out',
      join(f.dir, 'results', 'eval.json'),
    ],
    code: 'FILE_NOT_FOUND',
    exit: 1,
    says: (f) => join(f.dir, 'results'),
  },
  {
    name: 'eval: a mistyped key in the config',
    argv: (f) => ['eval', '--config', f.config({ max_turn: 2 })],
    code: 'CONFIG_ERROR',
    exit: 1,
    says: 'did you mean max_turns?',
  },
  // ---- export ---------------------------------------------------------------------------------
  { name: 'export without --model', argv: () => ['export'], code: 'USAGE_ERROR', exit: 2 },
  {
    name: 'export: the model does not exist',
    argv: (f) => ['export', '--model', join(f.dir, 'm'), '--out', join(f.dir, 'out')],
    code: 'FILE_NOT_FOUND',
    exit: 1,
  },
  {
    name: 'export --merge without --adapter',
    argv: (f) => ['export', '--model', f.model, '--out', join(f.dir, 'out'), '--merge'],
    code: 'USAGE_ERROR',
    exit: 2,
  },
  {
    name: 'export --merge: the adapter is the model folder (no adapter_config.json)',
    argv: (f) => [
      'export',
      '--model',
      f.model,
      '--adapter',
      f.model,
      '--out',
      join(f.dir, 'out'),
      '--merge',
    ],
    code: 'DATA_FORMAT_ERROR',
    exit: 1,
    says: 'is not a PEFT adapter folder (no adapter_config.json)',
  },
  {
    name: "export --merge: an adapter of another model's shape",
    argv: (f) => [
      'export',
      '--model',
      f.model,
      '--adapter',
      f.otherAdapter,
      '--out',
      join(f.dir, 'out'),
      '--merge',
    ],
    code: 'DATA_FORMAT_ERROR',
    exit: 1,
    says: 'trained for another model',
  },
  {
    name: 'export: --out is a file',
    argv: (f) => ['export', '--model', f.model, '--out', f.file('out', 'x')],
    code: 'NOT_A_DIRECTORY',
    exit: 1,
    says: '--out',
  },
  {
    name: 'export: an unknown dtype',
    argv: (f) => [
      'export',
      '--model',
      f.model,
      '--adapter',
      f.otherAdapter,
      '--out',
      join(f.dir, 'out'),
      '--merge',
      '--dtype',
      'float8',
    ],
    code: 'USAGE_ERROR',
    exit: 2,
  },
  {
    name: 'export: --lora-r is not a number',
    argv: (f) => ['export', '--model', f.model, '--out', join(f.dir, 'out'), '--lora-r', 'two'],
    code: 'USAGE_ERROR',
    exit: 2,
  },
  // ---- generate -------------------------------------------------------------------------------
  {
    name: 'generate: the model does not exist',
    argv: (f) => ['generate', '--model', join(f.dir, 'm'), '--prompt', 'hi'],
    code: 'FILE_NOT_FOUND',
    exit: 1,
  },
  {
    name: 'generate: the model folder holds no model',
    argv: (f) => ['generate', '--model', f.folder('empty'), '--prompt', 'hi'],
    code: 'CONFIG_ERROR',
    exit: 1,
    says: 'config.json',
  },
  {
    name: 'generate: a temperature that is not a number',
    argv: (f) => ['generate', '--model', f.model, '--prompt', 'hi', '--temperature', 'hot'],
    code: 'USAGE_ERROR',
    exit: 2,
  },
  // ---- data -----------------------------------------------------------------------------------
  { name: 'data without an action', argv: () => ['data'], code: 'USAGE_ERROR', exit: 2 },
  {
    name: 'data inspect: the file does not exist',
    argv: (f) => ['data', 'inspect', join(f.dir, 'rows.parquet')],
    code: 'FILE_NOT_FOUND',
    exit: 1,
  },
  {
    name: 'data inspect: the file is a folder',
    argv: (f) => ['data', 'inspect', f.dir],
    code: 'IS_A_DIRECTORY',
    exit: 1,
  },
  {
    name: 'data inspect: a CSV file',
    argv: (f) => ['data', 'inspect', f.file('rows.csv', 'id,question\n0,q\n')],
    code: 'DATA_FORMAT_ERROR',
    exit: 1,
    says: 'rows.csv',
  },
  {
    name: 'data prepare: --data-dir does not exist',
    argv: (f) => ['data', 'prepare', '--data-dir', join(f.dir, 'raw')],
    code: 'CONFIG_ERROR',
    exit: 1,
  },
  // ---- solve ----------------------------------------------------------------------------------
  { name: 'solve without a question', argv: () => ['solve'], code: 'USAGE_ERROR', exit: 2 },
  {
    name: 'solve: --base-url is not a URL',
    argv: () => ['solve', 'q', '--base-url', 'localhost:8000', '--model', 'm'],
    code: 'USAGE_ERROR',
    exit: 2,
  },
  {
    name: 'solve: an unknown tool',
    argv: () => [
      'solve',
      'q',
      '--base-url',
      'http://127.0.0.1:9/v1',
      '--model',
      'm',
      '--tools',
      'calc',
    ],
    code: 'USAGE_ERROR',
    exit: 2,
  },
  {
    name: 'solve: --api-key-file does not exist',
    argv: (f) => [
      'solve',
      'q',
      '--base-url',
      'http://127.0.0.1:9/v1',
      '--model',
      'm',
      '--api-key-file',
      join(f.dir, 'key'),
    ],
    code: 'FILE_NOT_FOUND',
    exit: 1,
  },
  // ---- serve ----------------------------------------------------------------------------------
  { name: 'serve without a model', argv: () => ['serve'], code: 'USAGE_ERROR', exit: 2 },
  {
    name: 'serve: the model does not exist',
    argv: (f) => ['serve', '--model', join(f.dir, 'm'), '--port', '0'],
    code: 'FILE_NOT_FOUND',
    exit: 1,
  },
  {
    name: 'serve: a --lora adapter that does not exist',
    argv: (f) => ['serve', '--model', f.model, '--lora', `policy=${join(f.dir, 'a')}`],
    code: 'FILE_NOT_FOUND',
    exit: 1,
  },
  {
    name: 'serve --train: the config is not valid JSON',
    argv: (f) => ['serve', '--model', f.model, '--train', f.file('grpo.json', "{'a': 1}")],
    code: 'CONFIG_ERROR',
    exit: 1,
    says: 'grpo.json:1:2',
  },
  {
    name: 'serve: --record in a folder that does not exist',
    argv: (f) => ['serve', '--model', f.model, '--record', join(f.dir, 'logs', 'rollouts.jsonl')],
    code: 'FILE_NOT_FOUND',
    exit: 1,
    says: '--record',
  },
  {
    name: 'serve --upstream without --served-model-name',
    argv: () => ['serve', '--upstream', 'http://127.0.0.1:9/v1'],
    code: 'USAGE_ERROR',
    exit: 2,
  },
  {
    name: 'generate: the tokenizer does not exist',
    argv: (f) => [
      'generate',
      '--model',
      f.model,
      '--tokenizer',
      join(f.dir, 'tok'),
      '--prompt',
      'hi',
    ],
    code: 'FILE_NOT_FOUND',
    exit: 1,
  },
  {
    name: 'export: an unknown graph',
    argv: (f) => ['export', '--model', f.model, '--out', join(f.dir, 'out'), '--graphs', 'decoder'],
    code: 'USAGE_ERROR',
    exit: 2,
  },
  {
    name: 'eval: an artifacts directory without --tokenizer',
    argv: (f) => ['eval', '--model', f.artifacts, '--data', f.rows, '--agent', 'tag'],
    code: 'CONFIG_ERROR',
    exit: 1,
    says: '--tokenizer',
  },
  {
    name: 'eval: a damaged artifacts directory',
    argv: (f) => {
      const art = f.folder('art');
      writeFileSync(join(art, 'artifacts.json'), '{}');
      return ['eval', '--model', art, '--data', f.rows, '--agent', 'tag'];
    },
    code: 'DATA_FORMAT_ERROR',
    exit: 1,
    says: 'artifacts.json',
  },
  {
    name: 'serve: --port is not a number',
    argv: (f) => ['serve', '--model', f.model, '--port', 'http'],
    code: 'USAGE_ERROR',
    exit: 2,
  },
  // ---- demo and the command itself ----------------------------------------------------------
  {
    name: 'demo: --seed is not a number',
    argv: () => ['demo', '--seed', 'one'],
    code: 'USAGE_ERROR',
    exit: 2,
  },
  {
    name: 'demo: an unknown --task',
    argv: () => ['demo', '--task', 'hard'],
    code: 'USAGE_ERROR',
    exit: 2,
    says: "--task must be default or explore, got 'hard'",
  },
  {
    name: 'demo: --rft with --two-roles',
    argv: () => ['demo', '--two-roles', '--rft'],
    code: 'USAGE_ERROR',
    exit: 2,
    says: '--rft is a baseline of the one-role demo',
  },
  {
    name: 'a mistyped command',
    argv: () => ['trian', '--config', 'run.json'],
    code: 'USAGE_ERROR',
    exit: 2,
    says: "unknown command 'trian' (did you mean train?)",
  },
];

/** Asserts the shape every mistake's output must have. */
function expectReported(err: string, m: Mistake, f: Fixtures): void {
  expect(err, err).toMatch(new RegExp(`^\\[${m.code}\\] \\S`, 'm'));
  expect(err).not.toMatch(/^\s+at /m);
  expect(err).not.toContain('node:internal');
  if (m.exit === 2) expect(err).toMatch(/Usage:|Commands:/);
  else expect(err, err).toMatch(/^fix: \S/m);
  const says = typeof m.says === 'function' ? m.says(f) : m.says;
  if (typeof says === 'string') expect(err).toContain(says);
  else if (says) expect(err).toMatch(says);
}

describe('flowgrpo: a user mistake is [CODE] message + fix, exit 1 (2 for usage), no stack', () => {
  it('the table holds at least 40 mistakes', () => {
    expect(MISTAKES.length).toBeGreaterThanOrEqual(40);
  });

  it.each(MISTAKES.map((m) => [m.name, m] as const))('%s', async (_name, m) => {
    const f = rowFixtures();
    const io = captureIO(f.dir, {});
    expect(await runCli(m.argv(f), io), io.err).toBe(m.exit);
    expectReported(io.err, m, f);
  });

  it('a device the machine lacks (--device cuda) is EXECUTION_PROVIDER_UNAVAILABLE', async (ctx) => {
    if (cudaAvailable) ctx.skip(); // this machine has CUDA: not a mistake here
    const f = rowFixtures();
    const io = captureIO(f.dir, {});
    expect(await runCli(['train', '--config', f.config(), '--device', 'cuda'], io)).toBe(1);
    expectReported(
      io.err,
      { name: '', argv: () => [], code: 'EXECUTION_PROVIDER_UNAVAILABLE', exit: 1 },
      f,
    );
  });

  it('an eval-only config (no train_file, output_dir, learning_rate, max_steps) is accepted', async () => {
    const f = rowFixtures();
    const config = f.config({ eval_file: fixtures.rows }, [
      'train_file',
      'output_dir',
      'learning_rate',
      'max_steps',
    ]);
    const io = captureIO(f.dir, {});
    expect(await runCli(['eval', '--config', config, '--limit', '1'], io), io.err).toBe(0);
    expect(io.out).toMatch(/accuracy/i);
  });
});

describe('--debug and FLOWGRPO_DEBUG=1 print the stack and the causes', () => {
  it('without them no stack; with either, the stack', async () => {
    const f = rowFixtures();
    const bad = f.file('run.json', '{"trainer": }');
    const plain = captureIO(f.dir, {});
    expect(await runCli(['train', '--config', bad], plain)).toBe(1);
    expect(plain.err).not.toMatch(/^\s+at /m);
    const flag = captureIO(f.dir, {});
    expect(await runCli(['train', '--debug', '--config', bad], flag)).toBe(1);
    expect(flag.err).toMatch(/^\[CONFIG_ERROR\] /);
    expect(flag.err).toMatch(/^\s+at /m);
    expect(flag.err).toContain('caused by:\nSyntaxError');
    const env = captureIO(f.dir, { FLOWGRPO_DEBUG: '1' });
    expect(await runCli(['train', '--config', bad], env)).toBe(1);
    expect(env.err).toMatch(/^\s+at /m);
  });
});

describe('the real bin', () => {
  const bin = (args: string[]) =>
    promisify(execFile)(
      process.execPath,
      [
        '--conditions=@flowgrpo/source',
        '--import',
        'tsx',
        join(ROOT, 'packages/cli/src/bin.ts'),
        ...args,
      ],
      // From the repository root, where tsx resolves; every path given is absolute.
      { cwd: ROOT, timeout: 60_000, env: { ...process.env, FLOWGRPO_DEBUG: '' } },
    ).then(
      () => ({ code: 0, stderr: '' }),
      (e: { code: number; stderr: string }) => e,
    );

  it.each([
    ['an unknown option to export', ['export', '--modle', 'x'], 'USAGE_ERROR', 2],
    ['an output_dir that is a file', ['train'], 'NOT_A_DIRECTORY', 1],
    ['a config that is a folder', ['train', '--config', tmp], 'IS_A_DIRECTORY', 1],
  ] as const)('%s', async (_name, args, code, exit) => {
    const f = rowFixtures();
    const argv =
      args[0] === 'train' && args.length === 1
        ? ['train', '--config', f.config({ output_dir: f.file('out', 'x') })]
        : [...args];
    const r = await bin(argv);
    expect(r.code, r.stderr).toBe(exit);
    expect(r.stderr).toMatch(new RegExp(`^\\[${code}\\] `, 'm'));
    expect(r.stderr).not.toMatch(/^\s+at /m);
    expect(r.stderr).not.toContain('node:internal');
  });
});

/** Mounts a tmpfs of `size` at a new folder; undefined (with the reason) where that is refused. */
function smallDisk(size: string): { dir: string; unmount: () => void } | { reason: string } {
  const dir = mkdtempSync(join(tmp, 'tmpfs-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', dir], { stdio: 'pipe' });
  } catch (e) {
    return { reason: `cannot mount a tmpfs here (${(e as Error).message.split('\n')[0]})` };
  }
  return { dir, unmount: () => execFileSync('umount', [dir]) };
}

describe('a full disk', () => {
  it('export onto a full disk is DISK_FULL naming the folder, no stack', async (ctx) => {
    const disk = smallDisk('16k');
    if ('reason' in disk) {
      console.log(`skipped: ${disk.reason}`);
      ctx.skip();
      return;
    }
    try {
      const io = captureIO(disk.dir, {});
      expect(
        await runCli(
          ['export', '--model', fixtures.model, '--out', join(disk.dir, 'artifacts')],
          io,
        ),
      ).toBe(1);
      expect(io.err).toMatch(/^\[DISK_FULL\] .*no space left/m);
      expect(io.err).toContain(join(disk.dir, 'artifacts'));
      expect(io.err).toMatch(/^fix: /m);
      expect(io.err).not.toMatch(/^\s+at /m);
      // The partial build this command started is not left behind.
      expect(existsSync(join(disk.dir, 'artifacts'))).toBe(false);
    } finally {
      disk.unmount();
    }
  });

  it('train with output_dir on a full disk is DISK_FULL naming the artifacts folder', async (ctx) => {
    const disk = smallDisk('16k');
    if ('reason' in disk) {
      console.log(`skipped: ${disk.reason}`);
      ctx.skip();
      return;
    }
    try {
      const f = rowFixtures();
      const io = captureIO(f.dir, {});
      const config = f.config({ output_dir: join(disk.dir, 'run') });
      expect(await runCli(['train', '--config', config], io)).toBe(1);
      expect(io.err).toMatch(/^\[DISK_FULL\] the artifacts folder: .*no space left/m);
      expect(io.err).toContain(join(disk.dir, 'run', 'artifacts'));
      expect(io.err).not.toMatch(/^\s+at /m);
    } finally {
      disk.unmount();
    }
  });
});
