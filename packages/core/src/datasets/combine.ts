import { createRng } from '../rng.js';
import type { SampleRow } from '../sample-row.js';

/** The seed the seeds' data preparation shuffles with. */
export const DEFAULT_DATA_SEED = 42;

/** Seeded in-place-free shuffle: returns a new array, `rows` is left as it was. */
export function shuffleRows<T>(rows: readonly T[], seed: number | bigint | string): T[] {
  // A labelled fork keeps this stream apart from any other use of the same seed number.
  const order = createRng(seed).fork('datasets.shuffle').permutation(rows.length);
  return Array.from(order, (i) => rows[i]);
}

/** Copies of the rows with ids 0..N-1 in their current order (extra_info.idx is untouched). */
export function reindexRows(rows: readonly SampleRow[]): SampleRow[] {
  return rows.map((row, id) => ({ ...row, id }));
}

export interface CombineDatasetsOptions {
  /** Shuffle seed (default 42). */
  seed?: number | bigint | string;
  /** Set false to keep the concatenation order (default true). */
  shuffle?: boolean;
}

/**
 * The seeds' training-mix recipe: concatenate normalised sets, shuffle with a fixed seed so the
 * sources interleave (otherwise the model sees all of one set first), then renumber ids 0..N-1
 * because per-source ids collide. Each row keeps `source` and `extra_info.idx` to trace it back.
 * The order is reproducible for a given seed, but it is this library's PRNG, not the order
 * HF `datasets.shuffle(seed=42)` would produce.
 */
export function combineDatasets(
  parts: readonly (readonly SampleRow[])[],
  options: CombineDatasetsOptions = {},
): SampleRow[] {
  const all = parts.flat();
  const ordered =
    options.shuffle === false ? all : shuffleRows(all, options.seed ?? DEFAULT_DATA_SEED);
  return reindexRows(ordered);
}

/** Number of rows per `source` tag, in first-seen order. */
export function countBySource(rows: Iterable<SampleRow>): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const row of rows) counts[row.source] = (counts[row.source] ?? 0) + 1;
  return counts;
}
