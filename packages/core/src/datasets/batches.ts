import { ConfigError } from '../errors.js';
import { createRng } from '../rng.js';

export interface BatchPosition {
  /** 0-based epoch. */
  epoch: number;
  /** 0-based step within the epoch. */
  step: number;
}

export interface BatchOptions {
  batchSize: number;
  /** Passes over the data (default 1; Infinity for an endless stream). */
  epochs?: number;
  /** Reshuffle every epoch (default true); false keeps the input order. */
  shuffle?: boolean;
  /** Seed of the per-epoch orders (default 0). */
  seed?: number | bigint | string;
  /** Drop each epoch's last, short batch (default false). */
  dropLast?: boolean;
  /** Resume here: the first batch yielded is this (epoch, step). */
  start?: BatchPosition;
}

export interface Batch<T> extends BatchPosition {
  /** Steps taken before this batch, counting every epoch. */
  globalStep: number;
  /** Positions of `rows` in the input array. */
  indices: Int32Array;
  rows: T[];
}

/** Batches per epoch for `n` rows. */
export function stepsPerEpoch(n: number, batchSize: number, dropLast = false): number {
  return dropLast ? Math.floor(n / batchSize) : Math.ceil(n / batchSize);
}

/**
 * The row order of one epoch. Each epoch's permutation comes from its own stream, derived from
 * the seed and the epoch number alone, so resuming at epoch e needs no replay of epochs 0..e-1.
 */
export function epochOrder(
  n: number,
  epoch: number,
  options: { shuffle?: boolean; seed?: number | bigint | string } = {},
): Int32Array {
  if (options.shuffle === false) return Int32Array.from({ length: n }, (_, i) => i);
  return createRng(options.seed ?? 0)
    .fork('datasets.batches')
    .fork(`epoch:${epoch}`)
    .permutation(n);
}

function checkInteger(value: number, key: string, min: number, allowInfinity = false): void {
  const ok =
    (allowInfinity && value === Number.POSITIVE_INFINITY) ||
    (Number.isInteger(value) && value >= min);
  if (!ok) throw new ConfigError(`${key} must be an integer >= ${min}, got ${value}`, { key });
}

/**
 * Yields `{ epoch, step, globalStep, indices, rows }` batches over `rows` for `epochs` passes,
 * reshuffled each epoch (see epochOrder). With `start`, iteration begins at that position
 * and yields exactly what an uninterrupted run would have yielded from there on.
 */
export function* batches<T>(rows: readonly T[], options: BatchOptions): Generator<Batch<T>> {
  const { batchSize, epochs = 1, dropLast = false } = options;
  checkInteger(batchSize, 'batchSize', 1);
  checkInteger(epochs, 'epochs', 0, true);
  const perEpoch = stepsPerEpoch(rows.length, batchSize, dropLast);
  const start = options.start ?? { epoch: 0, step: 0 };
  checkInteger(start.epoch, 'start.epoch', 0);
  checkInteger(start.step, 'start.step', 0);
  if (start.step > perEpoch) {
    throw new ConfigError(`start.step ${start.step} is past the ${perEpoch} steps of an epoch`, {
      key: 'start.step',
    });
  }
  if (perEpoch === 0) return;
  for (let epoch = start.epoch; epoch < epochs; epoch++) {
    const order = epochOrder(rows.length, epoch, options);
    for (let step = epoch === start.epoch ? start.step : 0; step < perEpoch; step++) {
      const indices = order.subarray(
        step * batchSize,
        Math.min((step + 1) * batchSize, rows.length),
      );
      yield {
        epoch,
        step,
        globalStep: epoch * perEpoch + step,
        indices,
        rows: Array.from(indices, (i) => rows[i]),
      };
    }
  }
}

/** The position after `batch`: where a resumed run picks up. */
export function nextBatchPosition(batch: BatchPosition, perEpoch: number): BatchPosition {
  return batch.step + 1 < perEpoch
    ? { epoch: batch.epoch, step: batch.step + 1 }
    : { epoch: batch.epoch + 1, step: 0 };
}
