import type { ChartSpec } from './charts.js';
import type { MetricsRecord } from './metrics-lines.js';

// The alarms of a run as episodes. A trainer writes every alarm into each training step's record
// of metrics.jsonl as `alarms/<name>` (1 raised, 0 not) and `alarms/<name>/value` (the trainer's
// alarms.ts; docs/guides/alarms.md). An episode is the span from the step an alarm was raised to
// the last step it stayed raised: a record with it at 0 clears it, a record without it (an
// evaluation's line, or a step before its metric was recorded) leaves it as it was. One that is
// still raised at the last record is open. The viewer and report.html draw one band per episode
// on the charts of the metrics it concerns (every chart, for an alarm this table does not know)
// and list the episodes with what to do. A run that trains a policy per role also judges each
// trained role's own record: its alarms are `<role>/alarms/<name>`, an episode named
// `<role>/<name>` on the charts of the role's metrics.

export interface AlarmGuide {
  /** The metrics the alarm is computed from: its band goes on the charts showing them. */
  metrics: string[];
  /** What it means, and what its value is (the trainer's ALARM_MEANINGS says the same). */
  meaning: string;
  /** What to do about it (docs/guides/alarms.md says more). */
  advice: string;
}

/** The alarms the trainers raise (packages/trainer-cuda/src/run/alarms.ts), by name. */
export const ALARM_GUIDE: Readonly<Record<string, AlarmGuide>> = {
  entropy_collapse: {
    metrics: ['entropy'],
    meaning: 'the policy entropy fell far below its early level (recent/early shown)',
    advice:
      'lower learning_rate, raise temperature, use clip-higher (epsilon_high), or add a KL term (beta)',
  },
  tool_use_collapse: {
    metrics: ['tools/calls_per_trajectory', 'reward'],
    meaning: 'tool calls per trajectory fell towards 0 while the reward held (recent/early shown)',
    advice:
      'read a group (role filter "tool"): the reward can be met without the tools; make it need the tool’s result, or reward the tool use',
  },
  format_collapse: {
    metrics: ['completions/format_ratio', 'reward'],
    meaning:
      'fewer rollouts are well-formed than early in the run while the reward held (recent/early shown)',
    advice:
      'make a malformed reply cost reward (a format term, or 0 for parse errors), or keep such rollouts out of the batch',
  },
  length_blowup: {
    metrics: ['completions/mean_length'],
    meaning: 'completions grew far longer than early in the run (recent/early shown)',
    advice:
      'use a loss type that does not favour length (dapo, dr_grpo), a length penalty, or a lower max_completion_length',
  },
  truncation: {
    metrics: ['completions/clipped_ratio', 'completions/mean_length'],
    meaning: 'many completions were cut at the length limit (recent share shown)',
    advice:
      'their rewards are noise: raise max_completion_length, or set mask_truncated_completions',
  },
  reward_hacking: {
    metrics: ['reward', 'eval/reward', 'accuracy', 'eval/accuracy'],
    meaning: 'the training reward rose while the evaluation fell (evaluation change shown)',
    advice:
      'compare rollouts’ rewards with their answers; tighten the reward (a verifier, exact match) and keep the checkpoint from before the fall',
  },
  judge_rule_disagreement: {
    metrics: ['reward'],
    meaning: 'the judge and the rule-based rewards disagree (mean gap shown)',
    advice: 'read the rollouts where they differ; fix the judge prompt or the rule',
  },
  clip_ratio_spike: {
    metrics: ['clip_ratio/region_mean', 'clip_ratio/low_mean', 'clip_ratio/high_mean'],
    meaning: 'the clip ratio jumped far above its recent median',
    advice: 'lower learning_rate, or fewer num_iterations',
  },
  logprob_mismatch_spike: {
    metrics: ['logprob_mismatch/mean'],
    meaning: 'sampler and trainer log-probabilities disagree far more than before',
    advice:
      'check the rollout engine, its chat template and weight sync; vllm_importance_sampling_correction',
  },
  grad_norm_spike: {
    metrics: ['grad_norm'],
    meaning: 'the gradient norm jumped far above its recent median',
    advice: 'read the rollouts of that step; lower learning_rate or max_grad_norm',
  },
  zero_variance_groups: {
    metrics: ['frac_reward_zero_std'],
    meaning: 'most groups gave all G rollouts the same reward: no learning signal',
    advice:
      'the task is too hard or too easy for the policy: change the data mix, raise num_generations, or use a graded reward',
  },
};

export interface AlarmEpisode {
  /** The alarm's name; `<role>/<name>` for a trained role's. */
  name: string;
  /** The trained role it concerns (a run that trains a policy per role). */
  role?: string;
  /** The step it was raised at. */
  from: number;
  /** The last step it was raised at (the last record's step while it is open). */
  to: number;
  /** Still raised at the last record that carries it. */
  open: boolean;
  /** Its recorded value at `to` (`alarms/<name>/value`), when there is one. */
  value?: number;
  /** What it means and what to do; undefined for an alarm ALARM_GUIDE does not know. */
  meaning?: string;
  advice?: string;
  /** The metrics it concerns; undefined (every chart) for an alarm ALARM_GUIDE does not know. */
  metrics?: string[];
}

/** `alarms/<name>` or `<role>/alarms/<name>`. */
const ALARM_KEY = /^(?:([^/]+)\/)?alarms\/([^/]+)$/;

/** The alarm episodes in `records` (metrics.jsonl in order), by start step, then name. */
export function alarmEpisodes(records: readonly MetricsRecord[]): AlarmEpisode[] {
  const done: AlarmEpisode[] = [];
  const raised = new Map<string, AlarmEpisode>();
  for (const r of records) {
    for (const [k, v] of Object.entries(r)) {
      const m = ALARM_KEY.exec(k);
      if (!m) continue;
      const role = m[1];
      const alarm = m[2]!;
      const name = role === undefined ? alarm : `${role}/${alarm}`;
      const current = raised.get(name);
      if (v !== 1) {
        if (current) {
          current.open = false;
          done.push(current);
          raised.delete(name);
        }
        continue;
      }
      const value = r[`${k}/value`];
      const at = { to: r.step as number, ...(typeof value === 'number' && { value }) };
      if (current) {
        current.to = at.to;
        if ('value' in at) current.value = at.value;
        else delete current.value;
        continue;
      }
      const guide = Object.hasOwn(ALARM_GUIDE, alarm) ? ALARM_GUIDE[alarm] : undefined;
      raised.set(name, {
        name,
        ...(role !== undefined && { role }),
        from: at.to,
        ...at,
        open: true,
        ...(guide && {
          meaning: guide.meaning,
          advice: guide.advice,
          metrics: role === undefined ? guide.metrics : guide.metrics.map((k) => `${role}/${k}`),
        }),
      });
    }
  }
  return [...done, ...raised.values()].sort(
    (a, b) => a.from - b.from || a.name.localeCompare(b.name),
  );
}

/** The titles of the charts an episode's band goes on. */
export function episodeCharts(episode: AlarmEpisode, charts: readonly ChartSpec[]): string[] {
  const { metrics } = episode;
  return charts
    .filter((c) => metrics === undefined || c.keys.some((k) => metrics.includes(k)))
    .map((c) => c.title);
}
