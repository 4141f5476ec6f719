import { copyFileSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { FlowRollout, OpenAIPolicyEngine, type PolicyEngine } from '@flowgrpo/agent';
import type { SampleRow, Turn } from '@flowgrpo/core';
import type { AgentProgram } from '@flowgrpo/gateway';
import type { DeviceRequest } from '@flowgrpo/models';
import {
  DecoderArtifacts,
  greedy,
  LORA_TARGET_MODULES,
  LocalPolicyEngine,
  loadHfModel,
  readArtifactsManifest,
  samplingGraph,
} from '@flowgrpo/models';
import {
  buildTrainingArtifacts,
  comparisonTable,
  type EvalResult,
  evaluate,
  MultiRoleGRPOTrainer,
  type Progress,
  type RoleSpec,
  silentProgress,
  writeReport,
} from '@flowgrpo/trainer';
import {
  type Almanac,
  type DemoQuestion,
  demoPlannerPrompt,
  demoReward,
  demoTools,
  executorEngine,
  generatorEngine,
  PolicyVerifierEngine,
  QUESTION_KINDS,
  questionRows,
  TwoRoleTeacher,
} from '@flowgrpo/trainer/demo';
import { tokenPieces } from '@flowgrpo/viewer';
import { claimDemoDir } from './demo-dir.js';
import {
  type DemoBudget,
  demoGrpoTraining,
  demoSettings,
  demoSft,
  demoTaskSetup,
  phaseTimer,
} from './pipeline.js';

// The two-role variant of the embedded demo (`flowgrpo demo --two-roles`): the verifier is a
// trained model too. The planner decides what to do next, the verifier when the run stops; both
// are LoRA adapters on one tiny seeded model, sampled through the policy gateway, and trained by
// MultiRoleGRPOTrainer with per-role advantages (each role's group-relative advantages over its
// own calls). The comparison: GRPO on the planner only (verifier frozen at its SFT), on the
// verifier only (planner frozen), and on both at once — the same rollouts budget, the same
// training questions in the same order, the same held-out questions.
//
//   1. the almanac task of the demo; held-out questions from the held-out half
//   2. a tiny seeded model; demonstrations of a scripted planner and a scripted verifier, each
//      imperfect in its own way (two-role-teacher.ts), through the real FlowRollout
//   3. one SFT (every weight) on both roles' demonstration turns: the shared base — the roles
//      differ by prompt ("Next:" vs "Stop?") and, after GRPO, by adapter
//   4. three MultiRoleGRPOTrainer runs from that base: planner, verifier, both
//   5. SFT and the three runs evaluated greedily on the held-out questions, per question kind

export interface TwoRoleDemoOptions {
  outDir: string;
  seed?: number;
  /** 'full' (default), 'quick' or 'smoke' (a few steps of each phase, for tests). */
  budget?: DemoBudget;
  device?: DeviceRequest;
  progress?: Progress;
  signal?: AbortSignal;
}

/** The three GRPO runs: which roles each trains. */
export const TWO_ROLE_RUNS = {
  'planner-only': ['planner'],
  'verifier-only': ['verifier'],
  both: ['planner', 'verifier'],
} as const satisfies Record<string, readonly TrainedRole[]>;
export type TwoRoleRun = keyof typeof TWO_ROLE_RUNS;
type TrainedRole = 'planner' | 'verifier';

export interface TwoRoleDemoResult {
  outDir: string;
  report: string;
  table: string;
  /** SFT, the three GRPO runs and the teacher, on the held-out questions (per_source: per kind). */
  evals: EvalResult[];
  sft: { steps: number; bestEvalLoss: number | undefined; stopped: string; checkpoint: string };
  runs: Record<
    TwoRoleRun,
    { steps: number; adapters: Record<string, string>; metrics: Record<string, number>[] }
  >;
  /** The question texts each phase used (the held-out ones share no landmark, town or year). */
  questions: { demonstrations: string[]; grpo: string[]; test: string[] };
  timings: Record<string, number>;
  seed: number;
}

/** The variant's agent: the demo's FlowRollout with a model (PolicyEngine) as the verifier. */
export function twoRoleAgent(
  planner: PolicyEngine,
  verifier: PolicyEngine,
  almanac: Almanac,
  o: { record?: Turn[] } = {},
): FlowRollout {
  return new FlowRollout({
    policy: planner,
    engines: {
      executor: executorEngine(),
      verifier: new PolicyVerifierEngine(verifier, { ...(o.record && { record: o.record }) }),
      generator: generatorEngine(),
    },
    tools: demoTools(almanac),
    maxTurns: 4,
    executorSeesMemory: true,
    plannerPrompt: (c) => demoPlannerPrompt(c),
    sampling: { maxTokens: 96, temperature: 1, topP: 1 },
  });
}

/**
 * The agent program the gateway trains: the same agent, each role an OpenAI-compatible client of
 * the gateway under its served name ('planner', 'verifier'). A run that failed (a role's call
 * failed) throws, so the trainer counts it as a failed rollout rather than a wrong answer.
 */
export function twoRoleProgram(almanac: Almanac): AgentProgram {
  return async ({ baseURL, apiKey, question, seed, signal }) => {
    const client = (model: string) =>
      new OpenAIPolicyEngine({ model, baseURLs: baseURL, apiKey, retry: { maxRetries: 0 } });
    const t = await twoRoleAgent(client('planner'), client('verifier'), almanac).run(question, {
      ...(seed !== undefined && { seed }),
      ...(signal && { signal }),
    });
    if (t.stopReason === 'error') {
      const errors = (t.metadata?.errors ?? []) as { role?: string; message?: string }[];
      throw new Error(`the two-role rollout failed: ${errors[0]?.role}: ${errors[0]?.message}`);
    }
    return t.finalAnswer;
  };
}

/**
 * The variant's budgets: the demo's (demoSettings), with shorter SFT and GRPO phases at the full
 * budget so that its five trainings — one SFT on twice as many turns, three GRPO runs whose
 * rollouts make twice as many model calls — stay within about 20 minutes on 2 idle cores.
 */
export function twoRoleSettings(budget: DemoBudget) {
  const d = demoSettings(budget);
  const full = budget === 'full';
  return {
    ...d,
    sft: { ...d.sft, maxSteps: full ? 300 : d.sft.maxSteps },
    grpo: { ...d.grpo, maxSteps: full ? 30 : d.grpo.maxSteps },
  };
}

/** Held-out rows whose source is the question kind (per_source = accuracy per kind). */
const kindRows = (questions: readonly DemoQuestion[]): SampleRow[] =>
  questionRows(questions).map((r, i) => ({ ...r, source: questions[i]!.kind }));

/** Runs the two-role variant and writes report.html and results.json into `outDir`. */
export async function runTwoRoleDemo(o: TwoRoleDemoOptions): Promise<TwoRoleDemoResult> {
  const seed = o.seed ?? 1;
  const budget = o.budget ?? 'full';
  const s = twoRoleSettings(budget);
  const out = resolve(o.outDir);
  const progress = o.progress ?? silentProgress;
  const device = o.device ?? 'cpu';
  const { timings, lap, total } = phaseTimer();
  claimDemoDir(out, 'demo --two-roles');

  // 1–2. The task (the demo's: the same almanac halves and question mix for a seed), and one
  // tiny model from the seed: both roles' base.
  let start = performance.now();
  const { almanac, demoQuestions, grpoQuestions, testQuestions, base } = await demoTaskSetup(
    out,
    seed,
    s,
  );
  const tokenizer = base.tokenizer;
  lap('setup_s', start);

  // 3. Demonstrations: the scripted planner and verifier through the real FlowRollout; each
  // demonstration holds the planner's turns and the verifier's calls (its decisions) as turns.
  start = performance.now();
  const teacher = new TwoRoleTeacher(tokenizer, [...demoQuestions, ...testQuestions], { seed });
  const demos = await Promise.all(
    demoQuestions.map(async (q, i) => {
      const verifierTurns: Turn[] = [];
      const t = await twoRoleAgent(teacher.planner, teacher.verifier, almanac, {
        record: verifierTurns,
      }).run(q.question, { queryId: `demo-${i}`, groundTruth: q.answer, seed: i });
      const turns = [...(t.turns ?? []), ...verifierTurns].map((turn, index) => ({
        ...turn,
        index,
      }));
      return { ...t, turns };
    }),
  );
  const reward = demoReward();
  const evalRows = kindRows(testQuestions);
  const teacherOnTest = await evaluate({
    agent: twoRoleAgent(teacher.planner, teacher.verifier, almanac),
    dataset: evalRows,
    reward,
    name: 'teacher (demonstrator)',
  });
  lap('demonstrations_s', start);
  progress.log(
    `teacher: ${demos.length} demonstrations (planner and verifier turns); it answers ${(100 * teacherOnTest.accuracy).toFixed(1)}% of the held-out questions right`,
  );

  // 4. SFT of every weight on both roles' turns, until the validation loss stops improving.
  start = performance.now();
  const sft = await demoSft({
    out,
    name: 'sft',
    sft: s.sft,
    seed,
    tokenizer,
    device,
    progress,
    train: demos.slice(s.validation),
    validation: demos.slice(0, s.validation),
    ...(o.signal && { signal: o.signal }),
  });
  lap('sft_s', start);

  // The SFT model with LoRA inputs: every role's adapter sits on it.
  const artifacts = join(out, 'artifacts', 'sft');
  const lora = { r: s.grpo.r, alpha: 2 * s.grpo.r, targetModules: [...LORA_TARGET_MODULES] };
  buildTrainingArtifacts(await loadHfModel(sft.bestCheckpoint), artifacts, {
    lora,
    maxPositions: 512,
  });
  for (const f of ['tokenizer.json', 'tokenizer_config.json'])
    copyFileSync(join(out, 'models', 'base', f), join(artifacts, f));

  // 5. Three GRPO runs through the gateway: the same config, seed and questions; only which
  // roles train differs (a frozen role serves the SFT model itself).
  const runs = {} as TwoRoleDemoResult['runs'];
  for (const [name, trained] of Object.entries(TWO_ROLE_RUNS) as [
    TwoRoleRun,
    readonly TrainedRole[],
  ][]) {
    start = performance.now();
    const roles: Record<TrainedRole, RoleSpec> = {
      planner: { trainable: trained.includes('planner') },
      verifier: { trainable: trained.includes('verifier') },
    };
    const r = await new MultiRoleGRPOTrainer({
      config: demoGrpoTraining(join(out, 'runs', `grpo-${name}`), s, seed),
      artifacts,
      tokenizer,
      roles,
      program: twoRoleProgram(almanac),
      reward,
      trainDataset: questionRows(grpoQuestions),
      device,
      onLog: (m) =>
        progress.log(
          `grpo ${name} step ${m.step}/${s.grpo.maxSteps}: reward ${m.reward?.toFixed(3)}` +
            trained.map((role) => `, ${role} loss ${m[`${role}/loss`]?.toFixed(4)}`).join(''),
        ),
      ...(o.signal && { signal: o.signal }),
    }).train();
    runs[name] = { steps: r.globalStep, adapters: r.adapters, metrics: r.metrics };
    lap(`grpo_${name}_s`, start);
  }

  // 6. SFT and the three runs on the held-out questions, greedy: both roles on one opened model,
  // each with its adapter (none: the SFT model).
  start = performance.now();
  const evalRoles = async (name: string, adapters: Partial<Record<TrainedRole, string>>) => {
    const art = await DecoderArtifacts.open(artifacts, {
      graphs: [samplingGraph(readArtifactsManifest(artifacts), device)],
      device,
    });
    try {
      const engine = async (role: TrainedRole) => {
        const e = new LocalPolicyEngine({ artifacts: art, tokenizer, model: role });
        const path = adapters[role];
        if (path) await e.updateAdapter({ name: role, path });
        return greedy(e as PolicyEngine);
      };
      const bar = progress.start(`eval ${name}`, testQuestions.length);
      const r = await evaluate({
        agent: twoRoleAgent(await engine('planner'), await engine('verifier'), almanac),
        dataset: evalRows,
        reward,
        name,
        keepTrajectories: true,
        ...(o.signal && { signal: o.signal }),
        onProgress: (done, _n, correct) => bar.update(done, { acc: correct / done }),
      });
      bar.stop();
      return r;
    } finally {
      await art.release();
    }
  };
  const evals = [await evalRoles('sft', {})];
  for (const name of Object.keys(TWO_ROLE_RUNS) as TwoRoleRun[])
    evals.push(await evalRoles(`grpo ${name}`, runs[name].adapters));
  lap('eval_s', start);
  total();

  const all = [...evals, teacherOnTest];
  const table = `${comparisonTable(all)}\n\n${kindTable(all)}`;
  const report = await writeReport(out, {
    // The demo's folder is no run folder: the token view reads the seeded model's tokenizer.
    tokenPieces: tokenPieces(readFileSync(join(out, 'models', 'base', 'tokenizer.json'), 'utf8')),
    title: 'flowgrpo embedded demo, two roles: planner and verifier trained by GRPO',
    notes: [
      `seed ${seed}${budget === 'full' ? '' : ` (${budget} budget)`}; ${testQuestions.length} held-out questions; ` +
        `teacher accuracy ${(100 * teacherOnTest.accuracy).toFixed(1)}% on them`,
      `SFT (both roles): ${sft.globalStep} steps (${sft.stopped}), best validation loss ${sft.bestEvalLoss?.toFixed(4)}; ` +
        `GRPO: ${s.grpo.maxSteps} steps × ${s.grpo.queries * s.grpo.generations} rollouts per run; total ${timings.total_s.toFixed(0)} s`,
    ],
    evals: all,
    comparisons: [
      ['grpo both', 'grpo planner-only'],
      ['grpo both', 'grpo verifier-only'],
      ['grpo both', 'sft'],
    ],
    sections: [
      ...(Object.keys(TWO_ROLE_RUNS) as TwoRoleRun[]).map((name) => ({
        title: `GRPO, ${name}`,
        metrics: runs[name].metrics,
      })),
      { title: 'SFT warm start (both roles)', metrics: sft.metrics },
    ],
    trajectories: evals
      .at(-1)!
      .trajectories!.filter((_, i) => i % 6 === 0)
      .slice(0, 40),
  });
  const result: TwoRoleDemoResult = {
    outDir: out,
    report,
    table,
    evals: all.map(({ trajectories: _t, ...e }) => e),
    sft: {
      steps: sft.globalStep,
      bestEvalLoss: sft.bestEvalLoss,
      stopped: sft.stopped,
      checkpoint: sft.bestCheckpoint,
    },
    runs,
    questions: {
      demonstrations: demoQuestions.map((q) => q.question),
      grpo: grpoQuestions.map((q) => q.question),
      test: testQuestions.map((q) => q.question),
    },
    timings,
    seed,
  };
  writeFileSync(
    join(out, 'results.json'),
    `${JSON.stringify({ ...result, runs: mapRuns(runs) }, null, 2)}\n`,
  );
  return result;
}

/** results.json keeps each run's steps and adapters (its metrics are in the run's folder). */
const mapRuns = (runs: TwoRoleDemoResult['runs']) =>
  Object.fromEntries(
    Object.entries(runs).map(([k, r]) => [k, { steps: r.steps, adapters: r.adapters }]),
  );

/** Accuracy per question kind, one row per policy. */
export function kindTable(evals: readonly EvalResult[]): string {
  // Only the kinds this run asked (the explore preset's kind is not one of them).
  const kinds = QUESTION_KINDS.filter((k) => evals.some((e) => e.per_source[k]));
  const header = ['policy', ...kinds];
  const rows = evals.map((e) => [
    e.name,
    ...kinds.map((k) => {
      const r = e.per_source[k];
      return r ? r.accuracy.toFixed(2) : '-';
    }),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n');
}
