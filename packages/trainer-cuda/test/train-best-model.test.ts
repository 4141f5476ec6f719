// load_best_model_at_end in GRPOTrainer (HF's names): every eval_steps and at the end the policy
// is evaluated greedily on the eval dataset; the checkpoint of the best evaluation is written,
// named in trainer_state.json (best_metric, best_model_checkpoint), kept through rotation, and
// handed back as the result. The expected best is read from the run's own metrics.jsonl (the
// first evaluation with the best value: HF's strict improvement), not hard-coded.
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError } from '@flowgrpo/core';
import type { RewardFunction } from '@flowgrpo/reward';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeQuestions, questionRows } from '../src/demo/index.js';
import { type GRPOConfigInput, listCheckpoints, type TrainResult } from '../src/index.js';
import { tinyConfig, tinySetup, tinyTrainer } from './support/tiny-grpo.js';

const root = mkdtempSync(join(tmpdir(), 'flowgrpo-best-model-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/**
 * A score of the planner's text itself (its characters' codes, mod 101, over 100): greedy
 * decoding of the tiny untrained model writes no double quotes and no right answer (the quote
 * reward and the judge score every evaluation 0) and always its 24 tokens, but what it writes
 * moves with the weights, and so does this.
 */
const textReward: RewardFunction<object> = {
  name: 'text',
  score: (input) => {
    const text = input.completion ?? input.finalAnswer;
    let sum = 0;
    for (const ch of text) sum += ch.codePointAt(0)!;
    return { score: (sum % 101) / 100, details: {} };
  },
};

const trainer = async (name: string, extra: Partial<GRPOConfigInput>, withEval = true) => {
  const { almanac } = await tinySetup(root);
  // Questions of the training half, apart from the trainer's own 16 ('tiny').
  const evalDataset = questionRows(makeQuestions(almanac, 'train', 8, 'tiny-validation'));
  // A learning rate large enough that the greedy text moves within four steps (at the tiny
  // setup's 5e-3 it does not, and every evaluation would tie).
  return tinyTrainer(root, tinyConfig(join(root, name), { learning_rate: 0.2, ...extra }), {
    extra: { reward: textReward, ...(withEval && { evalDataset }) },
  });
};

/** The run's evaluations, step by step, from metrics.jsonl. */
const evaluations = (dir: string) =>
  readFileSync(join(dir, 'metrics.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, number>)
    .filter((m) => 'eval/reward' in m);

const trainerState = (checkpoint: string) =>
  JSON.parse(readFileSync(join(checkpoint, 'trainer_state.json'), 'utf8'));

let run: TrainResult;
const out = join(root, 'best');
beforeAll(async () => {
  // The tiny setup's quote reward varies with the weights (the judge scores an untrained model
  // 0 everywhere), so the four evaluations differ; save_total_limit 1 keeps only the latest.
  run = await (
    await trainer('best', {
      max_steps: 4,
      eval_steps: 1,
      save_total_limit: 1,
      load_best_model_at_end: true,
      metric_for_best_model: 'reward', // HF's bare spelling of eval/reward
    })
  ).train();
}, 180_000);

describe('GRPOTrainer load_best_model_at_end', () => {
  it('hands back the checkpoint of the first best evaluation, the final one included', () => {
    const evals = evaluations(out);
    expect(evals.map((m) => m.step)).toEqual([1, 2, 3, 4]);
    const best = evals.reduce((a, b) => (b['eval/reward']! > a['eval/reward']! ? b : a));
    expect(run.bestMetric).toBe(best['eval/reward']);
    expect(run.bestCheckpoint).toBe(join(out, `checkpoint-${best.step}`));
    expect(run.checkpoint).toBe(join(out, 'checkpoint-4'));
  });

  it('keeps the best checkpoint through rotation, and its trainer_state names itself', () => {
    const kept = listCheckpoints(out).map((c) => c.step);
    const bestStep = Number(/checkpoint-(\d+)$/.exec(run.bestCheckpoint!)![1]);
    // save_total_limit 1: the latest, and the best beside it (the same folder when step 4 won).
    expect(kept).toEqual([...new Set([bestStep, 4])].sort((a, b) => a - b));
    const state = trainerState(run.bestCheckpoint!);
    expect(state.best_model_checkpoint).toBe(run.bestCheckpoint);
    expect(state.best_metric).toBe(run.bestMetric);
    // The last checkpoint's state knows the best too (a resumed run keeps it).
    expect(trainerState(run.checkpoint!).best_model_checkpoint).toBe(run.bestCheckpoint);
  });

  it('greater_is_better: false keeps the lowest instead', async () => {
    const low = await (
      await trainer('lowest', {
        max_steps: 4,
        eval_steps: 1,
        load_best_model_at_end: true,
        metric_for_best_model: 'eval_reward',
        greater_is_better: false,
      })
    ).train();
    const evals = evaluations(join(root, 'lowest'));
    // Same seed and config as the first run but for the best rule: the same evaluations.
    expect(evals.map((m) => m['eval/reward'])).toEqual(
      evaluations(out).map((m) => m['eval/reward']),
    );
    const lowest = evals.reduce((a, b) => (b['eval/reward']! < a['eval/reward']! ? b : a));
    expect(low.bestCheckpoint).toBe(join(root, 'lowest', `checkpoint-${lowest.step}`));
    // Whichever step it is — the final one too, whose checkpoint was written before its
    // evaluation and is written again — the best checkpoint's trainer_state names itself.
    expect(trainerState(low.bestCheckpoint!).best_model_checkpoint).toBe(low.bestCheckpoint);
    expect(trainerState(low.bestCheckpoint!).best_metric).toBe(lowest['eval/reward']);
  }, 180_000);

  it('refuses, before anything is written, a rule it cannot keep', async () => {
    const cases: [Partial<GRPOConfigInput>, boolean, string, RegExp][] = [
      [
        { load_best_model_at_end: true, eval_steps: 1 },
        false,
        'load_best_model_at_end',
        /no eval dataset/,
      ],
      [{ load_best_model_at_end: true }, true, 'eval_steps', /only the final evaluation/],
      [
        { load_best_model_at_end: true, eval_steps: 1, metric_for_best_model: 'eval/bleu' },
        true,
        'metric_for_best_model',
        /not a metric an evaluation logs/,
      ],
    ];
    for (const [i, [extra, withEval, key, message]] of cases.entries()) {
      let error: unknown;
      try {
        await trainer(`refused-${i}`, extra, withEval);
      } catch (e) {
        error = e;
      }
      expect(error, key).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).key).toBe(key);
      expect((error as Error).message).toMatch(message);
      expect(existsSync(join(root, `refused-${i}`))).toBe(false);
    }
  });
});
