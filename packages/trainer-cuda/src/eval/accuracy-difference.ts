import type { EvalResult } from './evaluate.js';

// "GRPO − SFT: +3.1 points" reads as a win even when the two accuracies' 95% intervals overlap
// and the difference may be noise (a --quick run evaluates few questions). Every printed
// comparison — the demo's console lines, `flowgrpo eval`'s, report.html's — comes from here, so
// they all say "inconclusive" on the same rule. Overlapping Wilson intervals is the conservative
// rule: a difference it calls clear is clear.

export interface AccuracyDifference {
  /** The policy compared, and the one it is compared with. */
  name: string;
  baseline: string;
  /** 100 × (accuracy − baseline accuracy). */
  points: number;
  /** The two 95% intervals overlap: the data do not tell the policies apart. */
  inconclusive: boolean;
}

type Evaluated = Pick<EvalResult, 'name' | 'accuracy' | 'accuracy_ci95'>;

export function accuracyDifference(policy: Evaluated, baseline: Evaluated): AccuracyDifference {
  const [a0, a1] = policy.accuracy_ci95;
  const [b0, b1] = baseline.accuracy_ci95;
  return {
    name: policy.name,
    baseline: baseline.name,
    points: 100 * (policy.accuracy - baseline.accuracy),
    inconclusive: a0 <= b1 && b0 <= a1,
  };
}

export const INCONCLUSIVE = 'inconclusive: the 95% intervals overlap';

/** "GRPO − SFT: 27.2 points", with ", inconclusive: …" when the intervals overlap. */
export function formatAccuracyDifference(
  d: AccuracyDifference,
  labels: { name?: string; baseline?: string } = {},
): string {
  return (
    `${labels.name ?? d.name} − ${labels.baseline ?? d.baseline}: ${d.points.toFixed(1)} points` +
    (d.inconclusive ? `, ${INCONCLUSIVE}` : '')
  );
}
