import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { SampleRow } from '@flowgrpo/core';
import { createTinyQwen2 } from '@flowgrpo/models';

// Fixtures of the train / eval / export tests: a tiny Qwen2 HF folder (byte-level tokenizer with
// a chat template), arithmetic questions as SampleRows, and run configs that need no server —
// the tag agent with the calculator tool and the exact-match reward.

export const LORA = { r: 2, lora_alpha: 4, target_modules: ['q_proj', 'v_proj', 'up_proj'] };

/** A 1-layer Qwen2 (hidden 32, GQA 2/1) in `dir`; positions enough for the tag agent's prompt. */
export async function tinyModel(dir: string, o: { dtype?: 'F32' | 'BF16' } = {}): Promise<string> {
  await createTinyQwen2(dir, {
    ...o,
    seed: 'cli-train',
    hiddenSize: 32,
    layers: 1,
    heads: 2,
    kvHeads: 1,
    intermediateSize: 64,
    maxPositionEmbeddings: 2048,
  });
  return dir;
}

export function questionRows(n: number): SampleRow[] {
  return Array.from({ length: n }, (_, i) => ({
    id: i,
    question: `What is ${i} + ${i + 1}?`,
    chain: '',
    result: String(2 * i + 1),
    source: i % 2 === 0 ? 'even' : 'odd',
    extra_info: { ground_truth: String(2 * i + 1), idx: i },
  }));
}

export function writeJsonl(path: string, rows: readonly unknown[]): string {
  writeFileSync(path, `${rows.map((r) => JSON.stringify(r)).join('\n')}\n`);
  return path;
}

/** A GRPO run.json over the tiny model that needs no endpoint (tag agent, exact match). */
export function grpoConfig(
  dir: string,
  model: string,
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    trainer: 'grpo',
    model,
    train_file: writeJsonl(join(dir, 'train-rows.jsonl'), questionRows(4)),
    agent: { type: 'tag', tools: ['calculator'], max_turns: 1 },
    reward: 'exact_match',
    output_dir: join(dir, 'run-grpo'),
    max_steps: 2,
    queries_per_step: 2,
    num_generations: 2,
    max_completion_length: 8,
    learning_rate: 1e-3,
    seed: 1,
    lora: LORA,
    ...extra,
  };
}

/** An SFT run.json over the tiny model with TRL's three dataset formats in one file. */
export function sftConfig(
  dir: string,
  model: string,
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  const rows = [
    { prompt: 'Q: 1+1=', completion: ' 2' },
    { text: 'The sum of 2 and 3 is 5.' },
    {
      messages: [
        { role: 'user', content: 'What is 3+4?' },
        { role: 'assistant', content: '7' },
      ],
    },
    { prompt: 'Q: 5+1=', completion: ' 6' },
  ];
  return {
    trainer: 'sft',
    model,
    train_file: writeJsonl(join(dir, 'sft.jsonl'), rows),
    eval_file: join(dir, 'sft.jsonl'),
    output_dir: join(dir, 'run-sft'),
    max_steps: 2,
    per_device_train_batch_size: 2,
    learning_rate: 0.05,
    seed: 1,
    lora: LORA,
    ...extra,
  };
}

export function writeConfig(path: string, config: Record<string, unknown>): string {
  writeFileSync(path, JSON.stringify(config, null, 2));
  return path;
}
