// The demo's `explore` preset: the teacher's logs must hold no correct three-hop trace (or RFT
// would have one to learn from), while each step of a three-hop plan is demonstrated correctly
// in another context and the three in a row only in wrong traces (or GRPO could not reach the
// plan by sampling the SFT model: without those, 0 of 320 samples of a seed-11 SFT model did).
// Checked on the real FlowRollout with the preset's own teacher; then the whole pipeline at a
// smoke budget, for its wiring. Not the accuracies: the full run (flowgrpo demo --task explore
// --rft) reports those.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readTrajectoriesParquet, type SampleRow, type Trajectory } from '@flowgrpo/core';
import { ByteLevelTokenizer } from '@flowgrpo/models';
import { rewardInputFromTrajectory } from '@flowgrpo/reward';
import {
  createAlmanac,
  DEMO_TASKS,
  type DemoQuestion,
  demoAgent,
  demoReward,
  makeQuestions,
  TeacherPolicy,
} from '@flowgrpo/trainer/demo';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type DemoResult, runDemo } from '../src/demo/pipeline.js';

const explore = DEMO_TASKS.explore;

/** The sub-goals a trajectory's planner turns chose, in order. */
const plan = (t: Trajectory) =>
  (t.turns ?? [])
    .map((u) => JSON.parse(u.text ?? '{}').sub_goal as string)
    .filter((g) => g !== 'Final Answer');

describe('the explore preset: what the teacher demonstrates', () => {
  const almanac = createAlmanac({ seed: 5, trainLandmarks: 200, testLandmarks: 50 });
  // The logs: training-half questions of the preset's mix, as the pipeline draws them.
  const logs = makeQuestions(almanac, 'train', 400, '5:train', explore.questions);
  let runs: { q: DemoQuestion; t: Trajectory; correct: boolean }[];
  beforeAll(async () => {
    const tokenizer = new ByteLevelTokenizer();
    const teacher = new TeacherPolicy(tokenizer, logs, {
      seed: 5,
      ...explore.teacher,
    });
    const agent = demoAgent(teacher, almanac);
    const reward = demoReward();
    runs = await Promise.all(
      logs.map(async (q, i) => {
        const t = await agent.run(q.question, { queryId: `q${i}`, groundTruth: q.answer, seed: i });
        const correct = (await reward.score(rewardInputFromTrajectory(t))).score >= 1;
        return { q, t, correct };
      }),
    );
  }, 120_000);

  it('the logs hold three-hop questions, and the teacher answers none of them right', () => {
    const asked = runs.filter((r) => r.q.level === 3);
    expect(asked.length).toBeGreaterThan(100); // 127 of the 400
    expect(asked.filter((r) => r.correct)).toEqual([]);
    // It stops one hop early: the year with the offset added, never the event.
    for (const r of asked) expect(plan(r.t)).toEqual(['year of the landmark', 'add the offset']);
  });

  it('each step of the three-hop plan is demonstrated correctly in another context', () => {
    const correctPlans = new Set(
      runs.filter((r) => r.correct && r.q.level < 3).map((r) => plan(r.t).join(' → ')),
    );
    // year → add (year_plus) and add → event (event_after_year), by correct traces.
    expect(correctPlans).toContain('year of the landmark → add the offset');
    expect(correctPlans).toContain('add the offset → event in the year');
    // The three in a row are in the logs only where the judge rejects them: the teacher going one
    // hop too far on "which year was N years after …" (so SFT has seen the move, RFT has not).
    const threeSteps = runs.filter(
      (r) =>
        r.q.level < 3 &&
        plan(r.t).join(' → ') === 'year of the landmark → add the offset → event in the year',
    );
    expect(threeSteps.length).toBeGreaterThan(0); // 11 of the 400 here (54 year_plus × 0.7 × 0.3)
    expect(threeSteps.every((r) => r.q.kind === 'year_plus' && !r.correct)).toBe(true);
    // The executor grounds "add the offset" in the question's own year there.
    const afterYear = runs.find((r) => r.q.kind === 'event_after_year' && r.correct)!;
    expect(afterYear.q.plan[0]).toMatchObject({ tool: 'calculator' });
  });
});

describe('flowgrpo demo --task explore (smoke budget)', () => {
  const out = mkdtempSync(join(tmpdir(), 'flowgrpo-demo-explore-'));
  afterAll(() => rmSync(out, { recursive: true, force: true }));
  let result: DemoResult;
  beforeAll(async () => {
    result = await runDemo({ outDir: out, seed: 2, budget: 'smoke', task: 'explore' });
  }, 600_000); // a hang guard: ~90 s alone on 2 cores

  const rows = (file: string): SampleRow[] =>
    readFileSync(join(out, 'data', file), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as SampleRow);
  const kindOf = (r: SampleRow) => String(r.extra_info.kind);

  it('asks GRPO mostly three-hop questions, and tests every kind', () => {
    // train.jsonl: the teacher's 432 questions at this budget, then GRPO's 32.
    const train = rows('train.jsonl');
    expect(train).toHaveLength(432 + 32);
    const share = (rs: SampleRow[], kind: string) =>
      rs.filter((r) => kindOf(r) === kind).length / rs.length;
    const logs = train.slice(0, 432);
    const grpo = train.slice(432);
    // The logs: the test's mix (a third three-hop, answered one hop early: see above).
    expect(share(logs, 'event_plus')).toBeGreaterThan(0.2);
    expect(new Set(logs.map(kindOf))).toContain('event_after_year');
    // GRPO's: the preset's own mix, 12 in 21 of it three-hop (32 questions here).
    expect(share(grpo, 'event_plus')).toBeGreaterThan(0.4);
    expect(new Set(grpo.map(kindOf))).toContain('year_plus');
    // The test's kinds (24 questions at this budget may miss a rarer one; a third are three-hop).
    expect(new Set(rows('test.jsonl').map(kindOf))).toContain('event_plus');
  });

  it('asks "Which year was N years after …" only in the curriculum\'s last stage', async () => {
    // The preset's stages: until 25% of the steps (round(0.25 × 3) = step 1 at this budget)
    // without year_plus, then 4 in 17 of each step's questions (4 questions a step here: the
    // trainer gives each kind the whole part of its share, then draws the rest). With the KL to
    // the SFT model (beta 0.04) that brings the kind back once it is asked: `kl` is logged; and
    // on the format-gated reward, whose two parts are logged beside it.
    const metrics = readFileSync(join(out, 'runs', 'grpo', 'metrics.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, number>)
      .filter((m) => 'curriculum/stage' in m);
    expect(metrics.map((m) => m['curriculum/stage'])).toEqual([0, 1, 1]);
    expect(metrics[0]!['curriculum/year_plus'] ?? 0).toBe(0);
    for (const m of metrics) {
      expect(m.kl).toBeGreaterThanOrEqual(0);
      expect(m['rewards/format/mean']).toBeGreaterThanOrEqual(0);
      expect(m['rewards/judge/mean']).toBeGreaterThanOrEqual(0);
    }
    const kindByQuestion = new Map(
      rows('train.jsonl').map((r) => [r.question, String(r.extra_info.kind)]),
    );
    const asked = new Map<number, string[]>();
    for (const f of readdirSync(join(out, 'runs', 'grpo', 'rollouts')).sort()) {
      const step = Number(/step-(\d+)/.exec(f)![1]);
      const kinds = (await readTrajectoriesParquet(join(out, 'runs', 'grpo', 'rollouts', f))).map(
        (t) => kindByQuestion.get(t.question ?? '')!,
      );
      asked.set(step, kinds);
    }
    expect(asked.get(1)).not.toContain('year_plus');
  });

  it('reports accuracy per question kind for every policy and the teacher', () => {
    const saved = JSON.parse(readFileSync(join(out, 'results.json'), 'utf8')) as DemoResult;
    expect(saved.task).toBe('explore');
    expect(Object.keys(saved.perKind)).toEqual(['base', 'sft', 'grpo', 'teacher (demonstrator)']);
    const teacher = saved.perKind['teacher (demonstrator)']!;
    expect(teacher.event_plus!.n).toBeGreaterThan(0);
    expect(teacher.event_plus!.accuracy).toBe(0);
    const n = Object.values(teacher).reduce((s, k) => s + k.n, 0);
    expect(n).toBe(result.evals[0]!.n);
  });
});
