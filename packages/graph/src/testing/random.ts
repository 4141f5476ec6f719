import { tensor } from '../ir/tensor.js';
import type { HostTensor } from '../ir/types.js';

/**
 * A tiny seeded uniform generator on [0, 1) (a 32-bit LCG): deterministic test data that needs no
 * state object. Not for sampling — use @flowgrpo/core's createRng there.
 */
export function testRandom(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

/** A float32 tensor (values rounded to float32) drawn uniformly from [lo, hi). */
export function randomTensor(
  random: () => number,
  shape: readonly number[],
  lo = -1,
  hi = 1,
): HostTensor {
  const n = shape.reduce((p, d) => p * d, 1);
  return tensor(
    'float32',
    shape,
    Array.from({ length: n }, () => Math.fround(lo + (hi - lo) * random())),
  );
}
