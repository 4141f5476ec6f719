// Which questions a GRPO step asks (query-sampler.ts): TRL's shuffle_dataset, and a curriculum of
// per-source weights that change over steps — the shares each step gets, each source walked by
// its own cursor, exact resume from the checkpoint's state, the config's errors — and a real
// GRPOTrainer run on the tiny demo setup whose rollouts ask what the curriculum scheduled.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError, createRng, readTrajectoriesParquet, type SampleRow } from '@flowgrpo/core';
import { afterAll, describe, expect, it } from 'vitest';
import type { TrainerState } from '../src/run/checkpoint.js';
import { GRPOConfigSchema, parseConfig } from '../src/run/config.js';
import { epochOrder } from '../src/run/data-order.js';
import { apportion, CurriculumSchema, querySampler } from '../src/run/query-sampler.js';
import { tinyConfig, tinyTrainer } from './support/tiny-grpo.js';

const root = mkdtempSync(join(tmpdir(), 'flowgrpo-query-sampler-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const fresh = (): TrainerState => ({
  global_step: 0,
  batches: 0,
  epoch: 0,
  data_cursor: 0,
  rng: { seed: 3, scheme: '' },
  nan_steps_skipped: 0,
  log_history: [],
  config: {},
});

/** 12 rows: "easy" at 0–5, "hard" at 6–9, "rare" at 10–11 (kind in extra_info, as the demo's). */
const rows: SampleRow[] = Array.from({ length: 12 }, (_, i) => ({
  id: i,
  question: `q${i}`,
  chain: '',
  result: String(i),
  source: 'test',
  extra_info: { ground_truth: String(i), idx: i, kind: i < 6 ? 'easy' : i < 10 ? 'hard' : 'rare' },
}));
const kind = (r: SampleRow) => r.extra_info?.kind as string;

describe('shuffle_dataset', () => {
  it('false asks the rows in the file order, epoch after epoch; true in the seeded permutation', () => {
    const inOrder = querySampler(rows, { seed: 3, shuffle_dataset: false }, fresh());
    const ids = [0, 1, 2, 3].flatMap((b) => inOrder.take(b, b, 5).map((r) => r.id));
    // 20 rows of a 12-row file: 0…11 then 0…7.
    expect(ids).toEqual([...Array(12).keys(), ...Array(8).keys()]);
    expect(inOrder.epochs).toBeCloseTo(20 / 12, 12);

    // The default is the permutation the trainers always used (epochOrder of seed and epoch).
    const shuffled = querySampler(rows, parseConfig(GRPOConfigSchema, cfg(), 'c'), fresh());
    expect(shuffled.take(0, 0, 12).map((r) => r.id)).toEqual(epochOrder(12, 3, 0));
    expect(parseConfig(GRPOConfigSchema, cfg(), 'c').shuffle_dataset).toBe(true);
  });
});

function cfg(extra: Record<string, unknown> = {}) {
  return { output_dir: 'x', max_steps: 10, seed: 3, ...extra };
}

describe('curriculum', () => {
  const curriculum = CurriculumSchema.parse({
    column: 'kind',
    stages: [
      { until_step: 2, weights: { hard: 1 } },
      { until_step: 4, weights: { hard: 3, easy: 1 } },
      { weights: { easy: 1, hard: 1, rare: 2 } },
    ],
  });

  it('gives each step the stage’s shares, walking every source by its own cursor', () => {
    const state = fresh();
    const s = querySampler(rows, { seed: 3, shuffle_dataset: true, curriculum }, state);
    const batches = Array.from({ length: 6 }, (_, b) => s.take(b, b, 8));
    // Stage 0 (steps 0–1): hard only. Stage 1 (2–3): 8 × 3/4 = 6 hard, 2 easy. Stage 2: 2/2/4.
    const counts = batches.map((rs) =>
      ['easy', 'hard', 'rare'].map((k) => rs.filter((r) => kind(r) === k).length),
    );
    expect(counts).toEqual([
      [0, 8, 0],
      [0, 8, 0],
      [2, 6, 0],
      [2, 6, 0],
      [2, 2, 4],
      [2, 2, 4],
    ]);
    // "hard" has 4 rows: its 8 + 8 + 6 + 6 + 2 + 2 = 32 questions are 8 whole epochs of its own
    // permutations, each holding every hard row once.
    const hard = batches
      .flat()
      .filter((r) => kind(r) === 'hard')
      .map((r) => r.id);
    for (let e = 0; e < 8; e++)
      expect([...hard.slice(4 * e, 4 * e + 4)].sort()).toEqual([6, 7, 8, 9]);
    expect(s.metrics).toEqual({
      'curriculum/stage': 2,
      'curriculum/easy': 0.25,
      'curriculum/hard': 0.25,
      'curriculum/rare': 0.5,
    });
    // The cursors are the checkpoint's: hard walked 32 rows of 4, the end of its epoch 7 (the
    // cursor moves to the next epoch when it next takes a row).
    expect((state.extra!.curriculum as Record<string, unknown>).hard).toEqual({
      epoch: 7,
      data_cursor: 4,
    });
    expect(s.epochs).toBeCloseTo(48 / 12, 12);
  });

  it('a sampler restored from a checkpoint’s state asks what the uninterrupted one would have', () => {
    const a = fresh();
    const whole = querySampler(rows, { seed: 3, shuffle_dataset: true, curriculum }, a);
    const expected = Array.from({ length: 7 }, (_, b) => whole.take(b, b, 5).map((r) => r.id));

    const b = fresh();
    const first = querySampler(rows, { seed: 3, shuffle_dataset: true, curriculum }, b);
    for (let i = 0; i < 3; i++) first.take(i, i, 5);
    const saved: TrainerState = JSON.parse(JSON.stringify(b)); // as checkpoint.json stores it
    const resumed = querySampler(rows, { seed: 3, shuffle_dataset: true, curriculum }, saved);
    const rest = [3, 4, 5, 6].map((i) => resumed.take(i, i, 5).map((r) => r.id));
    expect(rest).toEqual(expected.slice(3));
  });

  it('apportion: whole shares exactly, the remainder drawn by what is left of each share', () => {
    // 8 × {1, 1, 1}: 2 each and 2 more to two different sources (never twice to one).
    const rng = createRng('apportion');
    const tally = new Map<string, number>();
    for (let i = 0; i < 3000; i++) {
      const n = apportion({ a: 1, b: 1, c: 1 }, 8, rng);
      expect([...n.values()].reduce((x, y) => x + y)).toBe(8);
      for (const [k, v] of n) {
        expect(v === 2 || v === 3).toBe(true);
        tally.set(k, (tally.get(k) ?? 0) + v);
      }
    }
    // The expected count of each is exactly 8/3 per call (binomial spread: ±3σ ≈ ±40 of 8000).
    for (const v of tally.values()) expect(Math.abs(v - 8000)).toBeLessThan(80);
    // A zero weight gets nothing.
    expect(apportion({ a: 0, b: 2 }, 5, rng)).toEqual(new Map([['b', 5]]));
  });

  it('refuses a config it cannot follow, naming the key', () => {
    const err = (c: unknown) => {
      try {
        parseConfig(GRPOConfigSchema, cfg({ curriculum: c }), 'GRPO config');
      } catch (e) {
        expect(ConfigError.isInstance(e)).toBe(true);
        return (e as Error).message;
      }
      throw new Error('accepted');
    };
    expect(err({ stages: [{ weights: { a: 1 } }, { weights: { b: 1 } }] })).toMatch(
      /curriculum\.stages\.0\.until_step.*needs until_step/,
    );
    expect(err({ stages: [{ until_step: 5, weights: { a: 1 } }] })).toMatch(
      /last stage runs to the end/,
    );
    expect(
      err({
        stages: [
          { until_step: 5, weights: { a: 1 } },
          { until_step: 5, weights: { a: 1 } },
          { weights: { a: 1 } },
        ],
      }),
    ).toMatch(/must grow/);
    expect(err({ stages: [{ weights: { a: 0 } }] })).toMatch(/weight above 0/);
    // A source the dataset lacks (a typo) and rows without the column: when the sampler starts.
    const typo = CurriculumSchema.parse({ column: 'kind', stages: [{ weights: { hrad: 1 } }] });
    expect(() =>
      querySampler(rows, { seed: 1, shuffle_dataset: true, curriculum: typo }, fresh()),
    ).toThrow(
      /names "hrad", a source no row of the train dataset has \(kind: "easy", "hard", "rare"\)/,
    );
    const noColumn = CurriculumSchema.parse({ column: 'level', stages: [{ weights: { a: 1 } }] });
    expect(() =>
      querySampler(rows, { seed: 1, shuffle_dataset: true, curriculum: noColumn }, fresh()),
    ).toThrow(/row 1 of the train dataset has no "level"/);
  });
});

describe('a GRPO run with a curriculum (tiny demo setup)', () => {
  it('asks the sources each stage names, and logs the stage and the shares', async () => {
    const trainer = await tinyTrainer(
      root,
      tinyConfig(join(root, 'run'), {
        queries_per_step: 4,
        num_generations: 2,
        max_steps: 3,
        curriculum: {
          column: 'level',
          stages: [{ until_step: 2, weights: { '1': 1 } }, { weights: { '2': 1, '3': 1 } }],
        },
      }),
    );
    const result = await trainer.train();
    const steps = result.metrics.filter((m) => typeof m.reward === 'number');
    expect(steps.map((m) => m['curriculum/stage'])).toEqual([0, 0, 1]);
    expect(steps.map((m) => m['curriculum/1'])).toEqual([1, 1, 0]);
    expect(steps.map((m) => m['curriculum/3'])).toEqual([0, 0, 0.5]);
    // The rollouts' questions: level 1 only in steps 1–2, levels 2 and 3 half each in step 3.
    const levels = async (step: number) => {
      const file = join(root, 'run', 'rollouts', `step-${String(step).padStart(6, '0')}.parquet`);
      return (await readTrajectoriesParquet(file)).map((t) =>
        /^(In which|What happened in \d)/.test(t.question ?? ''),
      );
    };
    expect(await levels(1)).toEqual(Array(8).fill(true));
    expect((await levels(3)).filter(Boolean)).toHaveLength(0);
  }, 120_000);
});
