// The "production" agentic GRPO seed's feature list, as one flowgrpo program, each feature
// printed as it happens:
//
//   1. the shop task and its tools (a slow supplier, a verbose price service)
//   2. a tiny Qwen2 planner created from a seed (or an HF model with --model)
//   3. demonstrations: a scripted assistant run through the real agent, tools and workspaces,
//      and a short SFT warm start on them (every weight: the model starts from random), so that
//      the model writes tool calls at all
//   4. GRPO (LoRA on the SFT model, which is also the KL reference): per step, Q questions × G
//      rollouts in parallel with live tool calls, timeouts and cut outputs, each rollout in its
//      own workspace; observations masked; trainable-token ratio, KL and reward logged
//   5. metrics.jsonl (the trainer's), environment.jsonl (the features' counts) and report.html
import { copyFileSync, existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import type { PolicyEngine } from '@flowgrpo/agent';
import type { Trajectory } from '@flowgrpo/core';
import {
  createTinyQwen2,
  type DeviceRequest,
  LORA_TARGET_MODULES,
  type LocalPolicyEngine,
  loadDecoderModel,
  loadHfModel,
  loadTokenizer,
  type Tokenizer,
} from '@flowgrpo/models';
import {
  buildTrainingArtifacts,
  GRPOTrainer,
  type MetricsRecord,
  SFTTrainer,
  writeReport,
} from '@flowgrpo/trainer';
import { type AgentSettings, DemonstratorPolicy, ShopAgent } from './agent.js';
import { FeatureTracker, type StepFeatures, trainableRatio } from './features.js';
import { shopReward } from './reward.js';
import { createShop, makeQuestions, questionRows } from './shop.js';

export interface AgenticGrpoOptions {
  out: string;
  quick?: boolean;
  /** An HF model folder (with tokenizer.json): no warm start; default a tiny Qwen2 from `seed`. */
  model?: string;
  sftSteps?: number;
  grpoSteps?: number;
  /** GRPO steps whose tool calls are printed as they happen (default 1). */
  liveSteps?: number;
  /** KL coefficient (default 0.1, the seed's kl_coeff). */
  beta?: number;
  seed?: number;
  device?: DeviceRequest;
  log?: (line: string) => void;
}

/** One GRPO step: the trainer's metrics and what the features did. */
export interface StepReport {
  metrics: MetricsRecord;
  features: StepFeatures;
  /** Mean rollouts per decode step of the engine's batches during the step. */
  decodeBatch: number;
}

export interface AgenticGrpoResult {
  demonstrations: { features: StepFeatures; sample: Trajectory };
  sft?: { steps: number; firstLoss: number; lastLoss: number };
  steps: StepReport[];
  runDir: string;
  metricsFile: string;
  environmentFile: string;
  report: string;
  /** Workspace directories left under the run's workspace folder at the end (none expected). */
  workspacesLeft: string[];
}

export const SEED_TRAINABLE_RANGE = [0.2, 0.4] as const;

export function settings(quick: boolean, custom: boolean) {
  return {
    demonstrations: quick ? 160 : 600,
    sftSteps: custom ? 0 : quick ? 100 : 300,
    grpoSteps: quick ? 3 : 30,
    queriesPerStep: 2,
    generations: 4,
    agent: {
      maxTurns: 4,
      maxNewTokens: custom ? 256 : 96,
      maxTotalTokens: custom ? 2048 : 1024,
      maxObservationTokens: custom ? 60 : 40,
      toolTimeoutMs: 400,
    } satisfies AgentSettings,
  };
}

const pct = (x: number) => `${(100 * x).toFixed(1)}%`;

export async function runAgenticGrpo(o: AgenticGrpoOptions): Promise<AgenticGrpoResult> {
  const log = o.log ?? console.log;
  const custom = o.model !== undefined;
  const s = settings(o.quick ?? false, custom);
  const seed = o.seed ?? 1;
  const device = o.device ?? 'cpu';
  const beta = o.beta ?? 0.1;
  const grpoSteps = o.grpoSteps ?? s.grpoSteps;
  const liveSteps = o.liveSteps ?? 1;
  const out = resolve(o.out);
  mkdirSync(out, { recursive: true });
  const workspaceDir = join(out, 'workspaces');
  rmSync(workspaceDir, { recursive: true, force: true });
  mkdirSync(workspaceDir, { recursive: true });
  const agentSettings: AgentSettings = { ...s.agent, workspaceDir };

  // ---- 1. the task --------------------------------------------------------------------------
  const shop = createShop(seed);
  const demoQuestions = makeQuestions(shop, s.demonstrations, 'demonstrations');
  // One epoch of GRPO questions exactly: every step sees new ones, an imported good among them.
  const grpoQuestions = makeQuestions(shop, grpoSteps * s.queriesPerStep, 'grpo');
  log(
    `task: "${grpoQuestions[0]!.question}" → price(item), calc(qty*price), <answer>; ` +
      `${shop.imported.size} imported goods (${[...shop.imported].join(', ')}) whose supplier is slower than the ${s.agent.toolTimeoutMs} ms tool timeout`,
  );

  // ---- 2. the policy ------------------------------------------------------------------------
  let modelDir: string;
  let tokenizer: Tokenizer;
  if (o.model) {
    modelDir = resolve(o.model);
    tokenizer = await loadTokenizer(modelDir);
    log(`policy: ${o.model}`);
  } else {
    modelDir = join(out, 'models', 'base');
    const tiny = await createTinyQwen2(modelDir, {
      seed,
      hiddenSize: 96,
      layers: 3,
      heads: 4,
      kvHeads: 2,
      intermediateSize: 288,
      ropeTheta: 10_000,
      initializerRange: 0.02,
      embeddingInitRange: 0.2,
      maxPositionEmbeddings: 2048,
    });
    tokenizer = tiny.tokenizer;
    log('policy: a tiny Qwen2 created from the seed (3 layers, hidden 96, byte-level tokenizer)');
  }
  const countTokens = (text: string) => tokenizer.encode(text).length;
  const trackerOptions = {
    countTokens,
    maxObservationTokens: s.agent.maxObservationTokens,
    toolTimeoutMs: s.agent.toolTimeoutMs,
    log,
  };

  // ---- 3. demonstrations and the SFT warm start ----------------------------------------------
  const demoTracker = new FeatureTracker(trackerOptions);
  const demonstrator = new ShopAgent(
    new DemonstratorPolicy(
      {
        encode: (t) => tokenizer.encode(t),
        decode: (ids) => tokenizer.decode(ids),
        ...(tokenizer.applyChatTemplate && {
          applyChatTemplate: (m, a) => tokenizer.applyChatTemplate!(m, a),
        }),
      },
      demoQuestions,
    ),
    shop,
    agentSettings,
    demoTracker,
  );
  const demos = await Promise.all(
    demoQuestions.map((q, i) =>
      demonstrator.run(q.question, { queryId: `demo-${i}`, groundTruth: q.answer }),
    ),
  );
  const demoFeatures = demoTracker.takeStep();
  log(
    `demonstrations: ${demos.length} runs of a scripted assistant through the agent and the real tools — ` +
      `${demoFeatures.toolCalls} tool calls, ${demoFeatures.timeouts.length} timeouts, ${demoFeatures.truncations.length} outputs cut, ` +
      `${demoFeatures.workspaces.length} workspaces (${demoFeatures.workspacesLeft} left)`,
  );
  const sample =
    demos.find((t) => (t.metadata?.toolCalls as unknown[] | undefined)?.length === 2) ?? demos[0]!;
  log('  one of them, segment by segment (only [trained] tokens carry loss):');
  for (const g of sample.segments ?? []) {
    const text = tokenizer.decode(g.tokens).replace(/\n/g, '⏎');
    const tag = g.trainable ? 'trained' : 'masked';
    log(`    [${g.kind} · ${tag}] ${text.length > 90 ? `${text.slice(0, 89)}…` : text}`);
  }

  let sft: AgenticGrpoResult['sft'];
  let policyModel = modelDir;
  const sftSteps = o.sftSteps ?? s.sftSteps;
  if (sftSteps > 0) {
    const r = await new SFTTrainer({
      config: {
        output_dir: join(out, 'runs', 'sft'),
        // The example's own output folder: a re-run replaces the previous run (logged).
        overwrite_output_dir: true,
        use_peft: false,
        learning_rate: 3e-3,
        lr_scheduler_type: 'cosine',
        warmup_steps: Math.min(10, sftSteps - 1),
        max_steps: sftSteps,
        per_device_train_batch_size: 16,
        max_length: s.agent.maxTotalTokens,
        save_total_limit: 1,
        weight_decay: 0,
        seed,
      },
      model: modelDir,
      tokenizer,
      trainDataset: demos.map((trajectory) => ({ trajectory })),
      device,
    }).train();
    const losses = r.metrics.filter((m) => typeof m.loss === 'number').map((m) => Number(m.loss));
    sft = { steps: r.globalStep, firstLoss: losses[0] ?? 0, lastLoss: losses.at(-1) ?? 0 };
    log(
      `SFT warm start (every weight): ${r.globalStep} steps, loss ${sft.firstLoss.toFixed(3)} → ${sft.lastLoss.toFixed(3)} (the tool outputs in the demonstrations are masked)`,
    );
    policyModel = r.bestCheckpoint;
  }

  // ---- 4. GRPO: LoRA on the SFT model, which stays the KL reference ---------------------------
  const r = custom ? 16 : 8;
  const lora = { r, alpha: 2 * r, targetModules: [...LORA_TARGET_MODULES] };
  const artifacts = join(out, 'artifacts');
  const weights = custom
    ? await loadDecoderModel(policyModel, { dtype: 'F32' })
    : await loadHfModel(policyModel);
  buildTrainingArtifacts(weights, artifacts, {
    lora,
    maxPositions: s.agent.maxTotalTokens + 64,
  });
  for (const f of ['tokenizer.json', 'tokenizer_config.json'])
    if (existsSync(join(modelDir, f))) copyFileSync(join(modelDir, f), join(artifacts, f));

  const G = s.generations;
  const Q = s.queriesPerStep;
  log(
    `GRPO: ${grpoSteps} steps × ${Q} questions × G=${G} rollouts, all ${Q * G} in parallel; ` +
      `beta ${beta} (KL to the SFT model); reward: exact match + 0.2 × tool calls that worked`,
  );
  const tracker = new FeatureTracker({ ...trackerOptions, live: () => stepsDone < liveSteps });
  let stepsDone = 0;
  let engine: LocalPolicyEngine | undefined;
  // The continuous batcher's live counters (decode steps run, rows decoded), once it exists.
  let fused: { stepsRun: number; rowSteps: number } | undefined;
  let lastStats = { stepsRun: 0, rowSteps: 0 };
  const steps: StepReport[] = [];
  const lastTrajectories: Trajectory[] = [];
  const runDir = join(out, 'runs', 'grpo');
  const environmentFile = join(runDir, 'environment.jsonl');
  mkdirSync(runDir, { recursive: true });
  writeFileSync(environmentFile, '');
  const reward = shopReward();
  log(`step 1 rollouts, live (tool calls print as they return):`);
  const trainer = new GRPOTrainer({
    config: {
      output_dir: runDir,
      overwrite_output_dir: true,
      max_steps: grpoSteps,
      queries_per_step: Q,
      num_generations: G,
      rollout_concurrency: Q * G,
      learning_rate: custom ? 1e-5 : 5e-4,
      loss_type: 'grpo',
      // The seed's advantage A_i = R_i − mean(R_group) (no division by the group's std), and its
      // "remove invalid trajectories": a completion cut at the token limit carries no loss.
      scale_rewards: 'none',
      mask_truncated_completions: true,
      beta,
      temperature: 1,
      max_completion_length: s.agent.maxNewTokens,
      max_turns: s.agent.maxTurns,
      lora: { r, lora_alpha: 2 * r, target_modules: lora.targetModules },
      save_total_limit: 1,
      seed,
    },
    artifacts,
    tokenizer,
    agent: (policy: PolicyEngine) => {
      // `policy` is the trainer's view of its engine (sampling at the config's settings); the
      // engine itself, for its batching counters, is `trainer.engine`.
      engine = trainer.engine as LocalPolicyEngine;
      void engine.generator.batchStats().then((st) => {
        fused = st;
      });
      return new ShopAgent(
        policy,
        shop,
        { ...agentSettings, temperature: 1 },
        {
          started: () => tracker.started(),
          event: (c, e) => tracker.event(c, e),
          visit: (c, v) => tracker.visit(c, v),
          finished: (c, t) => {
            tracker.finished(c, t);
            if (t) lastTrajectories.push(t);
          },
        },
      );
    },
    reward,
    trainDataset: questionRows(grpoQuestions),
    device,
    onLog: (m) => {
      stepsDone++;
      const features = tracker.takeStep();
      const stats = engineStats(engine, fused);
      const decodeBatch =
        stats.stepsRun - lastStats.stepsRun === 0
          ? 0
          : (stats.rowSteps - lastStats.rowSteps) / (stats.stepsRun - lastStats.stepsRun);
      lastStats = stats;
      steps.push({ metrics: m, features, decodeBatch });
      for (const line of stepLines(m, features, decodeBatch, beta)) log(line);
      writeFileSync(
        environmentFile,
        `${JSON.stringify({ step: m.step, ...environmentRecord(features, decodeBatch) })}\n`,
        { flag: 'a' },
      );
      if (stepsDone < grpoSteps) lastTrajectories.length = 0;
      if (stepsDone < liveSteps && stepsDone < grpoSteps)
        log(`step ${stepsDone + 1} rollouts, live:`);
    },
  });
  const result = await trainer.train();

  // ---- 5. the summary -------------------------------------------------------------------------
  const workspacesLeft = readdirSync(workspaceDir);
  const all = steps.map((x) => x.features);
  const sum = (f: (x: StepFeatures) => number) => all.reduce((a, x) => a + f(x), 0);
  const ratios = steps.map((x) => Number(x.metrics.trainable_token_ratio ?? 0));
  const kls = steps.map((x) => Number(x.metrics.kl ?? 0));
  const summary = [
    `real-time tool execution: ${sum((x) => x.toolCalls)} tool calls ran inside the rollouts, ${sum((x) => x.overlappedCalls)} of them while other rollouts were still generating`,
    `parallel group generation: up to ${Math.max(...all.map((x) => x.maxInFlight))} rollouts in flight at once (Q×G = ${Q * G}); the engine decoded ${mean(steps.map((x) => x.decodeBatch)).toFixed(1)} rollouts per step on average`,
    `loss masking: trainable tokens ${ratios.map(pct).join(', ')} of each step (the seed expects ${pct(SEED_TRAINABLE_RANGE[0])}–${pct(SEED_TRAINABLE_RANGE[1])}; > 60% would mean tool outputs are trained on)`,
    `KL penalty: beta ${beta}; kl ${kls.map((k) => k.toExponential(2)).join(', ')} by step (0 at step 1: the fresh adapter starts at the reference)`,
    `workspace isolation: ${sum((x) => x.workspaces.length)} workspaces, one per rollout; ${sum((x) => x.isolationViolations)} tool calls saw another rollout's files; ${workspacesLeft.length} left on disk`,
    `tool timeouts: ${sum((x) => x.timeouts.length)} calls stopped at ${s.agent.toolTimeoutMs} ms (in the demonstrations: ${demoFeatures.timeouts.length}); every rollout ended`,
    `tool-output truncation: ${sum((x) => x.truncations.length)} outputs cut to ${s.agent.maxObservationTokens} tokens (in the demonstrations: ${demoFeatures.truncations.length})`,
  ];
  const metricsFile = join(runDir, 'metrics.jsonl');
  const report = await writeReport(runDir, {
    title: 'flowgrpo example: agentic GRPO, the production feature list',
    notes: summary,
    metrics: result.metrics,
    trajectories: lastTrajectories.slice(0, 16),
  });
  log('');
  log('features:');
  for (const line of summary) log(`  ${line}`);
  log(
    `metrics: ${relative(process.cwd(), metricsFile)} (trainer, one line per step), ` +
      `${relative(process.cwd(), environmentFile)} (tools, workspaces, batches)`,
  );
  log(`report: ${relative(process.cwd(), report)}`);
  return {
    demonstrations: { features: demoFeatures, sample },
    ...(sft && { sft }),
    steps,
    runDir,
    metricsFile,
    environmentFile,
    report,
    workspacesLeft,
  };
}

function engineStats(
  engine: LocalPolicyEngine | undefined,
  fused: { stepsRun: number; rowSteps: number } | undefined,
): { stepsRun: number; rowSteps: number } {
  // Continuous batching (the `generate` graph) counts decode steps and the rows in each; the
  // plain decode path counts batches of requests, each decoded together.
  if (fused) return { stepsRun: fused.stepsRun, rowSteps: fused.rowSteps };
  return { stepsRun: engine?.batchStats.batches ?? 0, rowSteps: engine?.batchStats.requests ?? 0 };
}

function stepLines(m: MetricsRecord, f: StepFeatures, decodeBatch: number, beta: number): string[] {
  const n = (k: string, d = 3) => Number(m[k] ?? 0).toFixed(d);
  const ratio = Number(m.trainable_token_ratio ?? 0);
  const inRange = ratio >= SEED_TRAINABLE_RANGE[0] && ratio <= SEED_TRAINABLE_RANGE[1];
  return [
    `step ${m.step}: reward ${n('reward')} ± ${n('reward_std')} (exact match ${n('rewards/exact_match/mean', 2)}, tool calls ok ${n('rewards/tool_ok/mean', 2)})  loss ${n('loss', 4)}  ` +
      `kl ${Number(m.kl ?? 0).toExponential(2)} (beta ${beta})  trainable tokens ${pct(ratio)} ` +
      `(${inRange ? 'inside' : 'outside'} the seed's 20–40%)`,
    `  ${f.rollouts} rollouts, up to ${f.maxInFlight} in flight, ${decodeBatch.toFixed(1)} per decode step | ` +
      `${f.toolCalls} tool calls, ${f.timeouts.length} timeouts, ${f.truncations.length} outputs cut | ` +
      `${f.workspaces.length} workspaces, ${f.isolationViolations} cross-talk, ${f.workspacesLeft} left | ` +
      `rollout ${n('timing/rollout_s', 1)} s, train ${n('timing/train_s', 1)} s`,
  ];
}

function environmentRecord(f: StepFeatures, decodeBatch: number): Record<string, number> {
  return {
    'rollouts/count': f.rollouts,
    'rollouts/max_in_flight': f.maxInFlight,
    'rollouts/decode_batch_mean': decodeBatch,
    'tools/calls': f.toolCalls,
    'tools/calls_during_other_rollouts': f.overlappedCalls,
    'tools/timeouts': f.timeouts.length,
    'tools/truncated_outputs': f.truncations.length,
    'workspaces/count': f.workspaces.length,
    'workspaces/left': f.workspacesLeft,
    'workspaces/cross_talk': f.isolationViolations,
    'tokens/prompt': f.tokens.prompt,
    'tokens/action': f.tokens.action,
    'tokens/observation': f.tokens.observation,
    'tokens/trainable_ratio': trainableRatio(f.tokens),
  };
}

function mean(xs: readonly number[]): number {
  return xs.length === 0 ? 0 : xs.reduce((a, b) => a + b, 0) / xs.length;
}
