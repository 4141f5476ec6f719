import type { LossAggregation } from '@flowgrpo/grpo';
import { type GRPOConfig, learningRateAt } from '../run/config.js';
import {
  aggregationWeights,
  applyImportanceWeights,
  type UpdateResult,
  updateHyperParams,
} from './lora-policy.js';
import type { NonFiniteGuard } from './non-finite-guard.js';
import type { TrainablePolicy } from './policy-worker.js';
import type { ScoredBatch } from './scored-batch.js';

// The GRPO update of one adapter from one ScoredBatch (scored-batch.ts) — TRL's `_compute_loss`
// loop, the same for every trainer:
//
//   old log-probs   the first update's own forward, detached (TRL's old_per_token_logps = None:
//                   the parameters have not moved yet), reused by the later updates on this batch;
//                   computed before it only for a per-turn importance-sampling mode, whose ratio
//                   sums over a turn that may span micro-batches (the logprobs graph gives the
//                   same bits)
//   ref log-probs   lora_scale 0, when beta ≠ 0
//   token weights   the loss type's aggregation over the whole batch, times the truncated
//                   importance weights min(π_old / π_sampled, cap) when the tokens were sampled
//                   by another engine or an earlier adapter
//
//                     wₖ = min(π_old(yₖ) / π_sampler(yₖ), vllm_importance_sampling_cap), detached
//                   (vllm_importance_sampling_mode token_truncate, or 0 above the cap with
//                   token_mask: both in the train step's graph, train-step-graph.ts; per turn,
//                   on the host: applyImportanceWeights)
//                     Lₖ = wₖ · PPO-clip(π_θ(yₖ) / π_old(yₖ), A)  (+ β·KLₖ)
//
//                   π_sampler is the per-token log-prob the sampler returned with the token (from
//                   vLLM, or from the adapter a batch sampled ahead came from: max_staleness,
//                   async-rollouts.ts); π_old is the adapter this update starts from, computed
//                   here first. TRL's vllm_importance_sampling_correction / _cap (truncated IS),
//                   verl's rollout-IS ("TIS"), and AReaL's decoupled PPO objective with π_old as
//                   its proximal policy and the sampler as its behaviour policy (arXiv 2505.24298)
//   μ updates       num_iterations optimizer steps against the same old log-probs (never past
//                   max_steps), each through the train_step graph (lora-policy.ts), each checked
//                   by the non-finite guard

/** The loss type's token aggregation (TRL's loss_type names). */
export const AGGREGATION: Record<GRPOConfig['loss_type'], LossAggregation> = {
  grpo: 'seq-mean-token-mean',
  dapo: 'token-mean',
  bnpo: 'token-mean',
  dr_grpo: 'seq-sum-norm',
  flow: 'flow',
};

/** Sampler vs trainer log-probs over the tokens whose sampled log-prob is known. */
export interface LogprobMismatch {
  sum: number;
  max: number;
  count: number;
}

export interface GrpoUpdateResult {
  /** One per optimizer step taken (a skipped one included), in order. */
  updates: UpdateResult[];
  /** The learning rate of each of `updates`. */
  learningRates: number[];
  mismatch: LogprobMismatch;
}

export interface GrpoUpdateOptions {
  config: GRPOConfig;
  /** Global steps done before this update (its first optimizer step is step + 1). */
  step: number;
  guard: NonFiniteGuard;
  /** Where a non-finite update happened, for NonFiniteLossError. */
  at: { batch: number; queryIds: string[]; who?: string };
  /** Weight tokens by min(π_old / π_sampled, cap) (default: vllm_importance_sampling_correction). */
  importanceCorrection?: boolean;
  /** Times a phase ('logprobs', 'train') into the step's timing/* metrics. */
  time?: <T>(phase: 'logprobs' | 'train', f: () => Promise<T>) => Promise<T>;
}

/** The update of a batch the filters left nothing to train on: no optimizer step. */
export function noUpdate(): GrpoUpdateResult {
  return { updates: [], learningRates: [], mismatch: { sum: 0, max: 0, count: 0 } };
}

/** num_iterations updates of `policy` on `batch` (which must have targets). */
export async function grpoUpdate(
  policy: TrainablePolicy,
  batch: ScoredBatch,
  o: GrpoUpdateOptions,
): Promise<GrpoUpdateResult> {
  const c = o.config;
  const { rows, targets } = batch;
  const time = o.time ?? ((_phase, f) => f());
  const correct = o.importanceCorrection ?? c.vllm_importance_sampling_correction;
  const mode = c.vllm_importance_sampling_mode;
  const lp = { temperature: c.temperature, maxTokensPerMicrobatch: c.max_tokens_per_microbatch };
  // A per-token mode is weighed in the train step's graph from its own π_old; a per-turn one
  // sums a turn's log-ratios, which may span micro-batches, so π_old is computed first here.
  const importance =
    correct && (mode === 'token_truncate' || mode === 'token_mask')
      ? { cap: c.vllm_importance_sampling_cap, mode }
      : undefined;
  let old =
    correct && !importance
      ? await time('logprobs', () => policy.logprobs(rows, targets, { ...lp, loraScale: 1 }))
      : undefined;
  const ref =
    c.beta !== 0
      ? await time('logprobs', () => policy.logprobs(rows, targets, { ...lp, loraScale: 0 }))
      : undefined;
  const mismatch: LogprobMismatch = { sum: 0, max: 0, count: 0 };
  const compare = (trainer: Float32Array) => {
    for (let j = 0; j < targets.count; j++) {
      const s = targets.sampleLogprob[j]!;
      if (Number.isNaN(s)) continue;
      const d = Math.abs(trainer[j]! - s);
      mismatch.sum += d;
      mismatch.max = Math.max(mismatch.max, d);
      mismatch.count++;
    }
  };
  if (old) compare(old);
  const pgWeights = aggregationWeights(targets, AGGREGATION[c.loss_type], {
    maxLen: c.max_completion_length,
  });
  if (old) applyImportanceWeights(pgWeights, old, targets, c.vllm_importance_sampling_cap, mode);

  const updates: UpdateResult[] = [];
  const learningRates: number[] = [];
  for (let it = 0; it < c.num_iterations && o.step + it < c.max_steps; it++) {
    const lr = learningRateAt(o.step + it + 1, c);
    const r = await time('train', () =>
      policy.update(
        rows,
        targets,
        { ...(old && { old }), ...(ref && { ref }), pgWeights, ...(importance && { importance }) },
        updateHyperParams(c, lr),
      ),
    );
    if (!old) {
      old = r.logprobs;
      compare(old);
    }
    o.guard.check(r, { step: o.step + it, ...o.at });
    updates.push(r);
    learningRates.push(lr);
  }
  return { updates, learningRates, mismatch };
}
