import { createRng } from '@flowgrpo/core';

// The order trainers read their dataset in: a seeded permutation per epoch, walked by a cursor
// that checkpoints store (epoch, data_cursor) — so a resumed run reads exactly the examples the
// uninterrupted run would have.

/** The dataset order of one epoch. */
export function epochOrder(n: number, seed: number, epoch: number): number[] {
  return createRng(`${seed}:epoch:${epoch}`).shuffle(Array.from({ length: n }, (_, i) => i));
}

/** Walks epochs of a dataset of `n` examples; `position` is what a checkpoint stores. */
export class EpochCursor {
  #order: number[] | undefined;
  #orderEpoch = -1;

  constructor(
    readonly n: number,
    readonly seed: number,
    readonly position: { epoch: number; data_cursor: number },
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
        this.#order = epochOrder(this.n, this.seed, this.position.epoch);
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
