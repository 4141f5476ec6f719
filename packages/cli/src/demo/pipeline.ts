import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import type { PolicyEngine } from '@flowgrpo/agent';
import type { Trajectory } from '@flowgrpo/core';
import type { DeviceRequest } from '@flowgrpo/models';
import {
  type CpuKernelInfo,
  cpuKernelInfo,
  createTinyQwen2,
  DecoderArtifacts,
  greedy,
  LORA_TARGET_MODULES,
  LocalPolicyEngine,
  loadHfModel,
  readArtifactsManifest,
  samplingGraph,
} from '@flowgrpo/models';
import { rewardInputFromTrajectory } from '@flowgrpo/reward';
import {
  buildTrainingArtifacts,
  comparisonTable,
  type EvalResult,
  evaluate,
  type GRPOConfigInput,
  GRPOTrainer,
  type Progress,
  type SFTResult,
  SFTTrainer,
  type SFTTrainerOptions,
  silentProgress,
  wilsonInterval,
  writeReport,
} from '@flowgrpo/trainer';
import {
  createAlmanac,
  DEMO_TASKS,
  type DemoQuestion,
  type DemoTaskName,
  type DemoTaskPreset,
  demoAgent,
  demoReward,
  demoTrainingReward,
  makeQuestions,
  questionRows,
  TeacherPolicy,
} from '@flowgrpo/trainer/demo';
import { tokenPieces } from '@flowgrpo/viewer';
import { claimDemoDir } from './demo-dir.js';

// The embedded demo, end to end, offline, on the CPU: the README's first command.
//
//   1. an almanac and its questions from a seed; a held-out test half (no shared landmark, town
//      or year with training)
//   2. a tiny Qwen2-architecture planner created from the seed (byte-level tokenizer)
//   3. demonstrations: an imperfect scripted teacher run through the real FlowRollout
//   4. SFT warm start (every weight: the model starts from random), until the validation loss on
//      held-out demonstrations stops improving; the best checkpoint is kept
//   5. Flow-GRPO from the SFT model (a LoRA adapter), with the judge's outcome reward only; the
//      checkpoint that answers SFT's validation questions best is kept (HF's load_best_model_at_end)
//   6. base, SFT and GRPO evaluated greedily on the held-out questions, side by side
//
// The planner runs inside FlowRollout with rule-based executor, verifier and generator, and the
// judge is the LLMJudge class over a rule-based engine: an app's own classes, trained here.

export interface DemoOptions {
  /** Everything is written here: data, models, runs, report.html, results.json. */
  outDir: string;
  /** One seed for the almanac, the model, the teacher and the trainers (default 1). */
  seed?: number;
  /** The task preset (default 'default'; 'explore': the teacher's logs lack three-hop plans). */
  task?: DemoTaskName;
  /** A ~2-minute version: smaller budgets everywhere (the improvement is reported, not promised). */
  quick?: boolean;
  /**
   * The budget: 'full' (default), 'quick' (= quick: true), or 'smoke' — a few steps of each
   * phase, for tests of the loop's invariants.
   */
  budget?: DemoBudget;
  /**
   * Also train and evaluate the rejection-sampling baseline (RFT): the same SFT on only the
   * teacher's demonstrations the judge marks correct — a baseline that, like GRPO, uses the
   * reward. Its row joins the table; it adds an SFT run (about 3 minutes at the full budget).
   */
  rft?: boolean;
  device?: DeviceRequest;
  progress?: Progress;
  signal?: AbortSignal;
}

export interface DemoResult {
  outDir: string;
  report: string;
  table: string;
  evals: EvalResult[];
  teacherAccuracy: number;
  sft: { steps: number; bestEvalLoss: number | undefined; stopped: string; checkpoint: string };
  /** The RFT baseline (with `rft: true`): how many demonstrations it kept, and its SFT run. */
  rft?: DemoResult['sft'] & { demonstrations: number; validation: number };
  /**
   * The GRPO run: its steps, the checkpoint evaluated (the best on the validation questions), and
   * that checkpoint's step and validation accuracy.
   */
  grpo: {
    steps: number;
    checkpoint: string | undefined;
    bestStep?: number;
    validationAccuracy?: number;
  };
  timings: Record<string, number>;
  seed: number;
  task: DemoTaskName;
  /** The CPU and ORT kernels that made these numbers (they move with the instruction set). */
  machine: CpuKernelInfo;
  /** Held-out accuracy per question kind, by policy name (95% Wilson intervals). */
  perKind: Record<string, Record<string, { n: number; accuracy: number; ci95: [number, number] }>>;
}

export type DemoBudget = 'full' | 'quick' | 'smoke';

/** The demo's budgets: 'quick' and 'smoke' shrink every phase. */
export function demoSettings(budget: DemoBudget) {
  const by = <T>(full: T, quick: T, smoke: T): T =>
    budget === 'full' ? full : budget === 'quick' ? quick : smoke;
  return {
    model: { hiddenSize: 96, layers: 3, heads: 4, kvHeads: 2, intermediateSize: 288 },
    trainLandmarks: by(1500, 400, 100),
    testLandmarks: by(300, 300, 50),
    demonstrations: by(2000, 600, 400),
    validation: by(200, 100, 32),
    testQuestions: by(360, 120, 24),
    grpoQuestions: by(2000, 400, 32),
    sft: {
      maxSteps: by(800, 140, 100),
      evalSteps: by(20, 20, 20),
      // Any lower validation loss counts as progress (threshold 0) and 5 evaluations (100 steps)
      // without one stop the run: the loss is noisy at ~0.004 nats/token, and a baseline
      // stopped on a noisy plateau would be an unfair, under-trained one.
      patience: by(5, 3, 3),
      threshold: 0,
      batch: 16,
      lr: 3e-3,
    },
    grpo: {
      maxSteps: by(60, 6, 3),
      queries: by(8, 8, 4),
      generations: by(8, 8, 4),
      evalSteps: by(5, 3, 2),
      lr: 5e-4,
      r: 16,
    },
  };
}

/** Seconds per phase (`lap(name, start)`) and in all (`total()`): results.json's `timings`. */
export function phaseTimer() {
  const timings: Record<string, number> = {};
  const t0 = performance.now();
  return {
    timings,
    lap(k: string, start: number) {
      timings[k] = (performance.now() - start) / 1000;
    },
    total() {
      timings.total_s = (performance.now() - t0) / 1000;
    },
  };
}

/** What the SFT stage of a demo pipeline trains on, and where. */
export interface DemoSftOptions {
  /** The demo's folder: the run goes to runs/<name>, from the base model in models/base. */
  out: string;
  name: string;
  sft: ReturnType<typeof demoSettings>['sft'];
  seed: number;
  tokenizer: SFTTrainerOptions['tokenizer'];
  device: DeviceRequest;
  progress: Progress;
  signal?: AbortSignal;
  train: readonly Trajectory[];
  validation: readonly Trajectory[];
}

/**
 * The SFT stage of both demo pipelines: every weight of the base model on demonstration
 * trajectories, until the validation loss stops improving (early stopping on `sft`'s budget).
 */
export function demoSft(o: DemoSftOptions): Promise<SFTResult> {
  const s = o.sft;
  return new SFTTrainer({
    config: {
      output_dir: join(o.out, 'runs', o.name),
      // The demo's own folder: a second demo replaces the first's runs (said in the log).
      overwrite_output_dir: true,
      use_peft: false,
      learning_rate: s.lr,
      lr_scheduler_type: 'cosine',
      warmup_steps: 10,
      max_steps: s.maxSteps,
      per_device_train_batch_size: s.batch,
      eval_steps: s.evalSteps,
      early_stopping_patience: s.patience,
      early_stopping_threshold: s.threshold,
      save_total_limit: 1,
      weight_decay: 0,
      seed: o.seed,
    },
    model: join(o.out, 'models', 'base'),
    tokenizer: o.tokenizer,
    trainDataset: o.train.map((t) => ({ trajectory: t })),
    evalDataset: o.validation.map((t) => ({ trajectory: t })),
    device: o.device,
    progress: o.progress,
    ...(o.signal && { signal: o.signal }),
  }).train();
}

/**
 * The demo's task for a seed, shared by the demo and its two-role variant: the almanac, the
 * question pools of the training half (the teacher's logs, GRPO's questions) and the held-out
 * questions, written to `out/data`, and the tiny seeded base model in `out/models/base`.
 */
export async function demoTaskSetup(
  out: string,
  seed: number,
  s: ReturnType<typeof demoSettings>,
  task: DemoTaskPreset = DEMO_TASKS.default,
) {
  const almanac = createAlmanac({
    seed,
    trainLandmarks: s.trainLandmarks,
    testLandmarks: s.testLandmarks,
  });
  const trainPool = makeQuestions(
    almanac,
    'train',
    s.demonstrations + s.validation + s.grpoQuestions,
    `${seed}:train`,
    task.questions,
  );
  const demoQuestions = trainPool.slice(0, s.demonstrations + s.validation);
  // GRPO's questions: the pool's rest, or (a preset with a mix of its own) questions of their
  // own from the same training half.
  const grpoQuestions = task.grpoQuestions
    ? makeQuestions(almanac, 'train', s.grpoQuestions, `${seed}:grpo`, {
        ...task.questions,
        ...task.grpoQuestions,
      })
    : trainPool.slice(s.demonstrations + s.validation);
  const testQuestions = makeQuestions(
    almanac,
    'test',
    s.testQuestions,
    `${seed}:test`,
    task.questions,
  );
  writeJsonl(join(out, 'data', 'train.jsonl'), questionRows([...demoQuestions, ...grpoQuestions]));
  writeJsonl(join(out, 'data', 'test.jsonl'), questionRows(testQuestions));

  // The planner, created from the seed.
  const base = await createTinyQwen2(join(out, 'models', 'base'), {
    seed,
    ...s.model,
    ropeTheta: 10_000,
    initializerRange: 0.02,
    embeddingInitRange: 0.2,
    maxPositionEmbeddings: 512,
  });
  return { almanac, demoQuestions, grpoQuestions, testQuestions, base };
}

/**
 * A preset's curriculum as the trainer's config: each stage's share of the steps as the step it
 * ends at, and only the kinds GRPO's questions hold (a small budget's few questions can miss a
 * rare kind, and a weight on a kind no row has is refused).
 */
function kindCurriculum(
  stages: NonNullable<DemoTaskPreset['grpoCurriculum']>,
  maxSteps: number,
  questions: readonly DemoQuestion[],
) {
  const kinds = new Set<string>(questions.map((q) => q.kind));
  return {
    column: 'kind',
    stages: stages.map((st) => ({
      ...(st.untilShare !== undefined && {
        until_step: Math.max(1, Math.round(st.untilShare * maxSteps)),
      }),
      weights: Object.fromEntries(
        Object.entries(st.weights).filter(([k, w]) => kinds.has(k) && w! > 0),
      ) as Record<string, number>,
    })),
  };
}

/**
 * The GRPO training keys both demo pipelines share: a LoRA adapter on the SFT model, trained with
 * the flow loss at the budget's steps, questions, rollouts and learning rate; the last checkpoint
 * kept.
 */
export function demoGrpoTraining(
  outputDir: string,
  s: ReturnType<typeof demoSettings>,
  seed: number,
) {
  return {
    output_dir: outputDir,
    overwrite_output_dir: true,
    max_steps: s.grpo.maxSteps,
    queries_per_step: s.grpo.queries,
    num_generations: s.grpo.generations,
    learning_rate: s.grpo.lr,
    loss_type: 'flow',
    beta: 0,
    temperature: 1,
    max_completion_length: 96,
    rollout_concurrency: 64,
    lora: { r: s.grpo.r, lora_alpha: 2 * s.grpo.r, target_modules: [...LORA_TARGET_MODULES] },
    save_total_limit: 1,
    seed,
  } satisfies GRPOConfigInput;
}

/**
 * The demo's GRPO config (step 5): the shared training keys, the checkpoint that answers SFT's
 * validation questions best kept, and the task preset's own curriculum and KL. Also the config
 * the bench of asynchronous rollouts trains with (bench/async-rollouts.ts), so both measure one
 * run.
 */
export function demoGrpoConfig(
  outputDir: string,
  s: ReturnType<typeof demoSettings>,
  seed: number,
  task: DemoTaskPreset,
  grpoQuestions: readonly DemoQuestion[],
): GRPOConfigInput {
  return {
    ...demoGrpoTraining(outputDir, s, seed),
    beta: task.grpoBeta ?? 0,
    // The policy kept is the one that answers the SFT's validation questions best (greedy,
    // every eval_steps and at the end), as SFT keeps its best validation loss: a late update
    // that breaks the format on one machine's rounding does not become the result. The
    // validation questions come from the training half, apart from GRPO's and the test's.
    eval_steps: s.grpo.evalSteps,
    ...(task.grpoCurriculum && {
      curriculum: kindCurriculum(task.grpoCurriculum, s.grpo.maxSteps, grpoQuestions),
    }),
    load_best_model_at_end: true,
    metric_for_best_model: 'eval/accuracy',
  };
}

/** Runs the whole demo and writes report.html and results.json into `outDir`. */
export async function runDemo(o: DemoOptions): Promise<DemoResult> {
  const seed = o.seed ?? 1;
  const budget = o.budget ?? (o.quick ? 'quick' : 'full');
  const taskName = o.task ?? 'default';
  const task = DEMO_TASKS[taskName];
  const s = demoSettings(budget);
  if (budget === 'full' && task.grpoMaxSteps) s.grpo.maxSteps = task.grpoMaxSteps;
  if (budget === 'full' && task.grpoGenerations) s.grpo.generations = task.grpoGenerations;
  if (task.grpoLearningRate) s.grpo.lr = task.grpoLearningRate;
  const out = resolve(o.outDir);
  const progress = o.progress ?? silentProgress;
  const device = o.device ?? 'cpu';
  const machine = cpuKernelInfo();
  const { timings, lap, total } = phaseTimer();
  claimDemoDir(out, 'demo');

  // 1–2. The task, and the planner created from the seed.
  let start = performance.now();
  const { almanac, demoQuestions, grpoQuestions, testQuestions, base } = await demoTaskSetup(
    out,
    seed,
    s,
    task,
  );
  const tokenizer = base.tokenizer;
  buildTrainingArtifacts(base.weights, join(out, 'artifacts', 'base'), {
    graphs: ['decode', 'generate'],
    maxPositions: 512,
  });
  lap('setup_s', start);

  // 3. Demonstrations from the imperfect teacher, through the real FlowRollout.
  start = performance.now();
  const teacher = new TeacherPolicy(tokenizer, [...demoQuestions, ...testQuestions], {
    seed,
    ...task.teacher,
  });
  const teacherAgent = demoAgent(teacher, almanac);
  const demos = await Promise.all(
    demoQuestions.map((q, i) =>
      teacherAgent.run(q.question, { queryId: `demo-${i}`, groundTruth: q.answer, seed: i }),
    ),
  );
  const reward = demoReward();
  const teacherOnTest = await evaluate({
    agent: teacherAgent,
    dataset: questionRows(testQuestions),
    reward,
    name: 'teacher (demonstrator)',
    keepTrajectories: true,
  });
  lap('demonstrations_s', start);
  progress.log(
    `teacher: ${demos.length} demonstrations; it answers ${(100 * teacherOnTest.accuracy).toFixed(1)}% of the held-out questions right`,
  );

  // 4. SFT warm start until the validation loss stops improving.
  start = performance.now();
  const trainSft = (
    name: string,
    train: readonly Trajectory[],
    validation: readonly Trajectory[],
  ) =>
    demoSft({
      out,
      name,
      sft: s.sft,
      seed,
      tokenizer,
      device,
      progress,
      train,
      validation,
      ...(o.signal && { signal: o.signal }),
    });
  const sft = await trainSft('sft', demos.slice(s.validation), demos.slice(0, s.validation));
  lap('sft_s', start);

  // 4b. Optionally, the RFT baseline: the same SFT on the demonstrations the judge marks correct
  // (the validation demonstrations filtered alike), from the same base model.
  let rft: (SFTResult & { demonstrations: number; validation: number }) | undefined;
  if (o.rft) {
    start = performance.now();
    const correct = await Promise.all(
      demos.map(async (t) => (await reward.score(rewardInputFromTrajectory(t))).score >= 1),
    );
    const keep = (from: number, to: number) =>
      demos.slice(from, to).filter((_, i) => correct[from + i]);
    const train = keep(s.validation, demos.length);
    const validation = keep(0, s.validation);
    progress.log(
      `RFT baseline: SFT on the ${train.length} of ${demos.length - s.validation} demonstrations the judge marks correct`,
    );
    rft = {
      ...(await trainSft('rft', train, validation)),
      demonstrations: train.length,
      validation: validation.length,
    };
    buildTrainingArtifacts(await loadHfModel(rft.bestCheckpoint), join(out, 'artifacts', 'rft'), {
      graphs: ['decode', 'generate'],
      maxPositions: 512,
    });
    for (const f of ['tokenizer.json', 'tokenizer_config.json'])
      copyFileSync(join(out, 'models', 'base', f), join(out, 'artifacts', 'rft', f));
    lap('rft_s', start);
  }

  // 5. Flow-GRPO from the SFT model, with a LoRA adapter.
  start = performance.now();
  const sftModel = await loadHfModel(sft.bestCheckpoint);
  const lora = { r: s.grpo.r, alpha: 2 * s.grpo.r, targetModules: [...LORA_TARGET_MODULES] };
  buildTrainingArtifacts(sftModel, join(out, 'artifacts', 'sft'), { lora, maxPositions: 512 });
  for (const f of ['tokenizer.json', 'tokenizer_config.json'])
    copyFileSync(join(out, 'models', 'base', f), join(out, 'artifacts', 'sft', f));
  const grpoTrainer = new GRPOTrainer({
    config: demoGrpoConfig(join(out, 'runs', 'grpo'), s, seed, task, grpoQuestions),
    artifacts: join(out, 'artifacts', 'sft'),
    tokenizer,
    agent: (policy) => demoAgent(policy, almanac),
    reward: demoTrainingReward(task),
    trainDataset: questionRows(grpoQuestions),
    evalDataset: questionRows(demoQuestions.slice(0, s.validation)),
    device,
    progress,
    ...(o.signal && { signal: o.signal }),
  });
  const grpo = await grpoTrainer.train();
  const grpoAdapter = grpo.bestCheckpoint ?? grpo.checkpoint;
  lap('grpo_s', start);

  // 6. Base, SFT, GRPO on the held-out questions (greedy).
  start = performance.now();
  const evalPolicy = async (name: string, artifacts: string, adapter?: string) => {
    const art = await DecoderArtifacts.open(artifacts, {
      graphs: [samplingGraph(readArtifactsManifest(artifacts), device)],
      device,
    });
    try {
      const engine = new LocalPolicyEngine({ artifacts: art, tokenizer, model: name });
      if (adapter) await engine.updateAdapter({ name, path: adapter });
      const bar = progress.start(`eval ${name}`, testQuestions.length);
      const r = await evaluate({
        agent: demoAgent(greedy(engine as PolicyEngine), almanac),
        dataset: questionRows(testQuestions),
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
  const evals = [
    await evalPolicy('base', join(out, 'artifacts', 'base')),
    await evalPolicy('sft', join(out, 'artifacts', 'sft')),
    ...(rft
      ? [await evalPolicy('rft (sft on correct traces)', join(out, 'artifacts', 'rft'))]
      : []),
    await evalPolicy('grpo', join(out, 'artifacts', 'sft'), grpoAdapter),
  ];
  lap('eval_s', start);
  total();

  const table = comparisonTable([...evals, teacherOnTest]);
  const perKind = Object.fromEntries(
    [...evals, teacherOnTest].map((e) => [e.name, accuracyByKind(testQuestions, e)]),
  );
  const sample: Trajectory[] = evals
    .at(-1)!
    .trajectories!.filter((_, i) => i % 6 === 0)
    .slice(0, 40);
  const report = await writeReport(out, {
    // The demo's folder is no run folder: the token view reads the seeded model's tokenizer.
    tokenPieces: tokenPieces(readFileSync(join(out, 'models', 'base', 'tokenizer.json'), 'utf8')),
    title: 'flowgrpo embedded demo: Flow-GRPO vs SFT on held-out almanac questions',
    notes: [
      `seed ${seed}${budget === 'full' ? '' : ` (${budget} budget)`}; ${testQuestions.length} held-out questions (levels 1–3); ` +
        `teacher accuracy ${(100 * teacherOnTest.accuracy).toFixed(1)}% on them`,
      `SFT: ${sft.globalStep} steps (${sft.stopped}), best validation loss ${sft.bestEvalLoss?.toFixed(4)}; ` +
        `GRPO: ${grpo.globalStep} steps${task.formatGate ? ' on judge × format (a malformed rollout earns 0)' : ''}` +
        `${grpo.bestCheckpoint ? `, ${basename(grpo.bestCheckpoint)} kept (best validation accuracy, ${(100 * grpo.bestMetric!).toFixed(1)}%)` : ''}; total ${timings.total_s.toFixed(0)} s`,
      `machine: ${machine.cpu}; ONNX Runtime ${machine.onnxruntime}, float kernels ${machine.isa}${machine.amx ? ' (AMX present)' : ''} — another instruction set rounds differently (docs/demo.md, "Reproducing")`,
      ...(rft
        ? [
            `RFT baseline: SFT on the ${rft.demonstrations} correct demonstrations, ${rft.globalStep} steps (${rft.stopped}), best validation loss ${rft.bestEvalLoss?.toFixed(4)}`,
          ]
        : []),
    ],
    evals: [...evals, teacherOnTest],
    // The differences the console states: GRPO against its SFT start (and the RFT baseline).
    comparisons: [
      ['grpo', 'sft'],
      ...(rft ? [['grpo', 'rft (sft on correct traces)'] as const] : []),
    ],
    sections: [
      { title: 'Flow-GRPO', metrics: grpo.metrics },
      { title: 'SFT warm start', metrics: sft.metrics },
      ...(rft ? [{ title: 'RFT baseline (SFT on correct traces)', metrics: rft.metrics }] : []),
    ],
    trajectories: sample,
  });
  const result: DemoResult = {
    outDir: out,
    report,
    table,
    evals: evals.map(({ trajectories: _t, ...e }) => e),
    teacherAccuracy: teacherOnTest.accuracy,
    sft: {
      steps: sft.globalStep,
      bestEvalLoss: sft.bestEvalLoss,
      stopped: sft.stopped,
      checkpoint: sft.bestCheckpoint,
    },
    ...(rft && {
      rft: {
        steps: rft.globalStep,
        bestEvalLoss: rft.bestEvalLoss,
        stopped: rft.stopped,
        checkpoint: rft.bestCheckpoint,
        demonstrations: rft.demonstrations,
        validation: rft.validation,
      },
    }),
    grpo: {
      steps: grpo.globalStep,
      checkpoint: grpoAdapter,
      ...(grpo.bestCheckpoint && {
        bestStep: Number(/checkpoint-(\d+)$/.exec(grpo.bestCheckpoint)![1]),
        validationAccuracy: grpo.bestMetric!,
      }),
    },
    timings,
    seed,
    task: taskName,
    machine,
    perKind,
  };
  writeFileSync(join(out, 'results.json'), `${JSON.stringify(result, null, 2)}\n`);
  return result;
}

/** Held-out accuracy per question kind (the trajectories are in the questions' order). */
function accuracyByKind(
  questions: readonly DemoQuestion[],
  e: EvalResult,
): DemoResult['perKind'][string] {
  const out: DemoResult['perKind'][string] = {};
  for (const kind of new Set(questions.map((q) => q.kind))) {
    const rewards = questions.flatMap((q, i) =>
      q.kind === kind ? [e.trajectories?.[i]?.reward ?? 0] : [],
    );
    const k = rewards.filter((r) => r >= 1).length;
    out[kind] = {
      n: rewards.length,
      accuracy: k / rewards.length,
      ci95: wilsonInterval(k, rewards.length),
    };
  }
  return out;
}

/** Rows as JSON lines (the demo's data files; the two-role variant writes its own alike). */
export function writeJsonl(path: string, rows: readonly object[]): void {
  mkdirSync(join(path, '..'), { recursive: true });
  writeFileSync(path, rows.map((r) => `${JSON.stringify(r)}\n`).join(''));
}

export type { DemoQuestion };
