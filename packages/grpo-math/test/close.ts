import { expect } from 'vitest';

/** |actual − expected| ≤ rel·|expected|; an expected 0 must come out within 1e-12. */
export function expectClose(actual: number, expected: number, rel = 1e-6): void {
  const tol = expected === 0 ? 1e-12 : rel * Math.abs(expected);
  if (!(Math.abs(actual - expected) <= tol)) {
    expect.fail(`expected ${actual} to be within ${rel} (relative) of ${expected}`);
  }
}

export function expectAllClose(actual: ArrayLike<number>, expected: readonly number[], rel = 1e-6) {
  expect(actual.length).toBe(expected.length);
  for (let i = 0; i < expected.length; i++) expectClose(actual[i], expected[i], rel);
}
