import { createRng } from '@flowgrpo/core';

// The order trainers read their dataset in: a seeded permutation per epoch (or the file's own
// order, TRL's `shuffle_dataset: false`), walked by a cursor that checkpoints store (epoch,
// data_cursor) — so a resumed run reads exactly the examples the uninterrupted run would have.

/** The dataset order of one epoch: a seeded permutation, or 0 … n−1 when `shuffle` is false. */
export function epochOrder(
  n: number,
  seed: number | string,
  epoch: number,
  shuffle = true,
): number[] {
  const order = Array.from({ length: n }, (_, i) => i);
  return shuffle ? createRng(`${seed}:epoch:${epoch}`).shuffle(order) : order;
}

/** Walks epochs of a dataset of `n` examples; `position` is what a checkpoint stores. */
export class EpochCursor {
  #order: number[] | undefined;
  #orderEpoch = -1;

  constructor(
    readonly n: number,
    readonly seed: number | string,
    readonly position: { epoch: number; data_cursor: number },
    readonly shuffle = true,
  ) {}

  /** The next `count` example indices (crossing into the next epoch when one runs out). */
  take(count: number): number[] {
    const out: number[] = [];
    while (out.length < count) {
      if (this.position.data_cursor >= this.n) {
        this.position.epoch++;
        this.position.data_cursor = 0;
      }
      if (this.#orderEpoch !== this.position.epoch) {
        this.#order = epochOrder(this.n, this.seed, this.position.epoch, this.shuffle);
        this.#orderEpoch = this.position.epoch;
      }
      out.push(this.#order![this.position.data_cursor++]!);
    }
    return out;
  }

  /** Fractional epochs done (HF's `epoch`). */
  get epochs(): number {
    return this.position.epoch + this.position.data_cursor / this.n;
  }
}
