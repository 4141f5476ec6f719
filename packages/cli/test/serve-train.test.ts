import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { runCli } from '../src/main.js';
import { captureIO } from './support.js';
import { tinyModel } from './train-fixtures.js';

// `flowgrpo serve --train`: an agent of its own (here plain fetch; any OpenAI-compatible client
// works the same) runs episodes against the gateway and posts a reward per episode with its task
// as group_id; the gateway trains the served `policy` adapter from those rewards. The reward is
// the share of letters in the reply, which an untrained tiny model earns only by chance: the
// held-out reward (greedy, on tasks never trained on) goes up. Measured here: 0.000 before (the
// greedy reply has no letters), 1.000 after 12 updates; asserted: strictly higher.

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../../..');
const tmp = mkdtempSync(join(tmpdir(), 'flowgrpo-cli-serve-train-'));
let model: string;
let child: ChildProcess | undefined;
beforeAll(async () => {
  model = await tinyModel(join(tmp, 'tiny'));
});
afterAll(() => {
  if (child && child.exitCode === null) child.kill('SIGKILL');
  rmSync(tmp, { recursive: true, force: true });
});

it('trains the served adapter from posted rewards; the held-out reward goes up', async () => {
  const G = 8;
  const Q = 4;
  const STEPS = 12;
  const config = join(tmp, 'run.json');
  writeFileSync(
    config,
    JSON.stringify({
      output_dir: 'run',
      num_generations: G,
      queries_per_step: Q,
      max_steps: STEPS,
      learning_rate: 0.05,
      beta: 0,
      lora: { r: 8, lora_alpha: 16, target_modules: ['q_proj', 'v_proj', 'o_proj', 'up_proj'] },
    }),
  );
  child = spawn(
    process.execPath,
    [
      '--conditions=@flowgrpo/source',
      '--import',
      'tsx',
      'packages/cli/src/bin.ts',
      'serve',
      '--model',
      model,
      '--port',
      '0',
      '--train',
      config,
    ],
    { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let stdout = '';
  let stderr = '';
  child.stderr!.on('data', (d) => {
    stderr += d;
  });
  const baseURL = await new Promise<string>((resolve, reject) => {
    child!.stdout!.on('data', (d) => {
      stdout += d;
      const m = /listening on (http:\/\/\S+\/v1)/.exec(stdout);
      if (m) resolve(m[1]!);
    });
    child!.on('exit', (code) => reject(new Error(`exited ${code}: ${stderr}`)));
  });
  expect(stdout).toContain('models: tiny, policy');

  const reply = async (
    task: string,
    o: { rollout?: string; seed: number; temperature?: number },
  ) => {
    const r = await fetch(`${baseURL}/chat/completions`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        ...(o.rollout && { 'x-flowgrpo-rollout-id': o.rollout }),
      },
      body: JSON.stringify({
        model: 'policy',
        messages: [{ role: 'user', content: task }],
        max_tokens: 8,
        seed: o.seed,
        ...(o.temperature !== undefined && { temperature: o.temperature }),
      }),
    });
    return ((await r.json()) as { choices: { message: { content: string } }[] }).choices[0]!.message
      .content;
  };
  const score = (text: string) =>
    text.length === 0 ? 0 : [...text].filter((c) => /[a-z]/i.test(c)).length / text.length;
  const heldOut = Array.from({ length: 8 }, (_, i) => `Describe item ${100 + i}.`);
  const evaluate = async () => {
    const rs = await Promise.all(heldOut.map((t, i) => reply(t, { seed: i, temperature: 0 })));
    return rs.reduce((s, t) => s + score(t), 0) / rs.length;
  };

  const before = await evaluate();
  let n = 0;
  for (let step = 0; step < STEPS; step++) {
    for (let q = 0; q < Q; q++) {
      const task = `Describe item ${step * Q + q}.`;
      await Promise.all(
        Array.from({ length: G }, async (_, g) => {
          const id = `s${step}-q${q}-g${g}`;
          const text = await reply(task, { rollout: id, seed: n * 1000 + g });
          await fetch(`${baseURL}/rollouts/${id}/reward`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ reward: score(text), group_id: task }),
          });
        }),
      );
      n++;
    }
    // Wait for the update before the next step (the metrics line says it is done).
    while (!new RegExp(`^step ${step + 1}:`, 'm').test(stderr))
      await new Promise((r) => setTimeout(r, 20));
  }
  while (!stderr.includes('training done')) await new Promise((r) => setTimeout(r, 20));
  const after = await evaluate();
  console.log(`held-out reward: before ${before.toFixed(3)}, after ${after.toFixed(3)}`);
  expect(after).toBeGreaterThan(before);

  const metrics = readFileSync(join(tmp, 'run', 'metrics.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, number>);
  expect(metrics).toHaveLength(STEPS);
  // Every rollout was sampled by the adapter it was trained from: token-exact.
  for (const m of metrics) expect(m['policy/logprob_mismatch/max']).toBeLessThanOrEqual(1e-4);
  // GRPOTrainer's record, the role's under policy/: every alarm is judged for the role.
  for (const m of metrics)
    for (const k of [
      'frac_reward_zero_std',
      'policy/entropy',
      'policy/clip_ratio/region_mean',
      'policy/completions/mean_length',
      'policy/alarms/entropy_collapse',
      'policy/alarms/clip_ratio_spike',
      'policy/alarms/length_blowup',
      'policy/alarms/zero_variance_groups',
    ])
      expect(m[k], k).toBeTypeOf('number');

  child.kill('SIGTERM');
  expect(await new Promise((r) => child!.on('exit', r))).toBe(0);
  expect(existsSync(join(tmp, 'run', 'adapters', 'policy', 'adapter_config.json'))).toBe(true);
  // The run ended at max_steps with its checkpoint (a folder per trained role).
  expect(existsSync(join(tmp, 'run', 'checkpoint-12', 'policy', 'optimizer.safetensors'))).toBe(
    true,
  );

  // A fresh run into it is refused before anything is built (HF's rule), naming --resume.
  const io = captureIO(tmp);
  expect(await runCli(['serve', '--model', model, '--port', '0', '--train', config], io)).toBe(1);
  expect(io.err).toMatch(/\[CONFIG_ERROR\] .*already holds a run's checkpoints \(checkpoint-12\)/);
  expect(io.err).toContain('--resume');
}, 180_000);
