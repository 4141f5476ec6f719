import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defaultTagPrompt } from '@flowgrpo/agent';
import { TrajectorySchema, writeTrajectoriesParquet } from '@flowgrpo/core';
import { loadTokenizer, type Tokenizer } from '@flowgrpo/models';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../src/main.js';
import { captureIO } from './support.js';
import { sftConfig, tinyModel, writeConfig } from './train-fixtures.js';

// `flowgrpo data sft-from-rollouts`: rollouts as the trainer records them (written with
// writeTrajectoriesParquet into a run folder's rollouts/), converted, and the result trained on
// with `flowgrpo train` (trainer sft) for a step.

const tmp = mkdtempSync(join(tmpdir(), 'flowgrpo-cli-sft-rollouts-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
const run = join(tmp, 'run');
let model: string;
let tokenizer: Tokenizer;
let tagPrompt: string;

beforeAll(async () => {
  model = await tinyModel(join(tmp, 'tiny'));
  tokenizer = await loadTokenizer(model);
  // The tag agent's first prompt, rendered as TagAgent.renderPrompt does (the chat template).
  tagPrompt = tokenizer.applyChatTemplate!(
    defaultTagPrompt('What is 1 + 2?', { search: false, tools: [] }),
    { addGenerationPrompt: true },
  );
  const flow = (reward: number, answer: string) =>
    TrajectorySchema.parse({
      queryId: 'q0',
      groupId: 'g0',
      question: 'What is 2 + 2?',
      groundTruth: '4',
      turns: [
        {
          index: 0,
          promptTokens: [1, 2],
          actionTokens: [3],
          actionLogprobs: [-0.5],
          promptText: 'PLANNER PROMPT step 1',
          text: '{"tool_name": "calculator"}',
          parsed: true,
        },
        {
          index: 1,
          promptTokens: [1, 2],
          actionTokens: [4],
          actionLogprobs: [-0.5],
          promptText: 'PLANNER PROMPT step 2',
          text: `{"tool_name": "No matching tool", "context": "${answer}"}`,
          parsed: true,
        },
      ],
      finalAnswer: answer,
      reward,
      stopReason: 'answer',
    });
  const tag = (reward: number, action: string) =>
    TrajectorySchema.parse({
      queryId: 'q1',
      groupId: 'g1',
      question: 'What is 1 + 2?',
      segments: [
        { tokens: [...tokenizer.encode(tagPrompt)], trainable: false, kind: 'prompt' },
        {
          tokens: [...tokenizer.encode(action)],
          logprobs: [...tokenizer.encode(action)].map(() => -1),
          trainable: true,
          kind: 'action',
        },
      ],
      finalAnswer: '3',
      reward,
      stopReason: 'answer',
    });
  mkdirSync(join(run, 'rollouts'), { recursive: true });
  await writeTrajectoriesParquet(join(run, 'rollouts', 'step-1.parquet'), [
    flow(1, '4'),
    flow(0, '5'),
  ]);
  await writeTrajectoriesParquet(join(run, 'rollouts', 'step-2.parquet'), [
    tag(1, '<answer> 3 </answer>'),
    tag(0.5, '<answer> 4 </answer>'),
  ]);
}, 120_000);

async function convert(args: string[]) {
  const io = captureIO(tmp);
  const code = await runCli(['data', 'sft-from-rollouts', ...args], io);
  return { code, io };
}

const readRows = (file: string) =>
  readFileSync(file, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { prompt: string; completion: string });

describe('flowgrpo data sft-from-rollouts', () => {
  it('keeps the rollouts with reward >= 1: planner turns and the tag agent’s text, as prompted', async () => {
    const out = join(tmp, 'from-rollouts.jsonl');
    const { code, io } = await convert([run, '--out', out, '--tokenizer', model]);
    expect(code, io.err).toBe(0);
    expect(io.out).toBe(`3 SFT rows from 2 of 4 rollouts (reward >= 1, 2 file(s)) → ${out}\n`);
    expect(readRows(out)).toEqual([
      { prompt: 'PLANNER PROMPT step 1', completion: '{"tool_name": "calculator"}' },
      {
        prompt: 'PLANNER PROMPT step 2',
        completion: '{"tool_name": "No matching tool", "context": "4"}',
      },
      { prompt: tagPrompt, completion: '<answer> 3 </answer>' },
    ]);

    // And flowgrpo train (trainer sft) reads the file: one step on it.
    const cfg = writeConfig(
      join(tmp, 'sft.json'),
      sftConfig(tmp, model, {
        train_file: out,
        eval_file: out,
        max_steps: 1,
        output_dir: join(tmp, 'run-sft'),
      }),
    );
    const train = captureIO(tmp);
    expect(await runCli(['train', '--config', cfg], train), train.err).toBe(0);
    const metrics = readFileSync(join(tmp, 'run-sft', 'metrics.jsonl'), 'utf8');
    expect(metrics).toMatch(/"step":1/);
  }, 240_000);

  it('--min-reward picks the threshold; one file may be given instead of the run', async () => {
    const out = join(tmp, 'half.jsonl');
    const file = join(run, 'rollouts', 'step-2.parquet');
    const { code, io } = await convert([
      file,
      '--out',
      out,
      '--tokenizer',
      model,
      '--min-reward',
      '0.5',
    ]);
    expect(code, io.err).toBe(0);
    expect(readRows(out).map((r) => r.completion)).toEqual([
      '<answer> 3 </answer>',
      '<answer> 4 </answer>',
    ]);
  });

  it('names what is wrong: no tokenizer for token-id rollouts, an existing --out, no success', async () => {
    const noTok = await convert([run, '--out', join(tmp, 'a.jsonl')]);
    expect(noTok.code).toBe(2);
    expect(noTok.io.err).toContain('--tokenizer');

    const existing = join(tmp, 'mine.jsonl');
    writeFileSync(existing, 'my own rows\n');
    const kept = await convert([run, '--out', existing, '--tokenizer', model]);
    expect(kept.code).toBe(2);
    expect(kept.io.err).toContain('--overwrite');
    expect(readFileSync(existing, 'utf8')).toBe('my own rows\n');
    // A link is never written through, --overwrite or not: what it points at is kept.
    const link = join(tmp, 'link.jsonl');
    symlinkSync(existing, link);
    const linked = await convert([run, '--out', link, '--tokenizer', model, '--overwrite']);
    expect(linked.code).toBe(1);
    expect(linked.io.err).toContain(`[SYMLINK_REFUSED] ${link} is a symbolic link (→ ${existing})`);
    expect(readFileSync(existing, 'utf8')).toBe('my own rows\n');

    const none = await convert([
      run,
      '--out',
      join(tmp, 'b.jsonl'),
      '--tokenizer',
      model,
      '--min-reward',
      '2',
    ]);
    expect(none.code).toBe(1);
    expect(none.io.err).toContain('no rollout of 4 in 2 file(s) has reward >= 2');

    const empty = join(tmp, 'empty-run');
    mkdirSync(empty);
    const noRollouts = await convert([empty, '--out', join(tmp, 'c.jsonl')]);
    expect(noRollouts.code).toBe(1);
    expect(noRollouts.io.err).toContain('no rollouts/*.parquet in this folder');
  });
});
