import { ConfigError } from '@flowgrpo/core';
import type { RewardFunction, RewardInput, RewardResult } from './reward-function.js';

export interface WeightedReward {
  fn: RewardFunction<object>;
  weight: number;
}

export interface CombinedDetails {
  /** Each component's own (unweighted) score by name: the trainer logs `rewards/<name>/mean`. */
  scores: Record<string, number>;
  weights: Record<string, number>;
  details: Record<string, object>;
}

export interface CombineOptions {
  name?: string;
  /** Divide the weighted sum by the sum of weights (default false: TRL's `reward_weights` sum). */
  normalize?: boolean;
}

/**
 * Σ weight_i · score_i over the components, all scored concurrently. Names must be unique since
 * they key the per-function metrics.
 */
export function combineRewards(
  components: readonly WeightedReward[],
  options: CombineOptions = {},
): RewardFunction<CombinedDetails> {
  if (components.length === 0) throw new ConfigError('no reward functions to combine');
  const names = components.map((c) => c.fn.name);
  const dup = names.find((n, i) => names.indexOf(n) !== i);
  if (dup !== undefined) throw new ConfigError(`reward name ${dup} appears twice`, { key: dup });
  for (const c of components) {
    if (!Number.isFinite(c.weight))
      throw new ConfigError(`weight of ${c.fn.name} is not finite`, { key: c.fn.name });
  }
  const weightSum = components.reduce((s, c) => s + c.weight, 0);
  if (options.normalize && weightSum === 0)
    throw new ConfigError('weights sum to 0 and normalize is set', { key: 'normalize' });
  return {
    name: options.name ?? 'combined',
    async score(input: RewardInput): Promise<RewardResult<CombinedDetails>> {
      const results = await Promise.all(components.map(async (c) => c.fn.score(input)));
      const scores: Record<string, number> = {};
      const weights: Record<string, number> = {};
      const details: Record<string, object> = {};
      let total = 0;
      results.forEach((r, i) => {
        const c = components[i]!;
        scores[c.fn.name] = r.score;
        weights[c.fn.name] = c.weight;
        details[c.fn.name] = r.details;
        total += c.weight * r.score;
      });
      return {
        score: options.normalize ? total / weightSum : total,
        details: { scores, weights, details },
      };
    },
  };
}

/** Scores many inputs with one function; the function's own limits bound its concurrency. */
export async function scoreAll<D extends object>(
  fn: RewardFunction<D>,
  inputs: readonly RewardInput[],
): Promise<RewardResult<D>[]> {
  return Promise.all(inputs.map(async (input) => fn.score(input)));
}

function meanStd(xs: readonly number[]): { mean: number; std: number } {
  const mean = xs.reduce((s, x) => s + x, 0) / xs.length;
  if (xs.length < 2) return { mean, std: 0 };
  const ss = xs.reduce((s, x) => s + (x - mean) ** 2, 0);
  return { mean, std: Math.sqrt(ss / (xs.length - 1)) };
}

/**
 * Per-function metrics over a batch, named as TRL logs them: `rewards/<name>/mean` and
 * `rewards/<name>/std` (unbiased sample std; 0 for a single sample). Results of a combination
 * yield one pair per component (from `details.scores`); any other results yield one pair under
 * `name`.
 */
export function rewardMetrics(
  results: readonly RewardResult<object>[],
  name = 'reward',
): Record<string, number> {
  const columns = new Map<string, number[]>();
  for (const r of results) {
    const scores = (r.details as Partial<CombinedDetails>).scores;
    const entries = scores ? Object.entries(scores) : [[name, r.score] as const];
    for (const [k, v] of entries) {
      const col = columns.get(k) ?? [];
      col.push(v);
      columns.set(k, col);
    }
  }
  const out: Record<string, number> = {};
  for (const [k, col] of columns) {
    const { mean, std } = meanStd(col);
    out[`rewards/${k}/mean`] = mean;
    out[`rewards/${k}/std`] = std;
  }
  return out;
}
