// Alarm episodes from metrics.jsonl records as the trainers write them (`alarms/<name>` 0/1 and
// `alarms/<name>/value` on each training step's record; an evaluation's own line carries none),
// and the charts each episode's band goes on. Expected episodes are read off the records by hand.
import { describe, expect, it } from 'vitest';
import { ALARM_GUIDE, alarmEpisodes, episodeCharts } from '../src/alarm-episodes.js';
import { CHARTS, chartSpecs } from '../src/charts.js';
import type { MetricsRecord } from '../src/metrics-lines.js';

const step = (n: number, alarms: Record<string, number>): MetricsRecord => ({
  step: n,
  reward: 0.5,
  ...alarms,
});

describe('alarm episodes', () => {
  const records: MetricsRecord[] = [
    step(1, { 'alarms/truncation': 0, 'alarms/grad_norm_spike': 0 }),
    step(2, {
      'alarms/truncation': 1,
      'alarms/truncation/value': 0.3,
      'alarms/grad_norm_spike': 1,
    }),
    step(3, {
      'alarms/truncation': 1,
      'alarms/truncation/value': 0.4,
      'alarms/grad_norm_spike': 0,
    }),
    { step: 3, 'eval/reward': 0.4 }, // an evaluation's line: changes nothing
    step(4, { 'alarms/truncation': 0, 'alarms/grad_norm_spike': 0 }),
    step(5, {
      'alarms/truncation': 1,
      'alarms/truncation/value': 0.5,
      'alarms/grad_norm_spike': 0,
    }),
    step(6, { 'alarms/truncation': 1, 'alarms/truncation/value': 0.6, 'alarms/new_alarm': 1 }),
  ];

  it('spans each alarm from its raise to the last step it stayed raised', () => {
    const episodes = alarmEpisodes(records);
    expect(
      episodes.map(({ name, from, to, open, value }) => ({ name, from, to, open, value })),
    ).toEqual([
      { name: 'grad_norm_spike', from: 2, to: 2, open: false, value: undefined },
      { name: 'truncation', from: 2, to: 3, open: false, value: 0.4 },
      { name: 'truncation', from: 5, to: 6, open: true, value: 0.6 },
      { name: 'new_alarm', from: 6, to: 6, open: true, value: undefined },
    ]);
    expect(episodes[1]).toMatchObject({
      meaning: 'many completions were cut at the length limit (recent share shown)',
      advice: expect.stringContaining('mask_truncated_completions'),
      metrics: ['completions/clipped_ratio', 'completions/mean_length'],
    });
    // An alarm this version does not know: no advice, no metrics (it goes on every chart).
    expect(episodes[3]).not.toHaveProperty('advice');
    expect(episodes[3]).not.toHaveProperty('metrics');
  });

  it('puts a band on the charts of the metrics the alarm concerns, every chart when unknown', () => {
    const charts = chartSpecs([
      { step: 1, reward: 0, 'completions/clipped_ratio': 0.5, grad_norm: 1, entropy: 2 },
    ]);
    expect(charts.map((c) => c.title)).toEqual([
      'Reward',
      'Entropy',
      'Truncated share',
      'Gradient norm',
    ]);
    const [spike, truncation, , unknown] = alarmEpisodes(records);
    expect(episodeCharts(spike!, charts)).toEqual(['Gradient norm']);
    expect(episodeCharts(truncation!, charts)).toEqual(['Truncated share']);
    expect(episodeCharts(unknown!, charts)).toEqual([
      'Reward',
      'Entropy',
      'Truncated share',
      'Gradient norm',
    ]);
  });

  it("names a trained role's alarm after the role and bands the role's curves", () => {
    // A run that trains a policy per role: the role's record under `<role>/`, its alarms too.
    const roleStep = (n: number, raised: number) => ({
      step: n,
      reward: 0.5,
      entropy: 9, // never written unprefixed by such a run; here to show the band skips it
      'planner/entropy': 2 / n,
      'solver/entropy': 2,
      'alarms/zero_variance_groups': 0,
      'planner/alarms/entropy_collapse': raised,
      ...(raised && { 'planner/alarms/entropy_collapse/value': 0.1 }),
      'solver/alarms/entropy_collapse': 0,
    });
    const records = [roleStep(1, 0), roleStep(2, 1), roleStep(3, 1)];
    const [episode, ...others] = alarmEpisodes(records);
    expect(others).toEqual([]);
    expect(episode).toMatchObject({
      name: 'planner/entropy_collapse',
      role: 'planner',
      from: 2,
      to: 3,
      open: true,
      value: 0.1,
      meaning: ALARM_GUIDE.entropy_collapse!.meaning,
      metrics: ['planner/entropy'],
    });
    const charts = chartSpecs(records);
    expect(charts.find((c) => c.title === 'Entropy')?.keys).toEqual([
      'entropy',
      'planner/entropy',
      'solver/entropy',
    ]);
    expect(episodeCharts(episode!, charts)).toEqual(['Entropy']);
  });

  it('has a chart for a metric of every alarm it knows', () => {
    // So no known alarm's band goes nowhere on a run that records its metrics.
    const keys = new Set(CHARTS.flatMap((c) => c.keys));
    for (const [name, guide] of Object.entries(ALARM_GUIDE))
      expect(
        guide.metrics.some((m) => keys.has(m)),
        name,
      ).toBe(true);
  });
});

describe('charts', () => {
  it('shows the keys a run records, and failed rollouts first once any failed', () => {
    const specs = chartSpecs([
      { step: 1, reward: 0.2, 'rollouts/failed': 0, 'rollouts/failed/TOOL_TIMEOUT': 0 },
      { step: 2, reward: 0.3, 'rollouts/failed': 2, 'rollouts/failed/TOOL_TIMEOUT': 2 },
      { step: 2, 'eval/reward': 0.25 },
    ]);
    expect(specs).toEqual([
      { title: 'Failed rollouts', keys: ['rollouts/failed', 'rollouts/failed/TOOL_TIMEOUT'] },
      { title: 'Reward', keys: ['reward', 'eval/reward'] },
    ]);
    expect(chartSpecs([{ step: 1, loss: null as unknown as number }])).toEqual([]);
  });
});
