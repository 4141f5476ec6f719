// SFTTrainer's early stopping, as HF's EarlyStoppingCallback defines it: an evaluation counts as
// an improvement only when the eval loss falls below the best so far by more than
// `early_stopping_threshold`; after `early_stopping_patience` evaluations without one, training
// stops. Any lower loss is still the new best checkpoint. The expected steps below follow from
// those rules on a run whose eval loss falls at every step (the eval set is the training set and
// every weight is trained at a high learning rate, so each step lowers it; the first test checks it).
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { createTinyQwen2, type TinyModel } from '@flowgrpo/models';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listCheckpoints, type SFTExample, SFTTrainer } from '../src/index.js';
import { rotateCheckpoints, TRAINER_STATE } from '../src/run/checkpoint.js';

const tmp = mkdtempSync(join(tmpdir(), 'flowgrpo-sft-early-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

let model: TinyModel;
beforeAll(async () => {
  model = await createTinyQwen2(join(tmp, 'model'), {
    seed: 'early-stopping',
    hiddenSize: 32,
    layers: 1,
    heads: 4,
    kvHeads: 2,
    intermediateSize: 48,
  });
});

const data: SFTExample[] = Array.from({ length: 8 }, (_, i) => ({
  prompt: `Count ${i}: `,
  completion: `${'*'.repeat(i + 1)}.`,
}));

async function train(dir: string, threshold: number, saveTotalLimit = 0, overwrite = false) {
  const result = await new SFTTrainer({
    config: {
      output_dir: join(tmp, dir),
      max_steps: 6,
      learning_rate: 3e-3,
      per_device_train_batch_size: 8,
      max_length: 64,
      eval_steps: 1,
      early_stopping_patience: 2,
      early_stopping_threshold: threshold,
      use_peft: false,
      save_total_limit: saveTotalLimit,
      overwrite_output_dir: overwrite,
      seed: 5,
    },
    model: model.dir,
    tokenizer: model.tokenizer,
    trainDataset: data,
    evalDataset: data,
  }).train();
  const evalLoss = readFileSync(join(tmp, dir, 'metrics.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, number>)
    .filter((r) => r.eval_loss !== undefined)
    .map((r) => r.eval_loss!);
  return { result, evalLoss };
}

describe('SFT early stopping', () => {
  it('threshold 0: every lower loss is an improvement, so the run reaches max_steps', async () => {
    const { result, evalLoss } = await train('no-threshold', 0);
    // The premise: the eval loss falls at every evaluation.
    for (let i = 1; i < evalLoss.length; i++) expect(evalLoss[i]).toBeLessThan(evalLoss[i - 1]!);
    expect(evalLoss).toHaveLength(6);
    expect(result.stopped).toBe('max_steps');
    expect(basename(result.bestCheckpoint)).toBe('checkpoint-6');
    // The best checkpoint's own state names it as the best (a resumed run reads the best from
    // there and must not rotate it away).
    const state = JSON.parse(readFileSync(join(result.bestCheckpoint, TRAINER_STATE), 'utf8')) as {
      extra: { best_checkpoint: string };
    };
    expect(basename(state.extra.best_checkpoint)).toBe('checkpoint-6');
  });

  it('a threshold above the per-step gain: stops after `patience` evaluations, best kept', async () => {
    // Step 1 sets the best; steps 2 and 3 improve by less than 10 nats → counter 1, 2 → stop at 3.
    const { result, evalLoss } = await train('threshold', 10);
    expect(evalLoss).toHaveLength(3);
    expect(result.stopped).toBe('early_stopping');
    expect(result.globalStep).toBe(3);
    // Step 3's loss is the lowest, so it is the best checkpoint although it did not "improve".
    expect(evalLoss[2]).toBeLessThan(evalLoss[1]!);
    expect(basename(result.bestCheckpoint)).toBe('checkpoint-3');
    expect(result.bestEvalLoss).toBe(evalLoss[2]);
  });

  it('overwrite_output_dir into a used output_dir: the earlier checkpoints go, the new best stays', async () => {
    // Run 1 leaves checkpoint-1 … checkpoint-6. Run 2 (same folder) stops at step 3 with
    // save_total_limit 1. Were run 1's checkpoint-6 left in place, rotation (which keeps the
    // highest steps) would delete run 2's best, checkpoint-3, and keep the stale one.
    await train('reused', 0);
    expect(
      readdirSync(join(tmp, 'reused')).filter((n) => n.startsWith('checkpoint-')),
    ).toHaveLength(6);
    // Without overwrite_output_dir, HF's rule: the finished run is not replaced.
    await expect(train('reused', 10, 1)).rejects.toThrow(/overwrite_output_dir/);
    const { result } = await train('reused', 10, 1, true);
    expect(basename(result.bestCheckpoint)).toBe('checkpoint-3');
    expect(existsSync(join(result.bestCheckpoint, 'config.json'))).toBe(true);
    // save_total_limit counts the checkpoints besides the best one: run 2's checkpoint-2 and its
    // best, checkpoint-3; nothing of run 1's.
    expect(
      readdirSync(join(tmp, 'reused'))
        .filter((n) => n.startsWith('checkpoint-'))
        .sort(),
    ).toEqual(['checkpoint-2', 'checkpoint-3']);
  });

  it('rotation never removes the best checkpoint, however old (save_total_limit counts the others)', () => {
    // The best at step 10, later saves at 20, 30, 40, save_total_limit 1: 10 and 40 remain.
    // (The SFT trainer once rotated to limit + 1 by age, which removed an old best.)
    const dir = join(tmp, 'rotation');
    for (const step of [10, 20, 30, 40]) {
      mkdirSync(join(dir, `checkpoint-${step}`), { recursive: true });
      writeFileSync(join(dir, `checkpoint-${step}`, TRAINER_STATE), '{}');
    }
    rotateCheckpoints(dir, 1, join(dir, 'checkpoint-10'));
    expect(listCheckpoints(dir).map((c) => c.step)).toEqual([10, 40]);
    rotateCheckpoints(dir, 1); // no best: the newest stays
    expect(listCheckpoints(dir).map((c) => c.step)).toEqual([40]);
  });
});
