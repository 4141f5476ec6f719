import { FlowGrpoError } from '@flowgrpo/core';
import { z } from 'zod';

// Reward-integrity alarms: failures of RL for agents that the reward curve alone hides (the
// policy stops calling tools while the reward holds, entropy collapses, completions get cut, the
// training reward rises while evaluation falls, ...). Computed from metrics.jsonl's history each
// time a step's record is appended (RunDirectory.logMetrics), so every trainer gets them, and
// written into that record as `alarms/<name>` (0 or 1) and `alarms/<name>/value` (what was
// measured). An alarm whose metric the trainer does not record is simply absent; one whose
// history is still too short is 0 without a value. docs/guides/alarms.md says what each means and
// what to do about it.

export const ALARM_NAMES = [
  'entropy_collapse',
  'tool_use_collapse',
  'format_collapse',
  'length_blowup',
  'truncation',
  'reward_hacking',
  'judge_rule_disagreement',
  'clip_ratio_spike',
  'logprob_mismatch_spike',
  'grad_norm_spike',
  'zero_variance_groups',
] as const;
export type AlarmName = (typeof ALARM_NAMES)[number];

const positive = z.number().positive();
const fraction = z.number().min(0).max(1);

/** The `alarms` config key: thresholds and windows, all with documented defaults. */
export const AlarmsConfigSchema = z
  .object({
    /** Steps in the early (baseline) and the recent window that ratio alarms compare. */
    window: z.number().int().positive().default(5),
    /** entropy_collapse: recent entropy below this fraction of the early entropy. */
    entropy_collapse_ratio: fraction.default(0.2),
    /** tool_use_collapse: recent tool calls per trajectory below this fraction of the early… */
    tool_use_collapse_ratio: fraction.default(0.25),
    /** format_collapse: recent share of well-formed rollouts below this fraction of the early… */
    format_collapse_ratio: fraction.default(0.8),
    /** …while (for both) the recent reward is at least the early reward minus this. */
    reward_hold_tolerance: z.number().nonnegative().default(0.05),
    /** length_blowup: recent mean completion length above this multiple of the early one. */
    length_growth: positive.default(3),
    /** truncation: share of completions cut at the length limit, over the recent window. */
    truncation_rate: fraction.default(0.25),
    /** reward_hacking: steps looked back over for a rising reward with a falling evaluation… */
    hacking_window: z.number().int().positive().default(20),
    /** …and by how much each must move (reward units) to count. */
    hacking_min_delta: z.number().nonnegative().default(0.05),
    /** judge_rule_disagreement: mean |judge − rule| reward over the recent window above this. */
    judge_rule_gap: fraction.default(0.3),
    /** *_spike: this step's value above this multiple of the median of the window before it… */
    spike_factor: positive.default(5),
    /** …and above this floor for clip_ratio/region_mean… */
    clip_ratio_floor: fraction.default(0.05),
    /** …and above this floor (nats) for logprob_mismatch/mean. */
    logprob_mismatch_floor: z.number().nonnegative().default(0.05),
    /** zero_variance_groups: share of groups with one reward for all G, over the recent window. */
    zero_variance_frac: fraction.default(0.75),
    /**
     * The console: an alarm raised again within this many steps of its last raise is the same
     * episode and is not announced again (a flickering spike would print a line every few steps).
     */
    rewarn_after_steps: z.number().int().nonnegative().default(50),
    /**
     * Alarms that end the run when raised: the trainer writes a checkpoint of that step (older
     * ones are kept, whatever save_total_limit says) and report.html, then throws AlarmStopError.
     */
    stop_on: z.array(z.enum(ALARM_NAMES)).default([]),
  })
  .strict();
export type AlarmsConfig = z.output<typeof AlarmsConfigSchema>;
export type AlarmsConfigInput = z.input<typeof AlarmsConfigSchema>;

/**
 * The kind of training an alarm's advice holds for. RL (GRPO and the gateway's trainers): every
 * alarm. SFT: only a gradient spike after the warm-up — a falling entropy is what SFT is for, and
 * the others read rollouts, rewards or a sampler SFT does not have.
 */
export type TrainingKind = 'rl' | 'sft';
export const ALARM_KINDS: Record<AlarmName, readonly TrainingKind[]> = {
  entropy_collapse: ['rl'],
  tool_use_collapse: ['rl'],
  format_collapse: ['rl'],
  length_blowup: ['rl'],
  truncation: ['rl'],
  reward_hacking: ['rl'],
  judge_rule_disagreement: ['rl'],
  clip_ratio_spike: ['rl'],
  logprob_mismatch_spike: ['rl'],
  grad_norm_spike: ['rl', 'sft'],
  zero_variance_groups: ['rl'],
};

/** The training kind of a run from its config.json `trainer` ('sft', else an RL trainer). */
export function trainingKind(trainer: unknown): TrainingKind {
  return trainer === 'sft' ? 'sft' : 'rl';
}

/** One alarm's verdict: raised or not, and the measured value when the history was long enough. */
export interface AlarmResult {
  raised: boolean;
  value?: number;
}

type Record_ = Readonly<Record<string, number | string>>;

/** An evaluation's own line (`{step, eval/…}`), logged beside the step's training record. */
export function isEvalRecord(r: Record_): boolean {
  const keys = Object.keys(r).filter((k) => k !== 'step');
  return keys.length > 0 && keys.every((k) => k.startsWith('eval/'));
}

const num = (v: unknown): number | undefined =>
  typeof v === 'number' && Number.isFinite(v) ? v : undefined;
const mean = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** The finite values of `key` over the training records, oldest first. */
function series(steps: readonly Record_[], key: string): number[] {
  const out: number[] = [];
  for (const r of steps) {
    const v = num(r[key]);
    if (v !== undefined) out.push(v);
  }
  return out;
}

/** Early vs recent mean of `key` (two windows that do not overlap), or undefined if too short. */
function earlyRecent(steps: readonly Record_[], key: string, w: number) {
  const xs = series(steps, key);
  if (xs.length < 2 * w) return undefined;
  return { early: mean(xs.slice(0, w)), recent: mean(xs.slice(-w)) };
}

/** A ratio alarm on `key`: recent/early, raised by `test`; absent when `key` is not recorded. */
function ratioAlarm(
  steps: readonly Record_[],
  key: string,
  w: number,
  test: (ratio: number) => boolean,
): AlarmResult | undefined {
  if (num(steps.at(-1)?.[key]) === undefined) return undefined;
  const er = earlyRecent(steps, key, w);
  if (!er || er.early <= 0) return { raised: false };
  const ratio = er.recent / er.early;
  return { raised: test(ratio), value: ratio };
}

/**
 * A recent-mean alarm on `key`, raised above `limit` (≥ for fractions that can reach 1); judged
 * once `w` steps are recorded.
 */
function recentMeanAlarm(
  steps: readonly Record_[],
  key: string,
  w: number,
  limit: number,
): AlarmResult | undefined {
  if (num(steps.at(-1)?.[key]) === undefined) return undefined;
  // A share over fewer steps than the window is one batch's luck, not a trend.
  const xs = series(steps, key);
  if (xs.length < w) return { raised: false };
  const value = mean(xs.slice(-w));
  return { raised: value >= limit, value };
}

/** A spike: this step's value above `factor` × the median of the `w` values before it and `floor`. */
function spikeAlarm(
  steps: readonly Record_[],
  key: string,
  w: number,
  factor: number,
  floor: number,
): AlarmResult | undefined {
  const current = num(steps.at(-1)?.[key]);
  if (current === undefined) return undefined;
  const before = series(steps.slice(0, -1), key).slice(-w);
  if (before.length < w) return { raised: false, value: current };
  return { raised: current > floor && current > factor * median(before), value: current };
}

/** Least-squares slope of y over x, times the x span: how much y moved over the window. */
function rise(points: readonly [number, number][]): number {
  const mx = mean(points.map((p) => p[0]));
  const my = mean(points.map((p) => p[1]));
  let sxy = 0;
  let sxx = 0;
  for (const [x, y] of points) {
    sxy += (x - mx) * (y - my);
    sxx += (x - mx) ** 2;
  }
  const span = points.at(-1)![0] - points[0]![0];
  return sxx === 0 ? 0 : (sxy / sxx) * span;
}

/**
 * reward_hacking: over the last `hacking_window` steps the training reward rose (least-squares,
 * by at least `hacking_min_delta`) while the evaluation (eval/reward, else eval/accuracy) fell
 * from the first to the last evaluation in that window by at least as much. The value is the
 * evaluation's change (negative when it fell). Needs two evaluations in the window.
 */
function hackingAlarm(history: readonly Record_[], c: AlarmsConfig): AlarmResult | undefined {
  const last = history.at(-1)!;
  if (num(last.reward) === undefined) return undefined;
  const since = Number(last.step) - c.hacking_window;
  const inWindow = history.filter((r) => Number(r.step) > since);
  const train: [number, number][] = [];
  const evals: [number, number][] = [];
  for (const r of inWindow) {
    if (isEvalRecord(r)) {
      const v = num(r['eval/reward']) ?? num(r['eval/accuracy']);
      if (v !== undefined) evals.push([Number(r.step), v]);
    } else {
      const v = num(r.reward);
      if (v !== undefined) train.push([Number(r.step), v]);
    }
  }
  if (evals.length < 2 || train.length < 2) return { raised: false };
  const evalChange = evals.at(-1)![1] - evals[0]![1];
  const raised = rise(train) >= c.hacking_min_delta && evalChange <= -c.hacking_min_delta;
  return { raised, value: evalChange };
}

/**
 * judge_rule_disagreement: where the reward records both an LLM judge's score
 * (`rewards/<name>/mean` with "judge" in the name) and rule-based ones, the mean over the recent
 * window of the largest |judge − rule| gap between the per-step means. A format reward ("format"
 * in its name) scores the form of a reply, not whether it is right, so it is no rule to check the
 * judge against: an accuracy + format reward, TRL's usual pair, would otherwise raise it at once.
 */
function judgeRuleAlarm(steps: readonly Record_[], c: AlarmsConfig): AlarmResult | undefined {
  const last = steps.at(-1)!;
  const names = Object.keys(last)
    .map((k) => /^rewards\/(.+)\/mean$/.exec(k)?.[1])
    .filter((n): n is string => n !== undefined);
  const judges = names.filter((n) => /judge/i.test(n));
  const rules = names.filter((n) => !/judge|format/i.test(n));
  if (judges.length === 0 || rules.length === 0) return undefined;
  const gaps: number[] = [];
  for (const r of steps.slice(-c.window)) {
    let gap: number | undefined;
    for (const j of judges)
      for (const k of rules) {
        const a = num(r[`rewards/${j}/mean`]);
        const b = num(r[`rewards/${k}/mean`]);
        if (a !== undefined && b !== undefined) gap = Math.max(gap ?? 0, Math.abs(a - b));
      }
    if (gap !== undefined) gaps.push(gap);
  }
  const value = mean(gaps);
  return { raised: value > c.judge_rule_gap, value };
}

/**
 * Every alarm for the last record of `history` (a training step's record; earlier records may
 * include evaluation lines). Alarms whose metrics the run does not record are left out.
 */
export function computeAlarms(
  history: readonly Record_[],
  c: AlarmsConfig,
  kind: TrainingKind = 'rl',
  /** Steps of learning-rate warm-up: no gradient spike is judged before it ends (SFT). */
  warmupSteps = 0,
): Partial<Record<AlarmName, AlarmResult>> {
  const all = history.filter((r) => !isEvalRecord(r));
  // In a warm-up the learning rate and so the steps grow on purpose: SFT judges only after it.
  const steps = kind === 'sft' ? all.filter((r) => Number(r.step) > warmupSteps) : all;
  if (steps.length === 0) return {};
  const w = c.window;
  const out: Partial<Record<AlarmName, AlarmResult | undefined>> = {
    entropy_collapse: ratioAlarm(steps, 'entropy', w, (r) => r < c.entropy_collapse_ratio),
    tool_use_collapse: whileRewardHolds(
      steps,
      c,
      ratioAlarm(steps, 'tools/calls_per_trajectory', w, (r) => r < c.tool_use_collapse_ratio),
    ),
    format_collapse: whileRewardHolds(
      steps,
      c,
      ratioAlarm(steps, 'completions/format_ratio', w, (r) => r < c.format_collapse_ratio),
    ),
    length_blowup: ratioAlarm(steps, 'completions/mean_length', w, (r) => r > c.length_growth),
    truncation: recentMeanAlarm(steps, 'completions/clipped_ratio', w, c.truncation_rate),
    reward_hacking: hackingAlarm(history, c),
    judge_rule_disagreement: judgeRuleAlarm(steps, c),
    clip_ratio_spike: spikeAlarm(
      steps,
      'clip_ratio/region_mean',
      w,
      c.spike_factor,
      c.clip_ratio_floor,
    ),
    logprob_mismatch_spike: spikeAlarm(
      steps,
      'logprob_mismatch/mean',
      w,
      c.spike_factor,
      c.logprob_mismatch_floor,
    ),
    grad_norm_spike: spikeAlarm(steps, 'grad_norm', w, c.spike_factor, 0),
    zero_variance_groups: recentMeanAlarm(steps, 'frac_reward_zero_std', w, c.zero_variance_frac),
  };
  return Object.fromEntries(
    Object.entries(out).filter(
      ([name, v]) => v !== undefined && ALARM_KINDS[name as AlarmName].includes(kind),
    ),
  );
}

/**
 * tool_use_collapse and format_collapse: a behaviour fell far below its early level (`fell`, a
 * recent/early ratio alarm) while the reward held (recent ≥ early − `reward_hold_tolerance`, or no
 * reward recorded): the policy found it can score without its tools, or with malformed replies.
 */
function whileRewardHolds(
  steps: readonly Record_[],
  c: AlarmsConfig,
  fell: AlarmResult | undefined,
): AlarmResult | undefined {
  if (!fell?.raised) return fell;
  const reward = earlyRecent(steps, 'reward', c.window);
  const holds = !reward || reward.recent >= reward.early - c.reward_hold_tolerance;
  return { raised: holds, value: fell.value! };
}

/** `alarms/<name>` (0/1) and `alarms/<name>/value` for metrics.jsonl. */
export function alarmMetrics(
  alarms: Partial<Record<AlarmName, AlarmResult>>,
): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [name, a] of Object.entries(alarms)) {
    out[`alarms/${name}`] = a.raised ? 1 : 0;
    if (a.value !== undefined) out[`alarms/${name}/value`] = a.value;
  }
  return out;
}

/** What each alarm says when it is raised (the console warning; the guide says more). */
export const ALARM_MEANINGS: Record<AlarmName, string> = {
  entropy_collapse: 'the policy entropy fell far below its early level (recent/early shown)',
  tool_use_collapse:
    'tool calls per trajectory fell towards 0 while the reward held (recent/early shown)',
  format_collapse:
    'fewer rollouts are well-formed than early in the run while the reward held (recent/early shown)',
  length_blowup: 'completions grew far longer than early in the run (recent/early shown)',
  truncation: 'many completions were cut at the length limit (recent share shown)',
  reward_hacking: 'the training reward rose while the evaluation fell (evaluation change shown)',
  judge_rule_disagreement: 'the judge and the rule-based rewards disagree (mean gap shown)',
  clip_ratio_spike: 'the clip ratio jumped far above its recent median',
  logprob_mismatch_spike: 'sampler and trainer log-probabilities disagree far more than before',
  grad_norm_spike: 'the gradient norm jumped far above its recent median',
  zero_variance_groups: 'most groups gave all G rollouts the same reward: no learning signal',
};

/**
 * `alarms/<name>`, or `<role>/alarms/<name>` for a trained role's alarm in a run that trains a
 * policy per role (run-alarms.ts): the alarm's name and role; undefined for any other key.
 */
export function parseAlarmKey(key: string): { name: string; role?: string } | undefined {
  const m = /^(?:([^/]+)\/)?alarms\/([^/]+)$/.exec(key);
  if (!m) return undefined;
  return { name: m[2]!, ...(m[1] !== undefined && { role: m[1] }) };
}

/**
 * The first of `stopOn` raised in a step's record (alarms/<name> = 1, or a trained role's
 * <role>/alarms/<name>), with its value and role.
 */
export function stoppingAlarm(
  record: Readonly<Record<string, unknown>>,
  stopOn: readonly AlarmName[],
): { name: AlarmName; value: number | undefined; role?: string } | undefined {
  for (const name of stopOn)
    for (const [k, v] of Object.entries(record)) {
      const a = parseAlarmKey(k);
      if (v !== 1 || a?.name !== name) continue;
      const value = record[`${k}/value`];
      return {
        name,
        value: typeof value === 'number' ? value : undefined,
        ...(a.role !== undefined && { role: a.role }),
      };
    }
  return undefined;
}

/**
 * An alarm of `alarms.stop_on` was raised: the run stopped at `step` after writing `checkpoint`
 * (the policy as it was when the alarm was raised; older checkpoints were kept).
 */
export class AlarmStopError extends FlowGrpoError {
  static override readonly code = 'ALARM_STOP';
  readonly alarm: AlarmName;
  /** The trained role whose alarm it was (a run that trains a policy per role). */
  readonly role: string | undefined;
  readonly step: number;
  readonly value: number | undefined;
  readonly checkpoint: string;
  constructor(fields: {
    alarm: AlarmName;
    role?: string | undefined;
    step: number;
    value: number | undefined;
    checkpoint: string;
  }) {
    const value =
      fields.value === undefined ? '' : ` (value ${Number(fields.value.toPrecision(3))})`;
    const who = fields.role === undefined ? '' : `${fields.role}/`;
    super(
      `alarm ${who}${fields.alarm}${value} at step ${fields.step} stopped the run (alarms.stop_on): ${ALARM_MEANINGS[fields.alarm]}; ${fields.checkpoint} holds the policy of that step, the checkpoints before it are kept`,
      {
        hint: 'read the steps before it in `flowgrpo view` (docs/guides/alarms.md says what to change), then start again from an earlier checkpoint (resume_from_checkpoint: <its path>)',
      },
    );
    this.alarm = fields.alarm;
    this.role = fields.role;
    this.step = fields.step;
    this.value = fields.value;
    this.checkpoint = fields.checkpoint;
  }
}
