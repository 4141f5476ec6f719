import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  createTinyQwen2,
  initLoraParams,
  loadDecoderConfig,
  saveLoraAdapter,
} from '@flowgrpo/models';
import type { EvalResult } from '@flowgrpo/trainer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../src/main.js';
import { captureIO } from './support.js';
import {
  grpoConfig,
  LORA,
  questionRows,
  sftConfig,
  tinyModel,
  writeConfig,
  writeJsonl,
} from './train-fixtures.js';

// `flowgrpo eval`: policies side by side (greedy, so each row of the table is a deterministic
// function of its weights), the table on stdout and the results as JSON with --out.

const tmp = mkdtempSync(join(tmpdir(), 'flowgrpo-cli-eval-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
let model: string;
let trained: string;
let zero: string;
let loud: string;
let data: string;

beforeAll(async () => {
  model = await tinyModel(join(tmp, 'tiny'));
  data = writeJsonl(join(tmp, 'eval.jsonl'), questionRows(4));
  // A trained adapter (2 SFT steps) and one at PEFT's init (B = 0: the base model exactly).
  const cfg = writeConfig(join(tmp, 'run.json'), sftConfig(tmp, model, { learning_rate: 0.1 }));
  const io = captureIO(tmp);
  expect(await runCli(['train', '--config', cfg], io), io.err).toBe(0);
  trained = join(tmp, 'run-sft', 'checkpoint-2');
  zero = join(tmp, 'zero-adapter');
  const lora = { r: LORA.r, alpha: LORA.lora_alpha, targetModules: ['q_proj', 'v_proj'] as const };
  const config = await loadDecoderConfig(model);
  await saveLoraAdapter(zero, config, lora, initLoraParams(config, lora, 7));
  // And one with large B matrices, which changes what the model samples.
  loud = join(tmp, 'loud-adapter');
  const params = initLoraParams(config, lora, 8);
  for (const [name, v] of params)
    if (name.includes('lora_B')) for (let i = 0; i < v.length; i++) v[i] = 2 * Math.sin(7 * i + 1);
  await saveLoraAdapter(loud, config, lora, params);
});

type Row = Omit<EvalResult, 'trajectories'> & {
  trajectories: { finalAnswer: string; segments: { tokens: number[] }[] }[];
};

/** What greedy decoding made of each question: the sampled token ids and the final answer. */
const outputs = (r: Row) =>
  r.trajectories.map((t) => ({ answer: t.finalAnswer, tokens: t.segments.map((s) => s.tokens) }));

describe('flowgrpo eval', () => {
  it('prints base and adapters side by side and writes the results with --out', async () => {
    const out = join(tmp, 'results.json');
    const io = captureIO(tmp);
    const code = await runCli(
      [
        'eval',
        '--model',
        model,
        '--data',
        data,
        '--agent',
        'tag',
        '--tools',
        'calculator',
        '--max-turns',
        '1',
        '--max-tokens',
        '6',
        '--base',
        '--adapter',
        `sft=${trained}`,
        '--adapter',
        `again=${trained}`,
        '--adapter',
        zero,
        '--adapter',
        loud,
        '--out',
        out,
        '--trajectories',
      ],
      io,
    );
    expect(code, io.err).toBe(0);
    const lines = io.out.trim().split('\n');
    expect(lines[0]).toMatch(/^policy\s+accuracy \[95% CI\]\s+format/);
    expect(lines.slice(2, 7).map((l) => l.split(/\s+/)[0])).toEqual([
      'base',
      'sft',
      'again',
      'zero-adapter',
      'loud-adapter',
    ]);
    // Then each policy against the first: on 4 questions no difference is clear.
    expect(lines.slice(7)).toEqual(
      ['sft', 'again', 'zero-adapter', 'loud-adapter'].map((name) =>
        expect.stringMatching(
          new RegExp(
            `^${name} − base: -?\\d+\\.\\d points, inconclusive: the 95% intervals overlap$`,
          ),
        ),
      ),
    );
    const json = JSON.parse(readFileSync(out, 'utf8')) as { n: number; results: Row[] };
    expect(json.n).toBe(4);
    const [base, sft, again, zeroB, loudB] = json.results as [Row, Row, Row, Row, Row];
    for (const r of json.results) {
      expect(r.n).toBe(4);
      expect(Object.keys(r.per_source).sort()).toEqual(['even', 'odd']);
      // Every turn is cut at --max-tokens 6 (a tiny untrained model rarely ends a reply).
      expect(r.completion_length_mean).toBeLessThanOrEqual(6);
      expect(r.trajectories).toHaveLength(4);
    }
    // Greedy decoding: the same adapter twice samples the same tokens, and an adapter with B = 0
    // (a different LoRA shape, so another build of the graphs) samples the base model's, while
    // one with large B samples something else — each row really is its own policy.
    expect(outputs(again)).toEqual(outputs(sft));
    expect(outputs(zeroB)).toEqual(outputs(base));
    expect(outputs(loudB)).not.toEqual(outputs(base));
    expect(json.results.map((r) => r.name)).toEqual([
      'base',
      'sft',
      'again',
      'zero-adapter',
      'loud-adapter',
    ]);
  });

  it('takes the agent, reward and data from a GRPO run config', async () => {
    const cfg = writeConfig(
      join(tmp, 'grpo.json'),
      grpoConfig(tmp, model, { eval_file: data, max_completion_length: 4 }),
    );
    const io = captureIO(tmp);
    expect(await runCli(['eval', '--config', cfg, '--limit', '2'], io), io.err).toBe(0);
    expect(io.out).toMatch(/^base\s/m);
  });

  it('reads plain {question, answer} rows (GSM8K answers) and says what it detected', async () => {
    const plain = writeJsonl(join(tmp, 'plain.jsonl'), [
      { question: 'What is 1 + 2?', answer: '1 + 2 = 3\n#### 3' },
      { question: 'What is 2 + 2?', answer: '4' },
    ]);
    const out = join(tmp, 'plain-results.json');
    const io = captureIO(tmp);
    const args = ['eval', '--model', model, '--data', plain, '--agent', 'tag', '--out', out];
    expect(await runCli([...args, '--max-turns', '1', '--max-tokens', '4'], io), io.err).toBe(0);
    expect(io.err).toContain(`data: ${plain}: plain rows (question + answer)`);
    const json = JSON.parse(readFileSync(out, 'utf8')) as { n: number; results: Row[] };
    expect(json.n).toBe(2);
    expect(Object.keys(json.results[0]!.per_source)).toEqual(['plain']);
  });

  it("builds the graphs with the run config's max_positions", async () => {
    // A model whose own positions hold none of the agent's prompts, trained with them raised:
    // evaluating with the same config must not fall back to the model's 64.
    const short = join(tmp, 'tiny-64');
    await createTinyQwen2(short, {
      seed: 'cli-eval',
      hiddenSize: 32,
      layers: 1,
      heads: 2,
      maxPositionEmbeddings: 64,
    });
    const run = grpoConfig(tmp, short, { eval_file: data, max_completion_length: 4 });
    const tooShort = captureIO(tmp);
    const cfgShort = writeConfig(join(tmp, 'grpo-64.json'), run);
    expect(await runCli(['eval', '--config', cfgShort, '--limit', '2'], tooShort)).toBe(1);
    expect(tooShort.err).toContain('[CONTEXT_LENGTH_EXCEEDED]');
    const raised = captureIO(tmp);
    const cfg = writeConfig(join(tmp, 'grpo-raised.json'), { ...run, max_positions: 1024 });
    expect(await runCli(['eval', '--config', cfg, '--limit', '2'], raised), raised.err).toBe(0);
    expect(raised.out).toMatch(/^base\s/m);
  });

  it('names what is missing or wrong', async () => {
    const noAgent = captureIO(tmp);
    expect(await runCli(['eval', '--model', model, '--data', data], noAgent)).toBe(2);
    expect(noAgent.err).toContain('--agent');
    // (--agent flow without a server runs its fixed roles offline: test/run-agent.test.ts.)
    const urlAlone = captureIO(tmp);
    expect(
      await runCli(
        ['eval', '--model', model, '--data', data, '--agent', 'flow', '--base-url', 'http://x/v1'],
        urlAlone,
      ),
    ).toBe(2);
    expect(urlAlone.err).toContain('--base-url and --engine-model go together');
    const missing = captureIO(tmp);
    expect(
      await runCli(
        ['eval', '--model', model, '--data', join(tmp, 'none.jsonl'), '--agent', 'tag'],
        missing,
      ),
    ).toBe(1);
    expect(missing.err).toContain(`file not found: ${join(tmp, 'none.jsonl')}`);
    const clash = captureIO(tmp);
    expect(
      await runCli(
        [
          'eval',
          '--model',
          model,
          '--data',
          data,
          '--agent',
          'tag',
          '--adapter',
          trained,
          '--adapter',
          trained,
        ],
        clash,
      ),
    ).toBe(2);
    expect(clash.err).toContain("two policies are named 'checkpoint-2'");
  });
});
