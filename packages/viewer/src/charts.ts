import type { MetricsRecord } from './metrics-lines.js';

// The curves of a run, one list for both places that draw them — the viewer's page (uPlot) and
// report.html (inline SVG) — so both show the same charts and an alarm lands on the same one
// (alarm-episodes.ts). A chart shows the keys of it the run records; one the run does not record
// at all is left out. A run that trains a policy per role (the gateway's trainers) records each
// role's metrics under `<role>/`: a role's curve goes on the chart of the key it prefixes
// (`planner/entropy` beside `entropy`, on Entropy).

export interface ChartSpec {
  title: string;
  keys: string[];
}

export const CHARTS: readonly ChartSpec[] = [
  { title: 'Reward', keys: ['reward', 'eval/reward'] },
  { title: 'Accuracy', keys: ['accuracy', 'eval/accuracy'] },
  { title: 'Loss', keys: ['loss', 'eval_loss', 'train_loss'] },
  { title: 'KL to the reference', keys: ['kl'] },
  {
    title: 'Clip ratios',
    keys: ['clip_ratio/low_mean', 'clip_ratio/high_mean', 'clip_ratio/region_mean'],
  },
  { title: 'Entropy', keys: ['entropy'] },
  {
    title: 'Completion length (tokens)',
    keys: ['completions/mean_length', 'eval/completion_length'],
  },
  { title: 'Truncated share', keys: ['completions/clipped_ratio'] },
  { title: 'Well-formed share', keys: ['completions/format_ratio', 'eval/format_compliance'] },
  { title: 'Turns per trajectory', keys: ['turns/mean', 'eval/turns_mean'] },
  {
    title: 'Tool calls per trajectory',
    keys: ['tools/calls_per_trajectory', 'eval/tool_calls_per_trajectory'],
  },
  { title: 'Zero-variance groups', keys: ['frac_reward_zero_std'] },
  { title: 'Logprob mismatch (nats)', keys: ['logprob_mismatch/mean'] },
  { title: 'Gradient norm', keys: ['grad_norm'] },
  { title: 'Learning rate', keys: ['learning_rate'] },
  {
    title: 'Time per phase (s)',
    keys: [
      'timing/rollout_s',
      'timing/reward_s',
      'timing/logprobs_s',
      'timing/train_s',
      'timing/sync_s',
    ],
  },
];

const FAILED = 'rollouts/failed';

/** The error codes among `rollouts/failed/<CODE>` keys, in order of first appearance. */
export function failureCodes(metrics: readonly MetricsRecord[]): string[] {
  const codes = new Set<string>();
  for (const r of metrics)
    for (const k of Object.keys(r))
      if (k.startsWith(`${FAILED}/`)) codes.add(k.slice(FAILED.length + 1));
  return [...codes];
}

/** The keys `metrics` records as a finite number somewhere, in order of first appearance. */
function recordedKeys(metrics: readonly MetricsRecord[]): Set<string> {
  const keys = new Set<string>();
  for (const r of metrics)
    for (const [k, v] of Object.entries(r))
      if (typeof v === 'number' && Number.isFinite(v)) keys.add(k);
  return keys;
}

/** `keys` and their roles' `<role>/<key>` that the run records (a role: one path segment). */
function chartKeys(keys: readonly string[], recorded: ReadonlySet<string>): string[] {
  const own = keys.filter((k) => recorded.has(k));
  const roles = [...recorded].filter((r) => {
    const slash = r.indexOf('/');
    return slash > 0 && !keys.includes(r) && keys.includes(r.slice(slash + 1));
  });
  return [...own, ...roles];
}

/**
 * The charts `metrics` has data for, each with the keys it records; first, once any step had a
 * failed rollout, one of the failures: the total and each error code.
 */
export function chartSpecs(metrics: readonly MetricsRecord[]): ChartSpec[] {
  const failed = metrics.some((r) => typeof r[FAILED] === 'number' && r[FAILED] > 0);
  const specs = failed
    ? [
        {
          title: 'Failed rollouts',
          keys: [FAILED, ...failureCodes(metrics).map((c) => `${FAILED}/${c}`)],
        },
        ...CHARTS,
      ]
    : CHARTS;
  const recorded = recordedKeys(metrics);
  return specs
    .map((s) => ({ title: s.title, keys: chartKeys(s.keys, recorded) }))
    .filter((s) => s.keys.length > 0);
}
