import { ConfigError } from '@flowgrpo/core';
import type { GRPOConfig } from './config.js';

// HF's load_best_model_at_end for the GRPO trainers: which evaluation is "best". HF names the
// metric with or without its `eval_` prefix ("accuracy", "eval_accuracy"); ours are logged as
// `eval/<name>` (evalMetrics), so all three spellings name the same metric. As HF, a larger
// value is better unless the name ends with "loss", and only a strict improvement moves the
// best (the earliest of equal evaluations is kept).

/** The metrics an evaluation logs (evaluate.ts's evalMetrics), without their prefix. */
export const EVAL_METRIC_NAMES = [
  'accuracy',
  'accuracy_ci_low',
  'accuracy_ci_high',
  'reward',
  'format_compliance',
  'turns_mean',
  'tool_calls_per_trajectory',
  'tool_error_rate',
  'completion_length',
  'time_s',
] as const;

export interface BestModelRule {
  /** The logged name, e.g. `eval/accuracy`. */
  metric: string;
  greaterIsBetter: boolean;
}

/**
 * The rule of a config with load_best_model_at_end, checked before anything is opened: the
 * metric must be one an evaluation logs, and there must be evaluations to choose among.
 * Undefined when the run does not keep a best model.
 */
export function bestModelRule(
  c: GRPOConfig,
  trainer: { name: string; hasEvalDataset: boolean },
): BestModelRule | undefined {
  if (!c.load_best_model_at_end) return undefined;
  const bare = c.metric_for_best_model.replace(/^eval[/_]/, '');
  if (!(EVAL_METRIC_NAMES as readonly string[]).includes(bare))
    throw new ConfigError(
      `GRPO config: metric_for_best_model "${c.metric_for_best_model}" is not a metric an evaluation logs`,
      { key: 'metric_for_best_model' },
      { hint: `use one of ${EVAL_METRIC_NAMES.map((n) => `eval/${n}`).join(', ')}` },
    );
  if (!trainer.hasEvalDataset)
    throw new ConfigError(
      `GRPO config: load_best_model_at_end needs evaluations, and ${trainer.name} was given no eval dataset`,
      { key: 'load_best_model_at_end' },
      {
        hint: 'pass an eval dataset (questions apart from your test set), or remove load_best_model_at_end',
      },
    );
  if (c.eval_steps <= 0)
    throw new ConfigError(
      'GRPO config: load_best_model_at_end with eval_steps = 0 has only the final evaluation to choose from',
      { key: 'eval_steps' },
      { hint: 'set eval_steps (e.g. max_steps / 10), or remove load_best_model_at_end' },
    );
  return {
    metric: `eval/${bare}`,
    greaterIsBetter: c.greater_is_better ?? !bare.endsWith('loss'),
  };
}

/** Whether `value` beats the best so far (none yet: any finite value does). */
export function isBetterMetric(
  rule: BestModelRule,
  value: number,
  best: number | undefined,
): boolean {
  if (!Number.isFinite(value)) return false;
  if (best === undefined) return true;
  return rule.greaterIsBetter ? value > best : value < best;
}
