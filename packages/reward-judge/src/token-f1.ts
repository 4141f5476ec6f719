import { type GoldSplitOptions, maxOverGolds, splitGoldAnswers } from './gold-answers.js';
import { pySplit, pyStrip } from './python-text.js';
import type { RewardFunction, RewardInput, RewardResult } from './reward-function.js';
import { squadTokens } from './squad-normalize.js';

function harmonic(common: number, predLen: number, goldLen: number): number {
  if (common === 0) return 0;
  const precision = common / predLen;
  const recall = common / goldLen;
  return (2 * precision * recall) / (precision + recall);
}

/**
 * SQuAD v1.1 token F1: tokens of the normalised strings, overlap counted as a multiset
 * intersection (Counter `&`), so a repeated token only matches as often as it occurs in both.
 * No overlap (including two empty answers) scores 0, as in v1.1.
 */
export function squadF1(prediction: string, gold: string): number {
  const pred = squadTokens(prediction);
  const ref = squadTokens(gold);
  const counts = new Map<string, number>();
  for (const t of ref) counts.set(t, (counts.get(t) ?? 0) + 1);
  let common = 0;
  for (const t of pred) {
    const left = counts.get(t) ?? 0;
    if (left > 0) {
      common++;
      counts.set(t, left - 1);
    }
  }
  return harmonic(common, pred.length, ref.length);
}

/**
 * The AReaL search-agent seed's F1 ("set F1"). It differs from SQuAD's in three ways: the only
 * normalisation is strip + lower-case (punctuation and articles stay, so "Bond." ≠ "Bond" and "the"
 * counts); tokens are deduplicated into sets before overlap, so repeats count once in precision
 * and recall; an empty prediction or gold scores 0.
 */
export function setTokenF1(prediction: string, gold: string): number {
  const pred = new Set(pySplit(pyStrip(prediction).toLowerCase()));
  const ref = new Set(pySplit(pyStrip(gold).toLowerCase()));
  if (pred.size === 0 || ref.size === 0) return 0;
  let common = 0;
  for (const t of pred) if (ref.has(t)) common++;
  return harmonic(common, pred.size, ref.size);
}

export function squadF1Max(prediction: string, golds: readonly string[]): number {
  return maxOverGolds(golds, (g) => squadF1(prediction, g)).score;
}

export function setTokenF1Max(prediction: string, golds: readonly string[]): number {
  return maxOverGolds(golds, (g) => setTokenF1(prediction, g)).score;
}

export interface TokenF1Details {
  golds: string[];
  /** Index of the gold giving the maximum (first one on ties). */
  bestGold: number;
  perGold: number[];
}

export interface TokenF1RewardOptions extends GoldSplitOptions {
  name?: string;
  /** `'squad'` (default): Counter-based SQuAD F1; `'set'`: the AReaL seed's set-based F1. */
  variant?: 'squad' | 'set';
}

/** Token F1 of the final answer, maximised over the golds. */
export function tokenF1Reward(options: TokenF1RewardOptions = {}): RewardFunction<TokenF1Details> {
  const variant = options.variant ?? 'squad';
  const f1 = variant === 'set' ? setTokenF1 : squadF1;
  return {
    name: options.name ?? (variant === 'set' ? 'set_f1' : 'f1'),
    score(input: RewardInput): RewardResult<TokenF1Details> {
      const golds = splitGoldAnswers(input.groundTruth, options);
      const perGold = golds.map((g) => f1(input.finalAnswer, g));
      let best = 0;
      let bestGold = 0;
      perGold.forEach((s, i) => {
        if (s > best) {
          best = s;
          bestGold = i;
        }
      });
      return { score: best, details: { golds, bestGold, perGold } };
    },
  };
}
