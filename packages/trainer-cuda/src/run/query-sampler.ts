import { ConfigError, createRng, type SampleRow } from '@flowgrpo/core';
import { z } from 'zod';
import type { TrainerState } from './checkpoint.js';
import { EpochCursor } from './data-order.js';

// Which questions a GRPO step asks. Without a curriculum: the next `queries_per_step` rows of the
// dataset, in a seeded permutation per epoch (or in the file's order with TRL's
// `shuffle_dataset: false`). With one: the rows are grouped by a source column, and each step
// asks each source a share of its questions set by the curriculum's stage for that step — a
// sampling weight per source that changes over steps, as `interleave_datasets(probabilities=…)`
// mixes sources in HF datasets, but scheduled. Each source is walked by its own cursor, so a
// source asked rarely is not skipped over; the cursors live in the checkpoint's trainer state, so
// a resumed run asks exactly the questions the uninterrupted run would have.

const weight = z.number().nonnegative();

/**
 * The `curriculum` config key: `column` names each row's source (`source`, or a key of the row's
 * `extra_info`); `stages` run in order, each until `until_step` (the optimizer step at which the
 * next stage starts), the last one to the end.
 */
export const CurriculumSchema = z
  .object({
    column: z.string().min(1).default('source'),
    stages: z
      .array(
        z
          .object({
            until_step: z.number().int().positive().optional(),
            weights: z.record(z.string(), weight),
          })
          .strict(),
      )
      .min(1),
  })
  .strict()
  .superRefine((c, ctx) => {
    c.stages.forEach((s, i) => {
      const last = i === c.stages.length - 1;
      if (last !== (s.until_step === undefined))
        ctx.addIssue({
          code: 'custom',
          path: ['stages', i, 'until_step'],
          message: last
            ? 'the last stage runs to the end of the run: leave out until_step'
            : 'every stage but the last needs until_step (the step at which the next one starts)',
        });
      const prev = c.stages[i - 1]?.until_step;
      if (s.until_step !== undefined && prev !== undefined && s.until_step <= prev)
        ctx.addIssue({
          code: 'custom',
          path: ['stages', i, 'until_step'],
          message: `until_step must grow from stage to stage (${prev}, then ${s.until_step})`,
        });
      if (!Object.values(s.weights).some((w) => w > 0))
        ctx.addIssue({
          code: 'custom',
          path: ['stages', i, 'weights'],
          message: 'at least one source needs a weight above 0',
        });
    });
  });
export type Curriculum = z.output<typeof CurriculumSchema>;
export type CurriculumInput = z.input<typeof CurriculumSchema>;

/** A row's source under `column`: the row's own field, else its extra_info's. */
export function rowSource(row: SampleRow, column: string): string | undefined {
  const own = (row as unknown as Record<string, unknown>)[column];
  const v = own ?? row.extra_info?.[column];
  return v === undefined || v === null ? undefined : String(v);
}

/** Where each source's cursor stands (the checkpoint's `extra.curriculum`). */
type Positions = Record<string, { epoch: number; data_cursor: number }>;

export interface QuerySampler {
  /** The rows of the next step, which starts at optimizer step `step` (0-based). */
  take(step: number, batch: number, count: number): SampleRow[];
  /** Fractional epochs done (HF's `epoch`): rows asked so far over the dataset's size. */
  readonly epochs: number;
  /** Metrics of the last take: the stage and each source's share of it (curriculum only). */
  readonly metrics: Record<string, number>;
}

/**
 * The step's questions: from `state`'s cursor (epoch, data_cursor) without a curriculum; with one,
 * from per-source cursors kept in `state.extra.curriculum`.
 */
export function querySampler(
  rows: readonly SampleRow[],
  c: { seed: number; shuffle_dataset: boolean; curriculum?: Curriculum | undefined },
  state: TrainerState,
): QuerySampler {
  if (!c.curriculum) {
    const cursor = new EpochCursor(rows.length, c.seed, state, c.shuffle_dataset);
    return {
      take: (_step, _batch, count) => cursor.take(count).map((i) => rows[i]!),
      get epochs() {
        return cursor.epochs;
      },
      metrics: {},
    };
  }
  return curriculumSampler(rows, c.curriculum, c.seed, c.shuffle_dataset, state);
}

function curriculumSampler(
  rows: readonly SampleRow[],
  cur: Curriculum,
  seed: number,
  shuffle: boolean,
  state: TrainerState,
): QuerySampler {
  // The dataset's rows by source, in file order.
  const bySource = new Map<string, number[]>();
  rows.forEach((row, i) => {
    const s = rowSource(row, cur.column);
    if (s === undefined)
      throw new ConfigError(
        `curriculum: row ${i + 1} of the train dataset has no "${cur.column}" (curriculum.column names the field that says each row's source, on the row or in its extra_info)`,
        { key: 'curriculum.column' },
      );
    if (!bySource.has(s)) bySource.set(s, []);
    bySource.get(s)!.push(i);
  });
  const known = [...bySource.keys()];
  cur.stages.forEach((stage, i) => {
    for (const name of Object.keys(stage.weights))
      if (!bySource.has(name))
        throw new ConfigError(
          `curriculum.stages[${i}].weights names "${name}", a source no row of the train dataset has (${cur.column}: ${known.map((k) => JSON.stringify(k)).join(', ')})`,
          { key: `curriculum.stages.${i}.weights` },
        );
  });
  const saved = (state.extra?.curriculum ?? {}) as Positions;
  const positions: Positions = {};
  const cursors = new Map<string, EpochCursor>();
  for (const [name, members] of bySource) {
    positions[name] = { ...(saved[name] ?? { epoch: 0, data_cursor: 0 }) };
    cursors.set(
      name,
      new EpochCursor(members.length, `${seed}:source:${name}`, positions[name]!, shuffle),
    );
  }
  let asked = Object.values(positions).reduce(
    (sum, p, i) => sum + p.epoch * bySource.get(known[i]!)!.length + p.data_cursor,
    0,
  );
  let metrics: Record<string, number> = {};
  return {
    take(step, batch, count) {
      const stageIndex = cur.stages.findIndex(
        (s) => s.until_step === undefined || step < s.until_step,
      );
      const stage = cur.stages[stageIndex]!;
      const counts = apportion(stage.weights, count, createRng(`${seed}:curriculum:${batch}`));
      const out: SampleRow[] = [];
      // Sources in the dataset's order, so the batch's order does not depend on the config's.
      for (const name of known) {
        const n = counts.get(name) ?? 0;
        if (n === 0) continue;
        const members = bySource.get(name)!;
        for (const k of cursors.get(name)!.take(n)) out.push(rows[members[k]!]!);
      }
      asked += count;
      state.extra = { ...state.extra, curriculum: positions };
      metrics = {
        'curriculum/stage': stageIndex,
        ...Object.fromEntries(
          known.map((name) => [`curriculum/${name}`, (counts.get(name) ?? 0) / count]),
        ),
      };
      return out;
    },
    get epochs() {
      return asked / rows.length;
    },
    get metrics() {
      return metrics;
    },
  };
}

/**
 * `count` questions shared out by `weights`: each source gets the whole part of its share, and the
 * remaining questions go to sources drawn with probability proportional to what their shares
 * left over (so the expected count is exactly the weighted share, with the least spread).
 */
export function apportion(
  weights: Readonly<Record<string, number>>,
  count: number,
  rng: { next(): number },
): Map<string, number> {
  const names = Object.keys(weights).filter((k) => weights[k]! > 0);
  const total = names.reduce((s, k) => s + weights[k]!, 0);
  const out = new Map<string, number>();
  const rest = new Map<string, number>();
  let given = 0;
  for (const k of names) {
    const share = (count * weights[k]!) / total;
    out.set(k, Math.floor(share));
    rest.set(k, share - Math.floor(share));
    given += Math.floor(share);
  }
  for (; given < count; given++) {
    const left = [...rest.entries()].filter(([, r]) => r > 0);
    const sum = left.reduce((s, [, r]) => s + r, 0);
    let u = rng.next() * sum;
    let pick = left.at(-1)![0];
    for (const [k, r] of left) {
      if (u < r) {
        pick = k;
        break;
      }
      u -= r;
    }
    out.set(pick, out.get(pick)! + 1);
    rest.set(pick, 0);
  }
  return out;
}
