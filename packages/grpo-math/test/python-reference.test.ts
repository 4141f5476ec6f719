import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'vitest';
import {
  broadcastAdvantages,
  computeAdvantages,
  grpoLoss,
  LOSS_AGGREGATIONS,
} from '../src/index.js';
import { expectAllClose, expectClose } from './close.js';

// Expected values come from a real python3 process running fixtures/reference_grpo.py, a
// plain-Python implementation written from the formulas on the padded [seq][pos] view, with the
// standard library's statistics.stdev for the unbiased stds.
const script = fileURLToPath(new URL('./fixtures/reference_grpo.py', import.meta.url));
const hasPython = spawnSync('python3', ['--version']).status === 0;

function lcg(seed: number) {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

function makeCase(seed: number, clipRatioC: number | undefined) {
  const rnd = lcg(seed);
  const groupSize = 4;
  const numSeqs = 12;
  // Group 1 has identical rewards (zero variance); the rest are 0/1/0.5 mixes.
  const rewards = Array.from({ length: numSeqs }, (_, i) =>
    i >= 4 && i < 8 ? 1 : [0, 0.5, 1][Math.floor(rnd() * 3)],
  );
  const mask: number[] = [];
  const seqIndex: number[] = [];
  const turnIndex: number[] = [];
  const logp: number[] = [];
  const oldLogp: number[] = [];
  const refLogp: number[] = [];
  for (let s = 0; s < numSeqs; s++) {
    const turns = 1 + Math.floor(rnd() * 3);
    for (let t = 0; t < turns; t++) {
      const len = 1 + Math.floor(rnd() * 5);
      for (let k = 0; k < len; k++) {
        mask.push(k === 0 && t > 0 ? 0 : 1); // an observation-like token starts later turns
        seqIndex.push(s);
        turnIndex.push(t);
        const lp = -3 * rnd();
        logp.push(lp);
        // log-ratios within ±1.2 (ρ ∈ [0.30, 3.3]): both clip bounds and the dual-clip cap are hit.
        // The ±20 clamp is left to the hand-derived tests: here an e^20 term would swamp the rest.
        oldLogp.push(lp - 2.4 * (rnd() - 0.5));
        refLogp.push(lp + (rnd() - 0.5));
      }
    }
  }
  return {
    rewards,
    groupSize,
    mask,
    seqIndex,
    turnIndex,
    logp,
    oldLogp,
    refLogp,
    clipLow: 0.2,
    clipHigh: 0.28,
    clipRatioC,
    beta: 0.04,
  };
}

describe.skipIf(!hasPython)('agreement with a Python reference (python3 subprocess)', () => {
  for (const [seed, clipRatioC] of [
    [11, 2],
    [12, undefined],
  ] as const) {
    it(`seed ${seed}, dual-clip ${clipRatioC ?? 'off'}: advantages and every aggregation, every scale`, () => {
      const c = makeCase(seed, clipRatioC);
      // JSON has no undefined: the script reads a missing clipRatioC as null (no dual-clip).
      const run = spawnSync('python3', [script], {
        input: JSON.stringify({ ...c, clipRatioC: c.clipRatioC ?? null }),
        encoding: 'utf8',
      });
      if (run.status !== 0) throw new Error(run.stderr);
      const ref = JSON.parse(run.stdout) as Record<
        string,
        { advantages: number[]; loss: Record<string, number>; kl: number }
      >;
      const layout = {
        mask: Uint8Array.from(c.mask),
        seqIndex: Int32Array.from(c.seqIndex),
        turnIndex: Int32Array.from(c.turnIndex),
      };
      for (const scale of ['group', 'batch', 'none'] as const) {
        const adv = computeAdvantages(c.rewards, c.groupSize, { scale });
        expectAllClose(adv, ref[scale].advantages, 1e-9);
        for (const aggregation of LOSS_AGGREGATIONS) {
          const r = grpoLoss(
            {
              layout,
              logp: Float64Array.from(c.logp),
              oldLogp: Float64Array.from(c.oldLogp),
              refLogp: Float64Array.from(c.refLogp),
              advantages: broadcastAdvantages(adv, layout.seqIndex),
            },
            {
              clipLow: c.clipLow,
              clipHigh: c.clipHigh,
              clipRatioC: c.clipRatioC,
              beta: c.beta,
              aggregation,
            },
          );
          expectClose(r.loss, ref[scale].loss[aggregation], 1e-9);
          expectClose(r.kl!, ref[scale].kl, 1e-9);
        }
      }
    });
  }
});
