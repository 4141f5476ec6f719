// Reward-integrity alarms (run/alarms.ts): each alarm on a constructed metrics history that must
// raise it and one that must not; then the hook in RunDirectory.logMetrics, on a real run folder:
// alarms/<name> written into metrics.jsonl, one warning when an alarm is raised (not every step),
// and the thresholds read from the run's config.json.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  type AlarmName,
  AlarmStopError,
  listCheckpoints,
  type MetricsRecord,
  RunDirectory,
} from '../src/index.js';
import { AlarmsConfigSchema, alarmMetrics, computeAlarms } from '../src/run/alarms.js';
import { tinyConfig, tinyTrainer } from './support/tiny-grpo.js';

const defaults = AlarmsConfigSchema.parse({});

/** `n` steps whose metric `key` takes `f(i)` (i = 0…n−1), on top of a steady reward. */
function run(n: number, fields: Record<string, (i: number) => number>): MetricsRecord[] {
  return Array.from({ length: n }, (_, i) => ({
    step: i + 1,
    reward: 0.5,
    ...Object.fromEntries(Object.entries(fields).map(([k, f]) => [k, f(i)])),
  }));
}

function alarm(history: MetricsRecord[], name: AlarmName, config = defaults) {
  return computeAlarms(history, config)[name];
}

describe('alarms on constructed runs', () => {
  it('entropy_collapse: entropy falling to a tenth raises it; a gentle decline does not', () => {
    const collapse = run(12, { entropy: (i) => (i < 5 ? 2 : 0.1) });
    expect(alarm(collapse, 'entropy_collapse')).toEqual({ raised: true, value: 0.05 });
    const gentle = run(12, { entropy: (i) => 2 - 0.05 * i });
    expect(alarm(gentle, 'entropy_collapse')?.raised).toBe(false);
    // Too short a history to compare two windows: 0, without a value.
    expect(alarm(collapse.slice(0, 9), 'entropy_collapse')).toEqual({ raised: false });
  });

  it('tool_use_collapse: calls falling to 0 while the reward holds raises it', () => {
    const calls = (i: number) => (i < 5 ? 2 : 0.1);
    expect(alarm(run(10, { 'tools/calls_per_trajectory': calls }), 'tool_use_collapse')).toEqual({
      raised: true,
      value: 0.05,
    });
    // The same fall with the reward falling too: the policy got worse, not a hack of the reward.
    const worse = run(10, { 'tools/calls_per_trajectory': calls, reward: (i) => 0.8 - 0.08 * i });
    expect(alarm(worse, 'tool_use_collapse')?.raised).toBe(false);
    const steady = run(10, { 'tools/calls_per_trajectory': () => 1.5 });
    expect(alarm(steady, 'tool_use_collapse')).toEqual({ raised: false, value: 1 });
  });

  it('format_collapse: well-formed rollouts falling from all to half while the reward holds raises it', () => {
    // The seed-4 demo's GRPO (docs/demo.md): format 100% → 37.5% while accuracy rose, because a
    // malformed final reply ends the rollout and the generator still answers from the tools.
    const format = (i: number) => (i < 5 ? 1 : 0.5);
    expect(alarm(run(10, { 'completions/format_ratio': format }), 'format_collapse')).toEqual({
      raised: true,
      value: 0.5,
    });
    const worse = run(10, { 'completions/format_ratio': format, reward: (i) => 0.8 - 0.08 * i });
    expect(alarm(worse, 'format_collapse')?.raised).toBe(false);
    // A 10% dip (0.9 of the early share) is above the 0.8 default.
    const dip = run(10, { 'completions/format_ratio': (i) => (i < 5 ? 1 : 0.9) });
    expect(alarm(dip, 'format_collapse')).toEqual({ raised: false, value: 0.9 });
  });

  it('length_blowup: completions 4× longer raises it; 1.5× does not', () => {
    const long = run(10, { 'completions/mean_length': (i) => (i < 5 ? 100 : 400) });
    expect(alarm(long, 'length_blowup')).toEqual({ raised: true, value: 4 });
    const fine = run(10, { 'completions/mean_length': (i) => (i < 5 ? 100 : 150) });
    expect(alarm(fine, 'length_blowup')?.raised).toBe(false);
  });

  it('truncation: half the completions cut raises it; 1 in 10 does not', () => {
    expect(alarm(run(5, { 'completions/clipped_ratio': () => 0.5 }), 'truncation')).toEqual({
      raised: true,
      value: 0.5,
    });
    expect(alarm(run(5, { 'completions/clipped_ratio': () => 0.1 }), 'truncation')?.raised).toBe(
      false,
    );
  });

  it('reward_hacking: training reward up while evaluation falls raises it', () => {
    const hacked: MetricsRecord[] = [];
    for (let s = 1; s <= 20; s++) {
      hacked.push({ step: s, reward: 0.3 + 0.03 * s });
      if (s % 5 === 0) hacked.push({ step: s, 'eval/reward': 0.6 - 0.04 * s });
    }
    hacked.push({ step: 21, reward: 0.95 });
    const a = alarm(hacked, 'reward_hacking');
    expect(a?.raised).toBe(true);
    expect(a?.value).toBeCloseTo(-0.6, 6);
    // Evaluation rising with the reward: learning, no alarm.
    const learning = hacked.map((r) =>
      r['eval/reward'] === undefined ? r : { ...r, 'eval/reward': 0.2 + 0.02 * Number(r.step) },
    );
    expect(alarm(learning, 'reward_hacking')?.raised).toBe(false);
    // No evaluation at all: 0 without a value.
    expect(alarm(run(5, {}), 'reward_hacking')).toEqual({ raised: false });
  });

  it('judge_rule_disagreement: needs both rewards; a 0.5 gap raises it, 0.1 does not', () => {
    const gap = (d: number) =>
      run(5, { 'rewards/judge/mean': () => 0.8, 'rewards/exact_match/mean': () => 0.8 - d });
    expect(alarm(gap(0.5), 'judge_rule_disagreement')?.raised).toBe(true);
    expect(alarm(gap(0.5), 'judge_rule_disagreement')?.value).toBeCloseTo(0.5, 9);
    expect(alarm(gap(0.1), 'judge_rule_disagreement')?.raised).toBe(false);
    // A format reward is not a rule to check the judge against: far apart, and no alarm.
    expect(
      alarm(
        run(5, { 'rewards/judge/mean': () => 0.8, 'rewards/format/mean': () => 0.1 }),
        'judge_rule_disagreement',
      ),
    ).toBe(undefined);
    // A rule reward alone: the alarm is absent.
    expect(alarm(run(5, { 'rewards/exact_match/mean': () => 1 }), 'judge_rule_disagreement')).toBe(
      undefined,
    );
  });

  it('spikes: clip ratio, logprob mismatch and gradient norm 10× their median raise them', () => {
    const cases: [AlarmName, string, number][] = [
      ['clip_ratio_spike', 'clip_ratio/region_mean', 0.02],
      ['logprob_mismatch_spike', 'logprob_mismatch/mean', 0.01],
      ['grad_norm_spike', 'grad_norm', 0.8],
    ];
    for (const [name, key, base] of cases) {
      const spike = run(8, { [key]: (i) => (i === 7 ? base * 10 : base * (1 + 0.1 * (i % 2))) });
      expect(alarm(spike, name), name).toEqual({ raised: true, value: base * 10 });
      const calm = run(8, { [key]: (i) => base * (1 + 0.1 * (i % 2)) });
      expect(alarm(calm, name)?.raised, name).toBe(false);
    }
    // Below the floor a jump from ~0 is no spike (0.001 → 0.02 of the tokens clipped).
    const tiny = run(8, { 'clip_ratio/region_mean': (i) => (i === 7 ? 0.02 : 0.001) });
    expect(alarm(tiny, 'clip_ratio_spike')?.raised).toBe(false);
  });

  it('zero_variance_groups: 90% of groups with one reward raises it; 30% does not', () => {
    expect(alarm(run(5, { frac_reward_zero_std: () => 0.9 }), 'zero_variance_groups')?.raised).toBe(
      true,
    );
    expect(alarm(run(5, { frac_reward_zero_std: () => 0.3 }), 'zero_variance_groups')?.raised).toBe(
      false,
    );
  });

  it('thresholds are config keys; metrics not recorded leave their alarms out', () => {
    const history = run(5, { 'completions/clipped_ratio': () => 0.125 });
    const strict = AlarmsConfigSchema.parse({ truncation_rate: 0.05 });
    expect(alarm(history, 'truncation', strict)?.raised).toBe(true);
    expect(alarmMetrics(computeAlarms(history, defaults))).toEqual({
      'alarms/truncation': 0,
      'alarms/truncation/value': 0.125,
      'alarms/reward_hacking': 0,
    });
    expect(() => AlarmsConfigSchema.parse({ windw: 3 })).toThrow();
  });
});

describe('alarms in metrics.jsonl (RunDirectory.logMetrics)', () => {
  const tmp = mkdtempSync(join(tmpdir(), 'flowgrpo-alarms-'));
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));

  it('writes alarms/<name> into each step record and warns once when one is raised', () => {
    const dir = join(tmp, 'run');
    const warnings: string[] = [];
    const runDir = new RunDirectory(dir, { warn: (l) => warnings.push(l) });
    // The run's config.json sets a threshold (every trainer writes its config there first).
    writeFileSync(
      join(dir, 'config.json'),
      JSON.stringify({ alarms: { truncation_rate: 0.4, window: 3 } }),
    );
    const clipped = [0.1, 0.1, 0.6, 0.9, 0.9, 0.9];
    clipped.forEach((c, i) => {
      runDir.logMetrics({ step: i + 1, reward: 0.5, 'completions/clipped_ratio': c });
    });
    runDir.logMetrics({ step: 6, 'eval/reward': 0.4 });
    const lines = readFileSync(join(dir, 'metrics.jsonl'), 'utf8').trim().split('\n');
    const records = lines.map((l) => JSON.parse(l) as MetricsRecord);
    expect(records.map((r) => r['alarms/truncation'])).toEqual([0, 0, 0, 1, 1, 1, undefined]);
    // Judged from step 3 (a full window): (0.1 + 0.1 + 0.6) / 3 = 0.267, then (0.1 + 0.6 + 0.9) / 3.
    expect(records[2]!['alarms/truncation/value']).toBeCloseTo(0.8 / 3, 9);
    expect(records[1]!['alarms/truncation/value']).toBeUndefined();
    expect(records[3]!['alarms/truncation/value']).toBeCloseTo(1.6 / 3, 9);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/^alarm at step 4: truncation \(value 0\.533\): .*alarms\.md$/);

    // Resumed from step 4 (metrics cut back): the alarm raised before is not announced again.
    runDir.truncateMetrics(4);
    runDir.logMetrics({ step: 5, reward: 0.5, 'completions/clipped_ratio': 0.9 });
    expect(warnings).toHaveLength(1);
  });

  it("a run with a policy per role: each trained role's record judged on its own, announced by role", () => {
    const dir = join(tmp, 'roles');
    const warnings: string[] = [];
    const runDir = new RunDirectory(dir, { warn: (l) => warnings.push(l) });
    // The gateway's trainers write their roles into config.json (a frozen one is not judged).
    writeFileSync(
      join(dir, 'config.json'),
      JSON.stringify({
        trainer: 'multi-role-grpo',
        roles: { planner: { trainable: true }, solver: { trainable: true }, critic: {} },
      }),
    );
    // The planner's entropy collapses, its completions grow and its clip ratio spikes; the
    // solver's stay as they were.
    for (let i = 0; i < 12; i++)
      runDir.logMetrics({
        step: i + 1,
        reward: 0.5,
        'planner/entropy': i < 5 ? 2 : 0.1,
        'planner/completions/mean_length': i < 5 ? 10 : 40,
        'planner/clip_ratio/region_mean': i === 11 ? 0.5 : 0.01,
        'solver/entropy': 2,
        'solver/completions/mean_length': 10,
        'solver/clip_ratio/region_mean': 0.01,
      });
    const last = runDir.readMetrics().at(-1)!;
    expect(last).toMatchObject({
      'planner/alarms/entropy_collapse': 1,
      'planner/alarms/entropy_collapse/value': 0.05,
      'planner/alarms/length_blowup': 1,
      'planner/alarms/clip_ratio_spike': 1,
      'solver/alarms/entropy_collapse': 0,
      'solver/alarms/length_blowup': 0,
      'solver/alarms/clip_ratio_spike': 0,
    });
    // The run's own record has no entropy of its own: no unprefixed entropy alarm.
    expect(last).not.toHaveProperty('alarms/entropy_collapse');
    expect(Object.keys(last).some((k) => k.startsWith('critic/'))).toBe(false);
    expect(warnings.map((w) => /^alarm at step \d+: (\S+) /.exec(w)?.[1])).toEqual([
      'planner/entropy_collapse',
      'planner/length_blowup',
      'planner/clip_ratio_spike',
    ]);
  });

  it('a flickering alarm is one episode: announced again only after rewarn_after_steps clear', () => {
    const dir = join(tmp, 'flicker');
    const warnings: string[] = [];
    const runDir = new RunDirectory(dir, { warn: (l) => warnings.push(l) });
    writeFileSync(join(dir, 'config.json'), JSON.stringify({ alarms: { rewarn_after_steps: 20 } }));
    // Gradient norm 1, with 10× spikes: each spike raises grad_norm_spike for its step only.
    const spikes = new Set([10, 14, 25, 60]);
    for (let step = 1; step <= 62; step++)
      runDir.logMetrics({ step, reward: 0.5, grad_norm: spikes.has(step) ? 10 : 1 });
    const records = readFileSync(join(dir, 'metrics.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as MetricsRecord);
    const raisedAt = records.filter((r) => r['alarms/grad_norm_spike'] === 1).map((r) => r.step);
    expect(raisedAt).toEqual([10, 14, 25, 60]);
    // 14 and 25 are within 20 steps of the raise before them; 60 is 35 steps after 25.
    expect(warnings.map((w) => /^alarm at step (\d+): grad_norm_spike/.exec(w)?.[1])).toEqual([
      '10',
      '60',
    ]);
  });
});

describe('which alarms apply to which training', () => {
  const tmp = mkdtempSync(join(tmpdir(), 'flowgrpo-alarm-kinds-'));
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));

  it('SFT: a falling entropy is its goal; only a gradient spike after the warm-up is judged', () => {
    // What an SFT run records (sft-trainer.ts): loss, entropy, grad_norm, ... — entropy falling to
    // a twentieth is a collapse in RL and the point of SFT.
    const sft = run(12, {
      entropy: (i) => (i < 5 ? 2 : 0.1),
      grad_norm: (i) => (i === 11 ? 20 : 1),
    });
    expect(alarm(sft, 'entropy_collapse')?.raised).toBe(true);
    const judged = computeAlarms(sft, defaults, 'sft');
    expect(Object.keys(judged)).toEqual(['grad_norm_spike']);
    expect(judged.grad_norm_spike).toEqual({ raised: true, value: 20 });
    // The same spike inside a 12-step warm-up is not judged (the learning rate rises on purpose):
    // with no step after the warm-up the alarm has no history and is absent.
    expect(computeAlarms(sft, defaults, 'sft', 12)).toEqual({});
  });

  it('a run folder whose config.json says trainer "sft" writes no RL alarm', () => {
    const dir = join(tmp, 'sft');
    const runDir = new RunDirectory(dir, { warn: () => {} });
    writeFileSync(join(dir, 'config.json'), JSON.stringify({ trainer: 'sft', warmup_steps: 2 }));
    for (let step = 1; step <= 12; step++)
      runDir.logMetrics({ step, loss: 1 / step, entropy: step < 6 ? 2 : 0.05, grad_norm: 1 });
    const last = runDir.readMetrics().at(-1)!;
    expect(Object.keys(last).filter((k) => k.startsWith('alarms/'))).toEqual([
      'alarms/grad_norm_spike',
      'alarms/grad_norm_spike/value',
    ]);
  });
});

describe('alarms.stop_on ends a run', () => {
  const tmp = mkdtempSync(join(tmpdir(), 'flowgrpo-alarm-stop-'));
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));

  it('GRPO: the alarm named, this step checkpointed, the checkpoints before it kept', async () => {
    // The tiny untrained model scored by the demo's judge earns 0 on every rollout (tiny-grpo.ts):
    // every group has zero variance from step 1, so zero_variance_groups is raised once a window
    // (2 steps here) is recorded.
    // Two steps first without stop_on, keeping 1 checkpoint; then the run resumed with it.
    const out = join(tmp, 'grpo');
    const first = { save_steps: 1, save_total_limit: 1, max_steps: 2 };
    await (await tinyTrainer(tmp, tinyConfig(out, first), { judge: true })).train();
    expect(listCheckpoints(out).map((c) => c.step)).toEqual([2]);
    const resumed = await tinyTrainer(
      tmp,
      tinyConfig(out, {
        ...first,
        max_steps: 4,
        resume_from_checkpoint: true,
        alarms: { window: 2, stop_on: ['zero_variance_groups'] },
      }),
      { judge: true },
    );
    const error = await resumed.train().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(AlarmStopError.isInstance(error)).toBe(true);
    const e = error as AlarmStopError;
    expect(e.alarm).toBe('zero_variance_groups');
    expect(e.step).toBe(3);
    expect(e.value).toBe(1);
    expect(e.checkpoint).toBe(join(out, 'checkpoint-3'));
    expect(e.message).toMatch(/^alarm zero_variance_groups \(value 1\) at step 3 stopped the run/);
    expect(e.hint).toMatch(/resume_from_checkpoint/);
    // save_total_limit 1 would have rotated checkpoint-2 away: the stop keeps it.
    expect(listCheckpoints(out).map((c) => c.step)).toEqual([2, 3]);
    expect(readFileSync(join(out, 'report.html'), 'utf8')).toContain('zero_variance_groups');
  }, 180_000);
});
