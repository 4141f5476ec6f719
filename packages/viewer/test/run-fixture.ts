import { appendFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type Trajectory, TrajectorySchema, writeTrajectoriesParquet } from '@flowgrpo/core';

// A run directory as a trainer writes it, built step by step by the tests (the viewer must follow
// a run still being written): config.json, metrics.jsonl lines, rollouts/step-<n>.parquet, and a
// checkpoint holding a byte-level tokenizer.json whose pieces are single letters ("Ġ" a space), or
// a LoRA checkpoint whose adapter_config.json names the base model that holds it.

export const LETTERS = ' abcdefghijklmnopqrstuvwxyz0123456789{}":,=?';
/** Token id of each character of LETTERS (id = its index). */
export const ids = (text: string) => Int32Array.from(text, (ch) => LETTERS.indexOf(ch));

/** A byte-level tokenizer.json of LETTERS in `folder`. */
export function writeTokenizer(folder: string): string {
  mkdirSync(folder, { recursive: true });
  const vocab = Object.fromEntries(Array.from(LETTERS, (ch, i) => [ch === ' ' ? 'Ġ' : ch, i]));
  const path = join(folder, 'tokenizer.json');
  writeFileSync(path, JSON.stringify({ model: { type: 'BPE', vocab }, added_tokens: [] }));
  return path;
}

/** A run whose checkpoint carries the tokenizer (a full fine-tuning checkpoint). */
export function startRun(dir: string): void {
  mkdirSync(join(dir, 'checkpoint-1'), { recursive: true });
  writeFileSync(join(dir, 'config.json'), JSON.stringify({ trainer: 'grpo', max_steps: 3 }));
  writeTokenizer(join(dir, 'checkpoint-1'));
}

/**
 * A LoRA run as `flowgrpo train` leaves it: config.json names the artifacts folder (no tokenizer
 * there), checkpoint-1 holds the adapter only, and its adapter_config.json names the base model
 * `base` (which holds the tokenizer when the test wrote one there).
 */
export function startLoraRun(dir: string, base: string): void {
  mkdirSync(join(dir, 'checkpoint-1'), { recursive: true });
  mkdirSync(join(dir, 'artifacts'), { recursive: true });
  writeFileSync(
    join(dir, 'config.json'),
    JSON.stringify({ trainer: 'grpo', output_dir: dir, artifacts: join(dir, 'artifacts') }),
  );
  writeFileSync(
    join(dir, 'checkpoint-1', 'adapter_config.json'),
    JSON.stringify({ peft_type: 'LORA', base_model_name_or_path: base, r: 4 }),
  );
}

export function logStep(dir: string, record: Record<string, number>): void {
  appendFileSync(join(dir, 'metrics.jsonl'), `${JSON.stringify(record)}\n`);
}

/**
 * Step `step`'s rollouts: one group of two Flow trajectories (a calculator call, then an answer;
 * rewards 1 and 0, advantages ±1) and a failed single-policy one (prompt, action, observation).
 */
export function trajectories(step: number): Trajectory[] {
  const turn = (index: number, action: string, a: number, tool?: [string, string]) => ({
    index,
    promptTokens: ids(`q ${step}`),
    actionTokens: ids(action),
    actionLogprobs: Float32Array.from(action, (_, i) => -0.25 * (i + 1)),
    text: action,
    advantage: a,
    ...(tool && { toolName: tool[0], toolInput: { expr: '6*7' }, toolResult: tool[1] }),
  });
  return [
    TrajectorySchema.parse({
      queryId: 'q1',
      groupId: `step${step}/q1`,
      question: 'what is six times seven',
      turns: [turn(0, 'calc', 1, ['calculator', '42']), turn(1, 'ans 42', 1)],
      finalAnswer: '42',
      reward: 1,
      advantage: 1,
      stopReason: 'answer',
    }),
    TrajectorySchema.parse({
      queryId: 'q1',
      groupId: `step${step}/q1`,
      question: 'what is six times seven',
      turns: [turn(0, 'ans 40', -1)],
      finalAnswer: '40',
      reward: 0,
      advantage: -1,
      stopReason: 'answer',
    }),
    TrajectorySchema.parse({
      queryId: 'q2',
      groupId: `step${step}/q2`,
      segments: [
        { tokens: ids('hi'), trainable: false, kind: 'prompt' },
        { tokens: ids('go'), logprobs: [-1, -2], trainable: true, kind: 'action' },
        { tokens: ids('ok'), trainable: false, kind: 'observation' },
      ],
      finalAnswer: '',
      reward: 0,
      advantage: 0,
      stopReason: 'error',
      metadata: {
        errors: [{ role: 'rollout', code: 'TOOL_TIMEOUT', message: 'calculator timed out' }],
      },
    }),
  ];
}

export async function writeStepRollouts(
  dir: string,
  step: number,
  batch: Trajectory[] = trajectories(step),
): Promise<void> {
  mkdirSync(join(dir, 'rollouts'), { recursive: true });
  await writeTrajectoriesParquet(
    join(dir, 'rollouts', `step-${String(step).padStart(6, '0')}.parquet`),
    batch,
  );
}
