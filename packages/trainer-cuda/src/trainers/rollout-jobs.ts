import { createRng, type SampleRow } from '@flowgrpo/core';

/** One rollout of a step: the g-th of G samples of question q (`row`), and its sampling seed. */
export interface RolloutJob {
  row: SampleRow;
  q: number;
  g: number;
  seed: number;
}

/**
 * A step's rollouts, G per question in the batch's order, each with its own seed drawn from the
 * run's seed and the batch index alone — so a resumed run samples exactly what the uninterrupted
 * one did, whatever order the rollouts finish in. Every GRPO trainer seeds its rollouts here.
 */
export function rolloutJobs(
  runSeed: number,
  batch: number,
  rows: readonly SampleRow[],
  G: number,
): RolloutJob[] {
  const base = createRng(`${runSeed}:rollouts:${batch}`).nextUint32();
  return rows.flatMap((row, q) =>
    Array.from({ length: G }, (_, g) => ({ row, q, g, seed: base + q * G + g })),
  );
}
