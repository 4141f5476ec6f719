import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { trajectoryFromJson } from '@flowgrpo/core';
import { initLoraParams, loadDecoderModel, saveLoraAdapter } from '@flowgrpo/models';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../src/main.js';
import { captureIO } from './support.js';
import { tinyModel } from './train-fixtures.js';

// `flowgrpo serve` through the real bin, as a user runs it: a tiny Qwen2 HF folder with a LoRA
// adapter served by name, an API key from FLOWGRPO_API_KEY, a chat completion with tools, SSE, a
// posted reward written to --record, and SIGTERM stopping it (exit 0). Usage errors in-process.

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../../..');
const tmp = mkdtempSync(join(tmpdir(), 'flowgrpo-cli-serve-'));
let model: string;
let adapter: string;
beforeAll(async () => {
  model = await tinyModel(join(tmp, 'tiny'));
  const weights = await loadDecoderModel(model);
  const lora = { r: 2, alpha: 4, targetModules: ['q_proj' as const, 'v_proj' as const] };
  const params = initLoraParams(weights.config, lora, 'serve');
  for (const [k, v] of params) if (k.includes('lora_B')) v.fill(0.3);
  adapter = join(tmp, 'adapter');
  await saveLoraAdapter(adapter, weights.config, lora, params);
});

let child: ChildProcess | undefined;
afterAll(() => {
  if (child && child.exitCode === null) child.kill('SIGKILL');
  rmSync(tmp, { recursive: true, force: true });
});

describe('flowgrpo serve (real process)', () => {
  it('serves, records and stops on SIGTERM', async () => {
    const record = join(tmp, 'rollouts.jsonl');
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
        '--lora',
        `planner=${adapter}`,
        '--record',
        record,
        '--artifacts-dir',
        join(tmp, 'artifacts'),
      ],
      {
        cwd: ROOT,
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { ...process.env, FLOWGRPO_API_KEY: 'sk-local' },
      },
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
    // Nothing listens beyond the loopback interface unless --host says so.
    expect(baseURL).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/v1$/);
    expect(stdout).toContain('models: tiny, planner');
    const auth = { authorization: 'Bearer sk-local', 'content-type': 'application/json' };

    expect((await fetch(`${baseURL}/models`)).status).toBe(401);
    const models = (await (await fetch(`${baseURL}/models`, { headers: auth })).json()) as {
      data: { id: string }[];
    };
    expect(models.data.map((m) => m.id)).toEqual(['tiny', 'planner']);

    const tools = [
      { type: 'function', function: { name: 'calc', parameters: { type: 'object' } } },
    ];
    const body = {
      model: 'planner',
      messages: [{ role: 'user', content: 'What is 2 + 3?' }],
      tools,
      max_tokens: 8,
      seed: 4,
    };
    const r = await fetch(`${baseURL}/chat/completions`, {
      method: 'POST',
      headers: { ...auth, 'x-flowgrpo-rollout-id': 'cli-1' },
      body: JSON.stringify(body),
    });
    expect(r.status).toBe(200);
    const reply = (await r.json()) as { choices: { message: { content: string } }[] };
    const s = await fetch(`${baseURL}/chat/completions`, {
      method: 'POST',
      headers: { ...auth, 'x-flowgrpo-rollout-id': 'cli-2' },
      body: JSON.stringify({ ...body, stream: true }),
    });
    const streamed = (await s.text())
      .split('\n\n')
      .filter((e) => e.startsWith('data: {'))
      .map((e) => JSON.parse(e.slice(6)).choices[0]?.delta?.content ?? '')
      .join('');
    expect(streamed).toBe(reply.choices[0]!.message.content);

    const rew = await fetch(`${baseURL}/rollouts/cli-1/reward`, {
      method: 'POST',
      headers: auth,
      body: JSON.stringify({ reward: 1, final_answer: '5' }),
    });
    expect(rew.status).toBe(200);
    const lines = readFileSync(record, 'utf8').trim().split('\n');
    expect(lines).toHaveLength(1);
    const t = trajectoryFromJson(JSON.parse(lines[0]!));
    expect(t.reward).toBe(1);
    expect(t.finalAnswer).toBe('5');
    expect(t.segments!.find((x) => x.kind === 'action')!.tokens.length).toBeGreaterThan(0);

    child.kill('SIGTERM');
    const code = await new Promise<number | null>((resolve) => child!.on('exit', resolve));
    expect(code).toBe(0);
    expect(stderr).toContain('SIGTERM: closing the gateway');
    // Loopback (and a key besides): no warning about exposure.
    expect(stderr).not.toContain('warning:');
    expect(existsSync(join(tmp, 'artifacts', 'artifacts.json'))).toBe(true);
  });

  it('warns, in one line, when --host serves beyond this machine without an API key', async () => {
    const proc = spawn(
      process.execPath,
      [
        '--conditions=@flowgrpo/source',
        '--import',
        'tsx',
        'packages/cli/src/bin.ts',
        'serve',
        '--model',
        model,
        '--host',
        '0.0.0.0',
        '--port',
        '0',
        '--artifacts-dir',
        join(tmp, 'artifacts'),
      ],
      {
        cwd: ROOT,
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { ...process.env, FLOWGRPO_API_KEY: '' },
      },
    );
    child = proc;
    let stdout = '';
    let stderr = '';
    proc.stderr!.on('data', (d) => {
      stderr += d;
    });
    const baseURL = await new Promise<string>((resolve, reject) => {
      proc.stdout!.on('data', (d) => {
        stdout += d;
        const m = /listening on (http:\/\/\S+\/v1)/.exec(stdout);
        if (m) resolve(m[1]!);
      });
      proc.on('exit', (code) => reject(new Error(`exited ${code}: ${stderr}`)));
    });
    // Served without a key (what the warning says), and stopped once it answered.
    expect((await fetch(`${baseURL}/models`)).status).toBe(200);
    proc.kill('SIGTERM');
    expect(await new Promise((resolve) => proc.on('exit', resolve))).toBe(0);
    const warnings = stderr.split('\n').filter((l) => l.startsWith('warning:'));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(
      /--host 0\.0\.0\.0 serves beyond this machine without an API key .*set FLOWGRPO_API_KEY/,
    );
  });

  it('explains usage mistakes', async () => {
    const io = captureIO(tmp);
    expect(await runCli(['serve'], io)).toBe(2);
    expect(io.err).toContain('--model is required');
    const io2 = captureIO(tmp);
    expect(await runCli(['serve', '--upstream', 'http://127.0.0.1:9/v1'], io2)).toBe(2);
    expect(io2.err).toContain('--served-model-name');
    const io3 = captureIO(tmp);
    expect(await runCli(['serve', '--model', model, '--lora', 'x'], io3)).toBe(2);
    expect(io3.err).toContain('NAME=PATH');
    const io4 = captureIO(tmp);
    expect(await runCli(['serve', '--model', model, '--resume'], io4)).toBe(2);
    expect(io4.err).toContain('--resume and --overwrite apply to a training run: add --train FILE');
  });
});
