import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { deviceAvailability, softwareVulkanAdapter } from '@flowgrpo/models';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../src/main.js';
import { PreflightError, preflight, trainPlan } from '../src/preflight.js';
import { loadRunConfig } from '../src/run-config.js';
import { captureIO } from './support.js';
import {
  grpoConfig,
  questionRows,
  sftConfig,
  tinyModel,
  writeConfig,
  writeJsonl,
} from './train-fixtures.js';

// Preflight of `flowgrpo train` and `flowgrpo eval` with real files on a tiny Qwen2: every problem
// reported at once (each with its code and fix), before anything is built or written — the
// artifacts folder and output_dir never appear when preflight fails. The motivating case: GSM8K
// on a model with too few positions, where every rollout used to fail silently mid-run.

const tmp = mkdtempSync(join(tmpdir(), 'flowgrpo-cli-preflight-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
let model: string;
beforeAll(async () => {
  model = await tinyModel(join(tmp, 'tiny'));
});

const cuda = await deviceAvailability('cuda');

/** `flowgrpo train` on `config` in a fresh folder: exit code, stderr, the run's output_dir. */
async function train(name: string, config: (dir: string) => Record<string, unknown>) {
  const dir = join(tmp, name);
  mkdirSync(dir);
  const c = config(dir);
  const io = captureIO(dir);
  const code = await runCli(['train', '--config', writeConfig(join(dir, 'run.json'), c)], io);
  return { code, err: io.err, out: c.output_dir as string };
}

/** A GSM8K-layout row whose question is `chars` characters (the byte-level tokenizer: tokens). */
const gsm8kRow = (chars: number, i = 0) => ({
  question:
    `Row ${i}: ${'Natalia sold clips to her friends in April. '.repeat(chars / 44 + 1)}`.slice(
      0,
      chars,
    ),
  answer: `She sold 48 clips.\n#### ${48 + i}`,
});

describe('flowgrpo train: preflight', () => {
  it('reports every problem at once, and nothing is built or written', async () => {
    const r = await train('many', (dir) =>
      grpoConfig(dir, model, {
        train_file: 'nowhere.jsonl',
        // Row 1 lacks its question: the row and the field are named.
        eval_file: writeJsonl(join(dir, 'eval.jsonl'), [
          questionRows(1)[0],
          { ...questionRows(2)[1], question: undefined },
        ]),
        tokenizer: join(dir, 'no-tokenizer'),
        ...(!cuda.available && { device: 'cuda' }),
      }),
    );
    expect(r.code).toBe(1);
    expect(r.err).toContain('[PREFLIGHT_FAILED]');
    expect(r.err).toContain(
      `[FILE_NOT_FOUND] train_file: file not found: ${join(tmp, 'many', 'nowhere.jsonl')}`,
    );
    expect(r.err).toContain('fix: check the data file');
    // The second row is the file's line 2 (JSONL rows are named by line, as editors number them).
    expect(r.err).toMatch(/\[DATA_FORMAT_ERROR\] eval_file: .*eval\.jsonl:line 2: .*question/);
    expect(r.err).toContain(
      `[FILE_NOT_FOUND] tokenizer: file not found: ${join(tmp, 'many', 'no-tokenizer')}`,
    );
    if (!cuda.available) {
      expect(r.err).toContain(
        '[EXECUTION_PROVIDER_UNAVAILABLE] device: the cuda execution provider',
      );
      expect(r.err).toContain('ONNXRUNTIME_NODE_INSTALL=cuda12');
    }
    expect(r.err).toMatch(/\d+ problems found before anything was built or written/);
    expect(r.err).not.toContain('artifacts: building');
    expect(existsSync(r.out)).toBe(false); // not even output_dir: nothing was written
  });

  it('a file where output_dir or a data folder belongs, a folder where a file belongs', async () => {
    const r = await train('shapes', (dir) => {
      writeFileSync(join(dir, 'out'), 'a file the user had');
      mkdirSync(join(dir, 'rows'));
      return grpoConfig(dir, model, { output_dir: join(dir, 'out', 'run'), train_file: 'rows' });
    });
    expect(r.code).toBe(1);
    expect(r.err).toContain(
      `[NOT_A_DIRECTORY] output_dir: ${join(tmp, 'shapes', 'out')} is a file`,
    );
    expect(r.err).toContain(
      `[IS_A_DIRECTORY] train_file: ${join(tmp, 'shapes', 'rows')} is a folder`,
    );
    expect(existsSync(join(tmp, 'shapes', 'out'))).toBe(true); // the user's file is untouched
  });

  it("GSM8K prompts longer than the model's positions: CONTEXT_LENGTH_EXCEEDED before any build", async () => {
    const r = await train('gsm8k', (dir) =>
      grpoConfig(dir, model, {
        data_format: 'gsm8k',
        train_file: writeJsonl(join(dir, 'gsm8k.jsonl'), [
          gsm8kRow(900, 0),
          gsm8kRow(100, 1),
          gsm8kRow(1100, 2),
        ]),
        max_positions: 1024,
        max_completion_length: 32,
      }),
    );
    expect(r.code).toBe(1);
    expect(r.err).toMatch(
      /\[CONTEXT_LENGTH_EXCEEDED\] train_file line 1: the agent's first prompt \((\d+) tokens\) \+ 32 new tokens exceeds the 1024 positions the graphs support \(2 of the first 3 rows do not fit; the longest, line 3, is \d+ tokens\)/,
    );
    expect(Number(/first prompt \((\d+) tokens\)/.exec(r.err)![1])).toBeGreaterThan(900);
    expect(r.err).toMatch(
      /fix: raise max_positions above 1024 .*shorten the prompt.*max_completion_length/,
    );
    expect(existsSync(join(r.out, 'artifacts'))).toBe(false);
    expect(existsSync(r.out)).toBe(false);
  });

  it('a config that passes resolves the device and says which and why', async () => {
    const dir = join(tmp, 'ok');
    mkdirSync(dir);
    const cfg = writeConfig(join(dir, 'run.json'), grpoConfig(dir, model, { device: 'auto' }));
    const rc = loadRunConfig(cfg, dir);
    const io = captureIO(dir);
    const { device } = await preflight(trainPlan(rc, 'auto'), io);
    const gpu = (await deviceAvailability('webgpu')).available && !softwareVulkanAdapter();
    expect(device).toBe(cuda.available ? 'cuda' : gpu ? 'webgpu' : 'cpu');
    expect(io.err).toMatch(new RegExp(`^device: ${device} \\(auto: `));
    // A software Vulkan driver (lavapipe in CI) is never auto's choice, and the line says so.
    if (!cuda.available && softwareVulkanAdapter())
      expect(io.err).toContain('which auto never picks (device "webgpu" uses it)');
    expect(existsSync(rc.config.output_dir)).toBe(false);
  });

  it('prints the device line only when a device was asked for', async () => {
    // The default (no "device", no --device) is the CPU: announcing it as "(asked for)" was
    // untrue and told the user nothing. Asked for, the line says so — and that is now true.
    const dir = join(tmp, 'device-line');
    mkdirSync(dir);
    const rc = loadRunConfig(writeConfig(join(dir, 'run.json'), grpoConfig(dir, model)), dir);
    const quiet = captureIO(dir);
    expect((await preflight(trainPlan(rc, rc.run.device), quiet)).device).toBe('cpu');
    expect(rc.run.device).toBeUndefined();
    expect(quiet.err).not.toMatch(/^device:/m);
    const asked = captureIO(dir);
    expect((await preflight(trainPlan(rc, 'cpu'), asked)).device).toBe('cpu');
    expect(asked.err).toMatch(/^device: cpu \(asked for\)$/m);
  });

  it.skipIf(cuda.available)(
    'a finished run survives a re-run on a device the machine lacks (nothing is removed)',
    async () => {
      const dir = join(tmp, 'finished');
      mkdirSync(dir);
      const cfg = writeConfig(join(dir, 'run.json'), grpoConfig(dir, model, { max_steps: 1 }));
      const first = captureIO(dir);
      expect(await runCli(['train', '--config', cfg], first), first.err).toBe(0);
      const run = join(dir, 'run-grpo');
      const before = readdirSync(run).sort();
      const metrics = readFileSync(join(run, 'metrics.jsonl'), 'utf8');
      expect(before).toContain('checkpoint-1');

      const again = captureIO(dir);
      expect(await runCli(['train', '--config', cfg, '--device', 'cuda'], again)).toBe(1);
      expect(again.err).toContain('[EXECUTION_PROVIDER_UNAVAILABLE] device:');
      expect(again.err).not.toContain('removed');
      expect(readdirSync(run).sort()).toEqual(before);
      expect(readFileSync(join(run, 'metrics.jsonl'), 'utf8')).toBe(metrics);
    },
  );

  it("the flow agent's planner prompt is rendered without calling its engine", async () => {
    // Nothing listens on port 9: a request to the engine would fail, not pass silently.
    const r = await train('flow', (dir) =>
      grpoConfig(dir, model, {
        agent: {
          type: 'flow',
          tools: ['calculator'],
          engine: { base_url: 'http://127.0.0.1:9/v1', model: 'fixed-roles' },
        },
        max_positions: 300,
        max_completion_length: 64,
      }),
    );
    expect(r.code).toBe(1);
    expect(r.err).toMatch(
      /\[CONTEXT_LENGTH_EXCEEDED\] train_file line 1: the agent's first prompt \((\d+) tokens\) \+ 64 new tokens exceeds the 300 positions/,
    );
    // The planner prompt holds the question and the calculator's description.
    expect(Number(/first prompt \((\d+) tokens\)/.exec(r.err)![1])).toBeGreaterThan(300);
    expect(existsSync(r.out)).toBe(false);
  });

  it("another model's tokenizer: TOKEN_OUT_OF_VOCABULARY before any rollout", async () => {
    const r = await train('vocab', (dir) => {
      // The tiny model's tokenizer with <|im_start|> at an id past the model's 259 embeddings,
      // as a larger model's tokenizer would have it.
      const tok = join(dir, 'other-tokenizer');
      mkdirSync(tok);
      const json = JSON.parse(readFileSync(join(model, 'tokenizer.json'), 'utf8'));
      for (const t of json.added_tokens) if (t.content === '<|im_start|>') t.id = 9000;
      if (json.model.vocab['<|im_start|>'] !== undefined) json.model.vocab['<|im_start|>'] = 9000;
      writeFileSync(join(tok, 'tokenizer.json'), JSON.stringify(json));
      copyFileSync(join(model, 'tokenizer_config.json'), join(tok, 'tokenizer_config.json'));
      return grpoConfig(dir, model, { tokenizer: tok });
    });
    expect(r.code).toBe(1);
    expect(r.err).toContain(
      "[TOKEN_OUT_OF_VOCABULARY] train_file line 1: the agent's first prompt has token id 9000 outside [0, 259)",
    );
    expect(r.err).toContain("fix: use the model's own tokenizer");
    expect(existsSync(r.out)).toBe(false);
  });

  it('one problem: its own fix is the hint', async () => {
    const dir = join(tmp, 'one');
    mkdirSync(dir);
    const cfg = writeConfig(join(dir, 'run.json'), grpoConfig(dir, model, { max_positions: 40 }));
    const e = await preflight(trainPlan(loadRunConfig(cfg, dir), 'cpu'), captureIO(dir)).catch(
      (x: unknown) => x,
    );
    expect(PreflightError.isInstance(e)).toBe(true);
    const err = e as PreflightError;
    expect(err.problems.map((p) => p.code)).toEqual(['CONTEXT_LENGTH_EXCEEDED']);
    expect(err.hint).toBe(err.problems[0]!.hint);
  });
});

describe('flowgrpo train: SFT preflight', () => {
  it('an example longer than the positions, and a bad row of another file, at once', async () => {
    const r = await train('sft', (dir) =>
      sftConfig(dir, model, {
        max_positions: 64,
        max_length: 256,
        train_file: writeJsonl(join(dir, 'long.jsonl'), [
          { text: 'short' },
          { prompt: 'Q: '.padEnd(150, 'x'), completion: ' y' },
        ]),
        eval_file: writeJsonl(join(dir, 'bad.jsonl'), [{ text: 'ok' }, { messages: 'hi' }]),
      }),
    );
    expect(r.code).toBe(1);
    expect(r.err).toMatch(
      /\[CONTEXT_LENGTH_EXCEEDED\] train_file line 2: \d+ tokens \(max_length 256\) exceed the 64 positions the graphs support/,
    );
    expect(r.err).toContain('fix: set max_length to at most 64, or raise max_positions');
    expect(r.err).toMatch(
      /\[DATA_FORMAT_ERROR\] eval_file: .*bad\.jsonl:line 2: columns messages \(SFT rows need/,
    );
    expect(existsSync(r.out)).toBe(false);
  });
});

describe('flowgrpo train: memory preflight', () => {
  it('--dry-run prints the estimated peak, term by term', async () => {
    const dir = join(tmp, 'memory-dry');
    mkdirSync(dir);
    const cfg = writeConfig(join(dir, 'run.json'), grpoConfig(dir, model));
    const io = captureIO(dir);
    expect(await runCli(['train', '--config', cfg, '--dry-run'], io), io.err).toBe(0);
    expect(io.err).toMatch(/^estimated peak memory: \d+ MiB$/m);
    for (const term of ['runtime', 'train_step weights', 'sampling weights', 'KV cache'])
      expect(io.err).toMatch(new RegExp(`^  ${term}: \\d+ MiB \\(`, 'm'));
    expect(existsSync(join(dir, 'run-grpo'))).toBe(false);
  });

  it('a batch that cannot fit is refused before anything is built or written, unless skip_memory_check', async () => {
    // 100,000 rows of 2,048 tokens in one micro-batch: terabytes of activations on any machine.
    const huge = { max_length: 2048, per_device_train_batch_size: 100000 };
    const r = await train('memory-huge', (dir) =>
      sftConfig(dir, model, { ...huge, max_tokens_per_microbatch: 1e9 }),
    );
    expect(r.code).toBe(1);
    expect(r.err).toMatch(
      /\[INSUFFICIENT_MEMORY\] memory: the run needs about [\d.]+ GiB of memory at its peak \(activations [\d.]+ GiB, .*\), more than the [\d.]+ (GiB|MiB) available/,
    );
    expect(r.err).toMatch(/lower max_tokens_per_microbatch \(1000000000; \d+ fits: /);
    expect(r.err).toContain('skip_memory_check: true');
    expect(existsSync(r.out)).toBe(false);

    const dir = join(tmp, 'memory-skip');
    mkdirSync(dir);
    const cfg = writeConfig(
      join(dir, 'run.json'),
      sftConfig(dir, model, { ...huge, max_tokens_per_microbatch: 1e9, skip_memory_check: true }),
    );
    const io = captureIO(dir);
    expect(await runCli(['train', '--config', cfg, '--dry-run'], io), io.err).toBe(0);
    expect(io.err).not.toContain('estimated peak memory');
  });

  it('share_frozen_weights with full fine-tuning: refused by --dry-run, naming the key', async () => {
    const dir = join(tmp, 'shared-full');
    mkdirSync(dir);
    const cfg = writeConfig(
      join(dir, 'run.json'),
      sftConfig(dir, model, { use_peft: false, share_frozen_weights: true }),
    );
    const io = captureIO(dir);
    expect(await runCli(['train', '--config', cfg, '--dry-run'], io)).toBe(1);
    expect(io.err).toMatch(
      /^\[CONFIG_ERROR\] .*run\.json: SFT config: share_frozen_weights: nothing to share under use_peft: false/m,
    );
    expect(io.err).toMatch(/^fix: remove share_frozen_weights, or train a LoRA adapter/m);
  });
});

describe('flowgrpo eval: preflight', () => {
  it('a missing data file and a prompt that does not fit, at once, before any graph is built', async () => {
    const dir = join(tmp, 'eval');
    mkdirSync(dir);
    const io = captureIO(dir);
    const code = await runCli(
      ['eval', '--model', model, '--data', 'none.jsonl', '--agent', 'tag', '--max-tokens', '4000'],
      io,
    );
    expect(code).toBe(1);
    expect(io.err).toContain(`[FILE_NOT_FOUND] --data: file not found: ${join(dir, 'none.jsonl')}`);

    writeJsonl(join(dir, 'rows.jsonl'), questionRows(2));
    const long = captureIO(dir);
    expect(
      await runCli(
        [
          'eval',
          '--model',
          model,
          '--data',
          'rows.jsonl',
          '--agent',
          'tag',
          '--max-tokens',
          '4000',
        ],
        long,
      ),
    ).toBe(1);
    // The tiny model has 2048 positions: no prompt leaves room for 4000 new tokens.
    expect(long.err).toMatch(
      /\[CONTEXT_LENGTH_EXCEEDED\] --data line 1: the agent's first prompt \(\d+ tokens\) \+ 4000 new tokens exceeds the 2048 positions/,
    );
  });

  it('--out in a folder that does not exist is reported before the evaluation, not after it', async () => {
    const dir = join(tmp, 'eval-out');
    mkdirSync(dir);
    writeJsonl(join(dir, 'rows.jsonl'), questionRows(2));
    const io = captureIO(dir);
    const argv = ['eval', '--model', model, '--data', 'rows.jsonl', '--agent', 'tag'];
    expect(await runCli([...argv, '--out', 'no-such-folder/results.json'], io)).toBe(1);
    expect(io.err).toContain(
      `[FILE_NOT_FOUND] --out: the folder ${join(dir, 'no-such-folder')} does not exist`,
    );
    expect(io.out).toBe(''); // nothing was evaluated
    const folder = captureIO(dir);
    expect(await runCli([...argv, '--out', '.'], folder)).toBe(1);
    expect(folder.err).toContain(
      `[IS_A_DIRECTORY] --out: ${dir} is a folder, where a file belongs`,
    );
    // A link at --out (to the user's data, say) is refused before the evaluation; the data stays.
    symlinkSync(join(dir, 'rows.jsonl'), join(dir, 'results.json'));
    const linked = captureIO(dir);
    expect(await runCli([...argv, '--out', 'results.json'], linked)).toBe(1);
    expect(linked.err).toContain(
      `[SYMLINK_REFUSED] ${join(dir, 'results.json')} is a symbolic link (→ ${join(dir, 'rows.jsonl')})`,
    );
    expect(linked.out).toBe('');
    expect(readFileSync(join(dir, 'rows.jsonl'), 'utf8').split('\n')).toHaveLength(3);
  });
});
