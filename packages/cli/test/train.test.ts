import { spawn } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { readTrajectoriesParquet } from '@flowgrpo/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../src/main.js';
import { captureIO } from './support.js';
import { grpoConfig, sftConfig, tinyModel, writeConfig } from './train-fixtures.js';

// `flowgrpo train --config run.json` on a tiny Qwen2 HF folder, offline: SFT on TRL's dataset
// formats, GRPO with the tag agent and the exact-match reward, --resume, artifacts reused, the
// errors a user meets (unknown keys, missing files, bad values), and Ctrl-C through the real bin.

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../../..');
const tmp = mkdtempSync(join(tmpdir(), 'flowgrpo-cli-train-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
let model: string;
beforeAll(async () => {
  model = await tinyModel(join(tmp, 'tiny'));
});

function metrics(runDir: string): Record<string, number>[] {
  return readFileSync(join(runDir, 'metrics.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
}

const checkpointSteps = (runDir: string) =>
  readdirSync(runDir)
    .map((n) => /^checkpoint-(\d+)$/.exec(n)?.[1])
    .filter((s) => s !== undefined)
    .map(Number)
    .sort((a, b) => a - b);

describe('flowgrpo train: SFT', () => {
  it('trains on messages / prompt+completion / text rows, then --resume goes on', async () => {
    const dir = join(tmp, 'sft');
    mkdirSync(dir);
    const cfg = writeConfig(join(dir, 'run.json'), sftConfig(dir, model));
    const io = captureIO(dir);
    expect(await runCli(['train', '--config', cfg], io), io.err).toBe(0);
    const run = join(dir, 'run-sft');
    expect(io.err).toContain(`artifacts: building ${join(run, 'artifacts')}`);
    const m = metrics(run).filter((r) => r.loss !== undefined);
    expect(m.map((r) => r.step)).toEqual([1, 2]);
    expect(m.every((r) => Number.isFinite(r.loss) && r.loss > 0)).toBe(true);
    expect(m.at(-1)!.eval_loss).toBeGreaterThan(0); // eval_file given: evaluated at the end
    expect(checkpointSteps(run)).toEqual([2]);
    expect(existsSync(join(run, 'report.html'))).toBe(true);
    expect(io.out).toContain(`checkpoint: ${join(run, 'checkpoint-2')}`);
    // Non-interactive: one line per logged step on stderr.
    expect(io.err).toMatch(/^step 1: loss /m);

    // Two more steps from checkpoint-2 (--resume = resume_from_checkpoint: true), same artifacts.
    writeConfig(cfg, sftConfig(dir, model, { max_steps: 4 }));
    const again = captureIO(dir);
    expect(await runCli(['train', '--config', cfg, '--resume'], again), again.err).toBe(0);
    expect(again.err).toContain(`artifacts: reusing ${join(run, 'artifacts')}`);
    expect(
      metrics(run)
        .filter((r) => r.loss !== undefined)
        .map((r) => r.step),
    ).toEqual([1, 2, 3, 4]);
    const state = JSON.parse(readFileSync(join(run, 'checkpoint-4', 'trainer_state.json'), 'utf8'));
    expect(state.global_step).toBe(4);
  });
});

describe('flowgrpo train: one run per output_dir, HF rules (--resume / --overwrite)', () => {
  it('refuses a new run into a finished one before building anything; --overwrite replaces it; a lock refuses', async () => {
    const dir = join(tmp, 'rules');
    mkdirSync(dir);
    const cfg = writeConfig(join(dir, 'run.json'), sftConfig(dir, model));
    const run = join(dir, 'run-sft');
    const first = captureIO(dir);
    expect(await runCli(['train', '--config', cfg], first), first.err).toBe(0);
    const finishedState = readFileSync(join(run, 'checkpoint-2', 'trainer_state.json'), 'utf8');
    rmSync(join(run, 'artifacts'), { recursive: true }); // so that a build would show

    // Again without a flag: refused, nothing built, the finished run as it was.
    const again = captureIO(dir);
    expect(await runCli(['train', '--config', cfg], again)).toBe(1);
    expect(again.err).toContain('[CONFIG_ERROR]');
    expect(again.err).toContain('resume_from_checkpoint');
    expect(again.err).toContain('overwrite_output_dir');
    expect(again.err).not.toContain('artifacts: building');
    expect(again.err).not.toMatch(/\n\s+at /); // no stack trace
    expect(existsSync(join(run, 'artifacts'))).toBe(false);
    expect(readFileSync(join(run, 'checkpoint-2', 'trainer_state.json'), 'utf8')).toBe(
      finishedState,
    );

    // --resume with --overwrite contradicts itself.
    const both = captureIO(dir);
    expect(await runCli(['train', '--config', cfg, '--resume', '--overwrite'], both)).toBe(1);
    expect(both.err).toContain('[CONFIG_ERROR]');

    // Another live run holds the folder: refused at once, its lock left alone.
    const lock = join(run, '.flowgrpo.lock');
    const holder = {
      pid: process.pid,
      host: hostname(),
      started_at: '2026-01-01T00:00:00.000Z',
      trainer: 'sft',
      command: 'flowgrpo train --config other.json',
    };
    writeFileSync(lock, JSON.stringify(holder));
    const locked = captureIO(dir);
    expect(await runCli(['train', '--config', cfg, '--overwrite'], locked)).toBe(1);
    expect(locked.err).toContain('[RUN_LOCKED]');
    expect(locked.err).toContain(`pid ${process.pid}`);
    expect(JSON.parse(readFileSync(lock, 'utf8'))).toEqual(holder);
    rmSync(lock);

    // --overwrite: a new run of 1 step replaces the finished run of 2.
    writeConfig(cfg, sftConfig(dir, model, { max_steps: 1 }));
    const over = captureIO(dir);
    expect(await runCli(['train', '--config', cfg, '--overwrite'], over), over.err).toBe(0);
    expect(checkpointSteps(run)).toEqual([1]);
    expect(
      metrics(run)
        .filter((r) => r.loss !== undefined)
        .map((r) => r.step),
    ).toEqual([1]);
    expect(readdirSync(run).filter((n) => n.startsWith('.flowgrpo'))).toEqual([]);
  });
});

describe('flowgrpo train: SFT with use_peft: false', () => {
  it('fine-tunes every weight of the HF folder: no artifacts, HF model folders as checkpoints', async () => {
    const dir = join(tmp, 'sft-full');
    mkdirSync(dir);
    const cfg = writeConfig(join(dir, 'run.json'), sftConfig(dir, model, { use_peft: false }));
    const io = captureIO(dir);
    expect(await runCli(['train', '--config', cfg], io), io.err).toBe(0);
    const run = join(dir, 'run-sft');
    expect(io.err).not.toContain('artifacts:');
    expect(existsSync(join(run, 'artifacts'))).toBe(false);
    const m = metrics(run).filter((r) => r.loss !== undefined);
    expect(m.map((r) => r.step)).toEqual([1, 2]);
    expect(m.every((r) => Number.isFinite(r.loss) && r.loss > 0)).toBe(true);
    for (const f of ['config.json', 'model.safetensors', 'tokenizer.json'])
      expect(existsSync(join(run, 'checkpoint-2', f)), f).toBe(true);

    // An artifacts directory holds no trainable HF model: a clear error, exit 1.
    const art = join(dir, 'artifacts');
    mkdirSync(art);
    writeFileSync(join(art, 'artifacts.json'), '{}');
    writeConfig(cfg, sftConfig(dir, art, { use_peft: false, tokenizer: model }));
    const bad = captureIO(dir);
    expect(await runCli(['train', '--config', cfg], bad)).toBe(1);
    expect(bad.err).toContain('use_peft: false fine-tunes every weight of a HF model folder');
  });
});

describe('flowgrpo train: GRPO', () => {
  it('trains the tag agent with the exact-match reward: metrics, rollouts, checkpoint, report', async () => {
    const dir = join(tmp, 'grpo');
    mkdirSync(dir);
    const cfg = writeConfig(join(dir, 'run.json'), grpoConfig(dir, model));
    const io = captureIO(dir);
    expect(await runCli(['train', '--config', cfg, '--device', 'cpu'], io), io.err).toBe(0);
    const run = join(dir, 'run-grpo');
    const m = metrics(run);
    expect(m.map((r) => r.step)).toEqual([1, 2]);
    for (const r of m) {
      // TRL's metric names; the reward of exact match is 0 or 1 per rollout.
      expect(Number.isFinite(r.loss)).toBe(true);
      expect(r.reward).toBeGreaterThanOrEqual(0);
      expect(r.reward).toBeLessThanOrEqual(1);
      expect(r.learning_rate).toBe(1e-3);
    }
    // queries_per_step 2 × num_generations 2 rollouts per step, each sampled token recorded.
    const rollouts = await readTrajectoriesParquet(join(run, 'rollouts', 'step-000002.parquet'));
    expect(rollouts).toHaveLength(4);
    expect(checkpointSteps(run)).toEqual([2]);
    expect(existsSync(join(run, 'report.html'))).toBe(true);
    const saved = JSON.parse(readFileSync(join(run, 'config.json'), 'utf8'));
    expect(saved).toMatchObject({ trainer: 'grpo', num_generations: 2, max_steps: 2 });
  });

  it('load_best_model_at_end: evaluates eval_file every eval_steps and prints the best checkpoint', async () => {
    const dir = join(tmp, 'grpo-best');
    mkdirSync(dir);
    const cfg = writeConfig(
      join(dir, 'run.json'),
      grpoConfig(dir, model, {
        eval_file: join(dir, 'train-rows.jsonl'),
        eval_steps: 1,
        load_best_model_at_end: true,
        save_total_limit: 1,
      }),
    );
    const io = captureIO(dir);
    expect(await runCli(['train', '--config', cfg, '--device', 'cpu'], io), io.err).toBe(0);
    const run = join(dir, 'run-grpo');
    // The evaluations at steps 1 and 2 (the final one), from metrics.jsonl: the first best wins.
    const evals = metrics(run).filter((r) => 'eval/accuracy' in r);
    expect(evals.map((r) => r.step)).toEqual([1, 2]);
    const best = evals[1]!['eval/accuracy']! > evals[0]!['eval/accuracy']! ? evals[1]! : evals[0]!;
    const line = `best checkpoint: ${join(run, `checkpoint-${best.step}`)} (eval/accuracy ${best['eval/accuracy']!.toFixed(4)})`;
    expect(io.out).toContain(line);
    // save_total_limit 1 keeps the last checkpoint, and the best beside it.
    expect(checkpointSteps(run)).toEqual([...new Set([best.step!, 2])]);
  });
});

describe('flowgrpo train: errors', () => {
  const dir = join(tmp, 'errors');
  beforeAll(() => mkdirSync(dir, { recursive: true }));

  async function fails(config: Record<string, unknown> | undefined, argv: string[] = []) {
    const cfg = join(dir, 'bad.json');
    if (config) writeConfig(cfg, config);
    const io = captureIO(dir, {});
    const code = await runCli(['train', ...(argv.length ? argv : ['--config', cfg])], io);
    return { code, err: io.err };
  }

  it('an unknown trainer key is a ConfigError naming it', async () => {
    const r = await fails(grpoConfig(dir, model, { learning_rat: 1e-5 }));
    expect(r.code).toBe(1);
    expect(r.err).toContain("unknown key 'learning_rat'");
    expect(r.err).toContain('[CONFIG_ERROR]');
  });

  it('an unknown key inside agent, a bad value, a missing trainer key are named', async () => {
    const nested = await fails(
      grpoConfig(dir, model, { agent: { type: 'tag', tools: [], colour: 'red' } }),
    );
    expect(nested.err).toMatch(/agent: unknown key 'colour'/);
    const value = await fails(grpoConfig(dir, model, { num_generations: 1 }));
    expect(value.code).toBe(1);
    expect(value.err).toMatch(/num_generations: .*2/);
    const tool = await fails(grpoConfig(dir, model, { agent: { type: 'tag', tools: ['abacus'] } }));
    expect(tool.err).toContain("unknown tool 'abacus'");
    const { trainer: _, ...noTrainer } = grpoConfig(dir, model);
    const missing = await fails(noTrainer);
    expect(missing.err).toMatch(/trainer: must be 'sft' or 'grpo' \(missing\)/);
    // A GRPO key in an SFT config is an unknown key of the SFT trainer.
    const sft = await fails(sftConfig(dir, model, { reward: 'exact_match' }));
    expect(sft.err).toContain("unknown key 'reward'");
  });

  it('missing files are FILE_NOT_FOUND errors naming the path', async () => {
    const train = await fails(grpoConfig(dir, model, { train_file: 'nowhere.jsonl' }));
    expect(train.code).toBe(1);
    expect(train.err).toContain(
      `[FILE_NOT_FOUND] train_file: file not found: ${join(dir, 'nowhere.jsonl')}`,
    );
    const mdl = await fails(grpoConfig(dir, join(dir, 'no-model')));
    expect(mdl.err).toContain(`file not found: ${join(dir, 'no-model')}`);
    const cfg = await fails(undefined, ['--config', 'missing.json']);
    expect(cfg.err).toContain(`file not found: ${join(dir, 'missing.json')}`);
  });

  it('an api_key_env that is not set, usage mistakes', async () => {
    const key = await fails(
      grpoConfig(dir, model, {
        agent: {
          type: 'flow',
          engine: { base_url: 'http://127.0.0.1:9/v1', model: 'm', api_key_env: 'NO_SUCH_KEY' },
        },
      }),
    );
    expect(key.err).toContain('$NO_SUCH_KEY');
    expect((await fails(undefined, ['--device', 'cpu'])).code).toBe(2); // no --config
    const device = await fails(undefined, ['--config', 'x.json', '--device', 'tpu']);
    expect(device.code).toBe(2);
    expect(device.err).toContain("--device must be cpu, auto, cuda, webgpu, got 'tpu'");
  });
});

describe('flowgrpo train: Ctrl-C (real bin)', () => {
  it('SIGINT finishes the step, writes a checkpoint of it, exits 130; --resume goes on', async () => {
    const dir = join(tmp, 'sigint');
    mkdirSync(dir);
    const cfg = writeConfig(
      join(dir, 'run.json'),
      grpoConfig(dir, model, { max_steps: 10_000, save_steps: 0 }),
    );
    const run = join(dir, 'run-grpo');
    const child = spawn(
      process.execPath,
      [
        '--conditions=@flowgrpo/source',
        '--import',
        'tsx',
        'packages/cli/src/bin.ts',
        'train',
      ].concat(['--config', cfg]),
      { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let stdout = '';
    let stderr = '';
    let sent = false;
    child.stdout.on('data', (d) => {
      stdout += d;
    });
    child.stderr.on('data', (d) => {
      stderr += d;
      // Interrupt once the first step has been logged (training is then well under way).
      if (!sent && /^step 1: /m.test(stderr)) {
        sent = true;
        child.kill('SIGINT');
      }
    });
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    expect(sent, stderr).toBe(true);
    expect(code, stderr).toBe(130);
    expect(stderr).toContain('SIGINT: finishing the current step');
    // The checkpoint is of the last finished step, which is the last step in metrics.jsonl.
    const steps = checkpointSteps(run);
    expect(steps).toHaveLength(1);
    const last = metrics(run).at(-1)!.step;
    expect(steps[0]).toBe(last);
    expect(stdout).toContain(`checkpoint: ${join(run, `checkpoint-${last}`)}`);

    // --resume continues from it to a new max_steps.
    writeConfig(cfg, grpoConfig(dir, model, { max_steps: last + 1 }));
    const io = captureIO(dir);
    expect(await runCli(['train', '--config', cfg, '--resume'], io), io.err).toBe(0);
    expect(metrics(run).at(-1)!.step).toBe(last + 1);
    expect(checkpointSteps(run)).toEqual([last, last + 1]);
  });
});

describe('flowgrpo --help, flowgrpo train --help', () => {
  it('lists train, eval and export', async () => {
    const io = captureIO(tmp);
    expect(await runCli(['--help'], io)).toBe(0);
    for (const c of ['train', 'eval', 'export'])
      expect(io.out).toMatch(new RegExp(`^  ${c} `, 'm'));
  });

  it('documents the run config keys', async () => {
    const io = captureIO(tmp);
    expect(await runCli(['train', '--help'], io)).toBe(0);
    for (const k of ['"trainer"', '"model"', '"train_file"', '"agent"', '"reward"', '--resume'])
      expect(io.out).toContain(k);
  });
});
