// The SFT → GRPO → evaluation → export pipeline of the book chapter (seed 003), on flowgrpo:
//
//   1. GSM8K (../shared/data/gsm8k) into the <think>…</think><tool_call>calculator(…)</tool_call>
//      agent format; the demonstrations are run through the agent, so the calculator really runs
//      and its response is recorded as a non-trainable observation
//   2. SFT with LoRA (SFTTrainer over LoRA artifacts)
//   3. GRPO with the multi-dimension reward (GRPOTrainer) on the SFT model (SFT adapter merged;
//      it is also the KL reference), with a fresh adapter
//   4. base / SFT / GRPO on held-out test questions: accuracy, format compliance, average length
//   5. export: the GRPO adapter merged into the SFT model, an HF model folder (mergeLora +
//      saveHfModel; `flowgrpo export --merge` does the same)
import { copyFileSync, existsSync, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { PolicyEngine, PolicyTokenizer } from '@flowgrpo/agent';
import { loadDataset, type SampleRow, type Trajectory } from '@flowgrpo/core';
import {
  createTinyQwen2,
  DecoderArtifacts,
  type DeviceRequest,
  greedy,
  LORA_TARGET_MODULES,
  LocalPolicyEngine,
  type LoraTargetModule,
  loadDecoderModel,
  loadLoraAdapter,
  loadTokenizer,
  type ModelWeights,
  mergeLora,
  saveHfModel,
  type Tokenizer,
} from '@flowgrpo/models';
import {
  buildTrainingArtifacts,
  type EvalResult,
  evaluate,
  GRPOTrainer,
  type MetricsRecord,
  SFTTrainer,
} from '@flowgrpo/trainer';
import { toDemonstration } from './agent-format.js';
import { CalculatorAgent, DemonstrationPolicy } from './calculator-agent.js';
import { accuracyReward, hasThinkTags, multiDimensionReward } from './rewards.js';

export interface Gsm8kRunOptions {
  /** GSM8K's train and test files (JSONL or the hub's Parquet; see data-source.ts). */
  data: { train: string; test: string };
  out: string;
  quick?: boolean;
  /** An HF model folder, e.g. Qwen2.5-1.5B-Instruct; default a tiny Qwen2 from `seed`. */
  model?: string;
  sftSteps?: number;
  grpoSteps?: number;
  /** Test questions per policy in the table. */
  testQuestions?: number;
  seed?: number;
  device?: DeviceRequest;
  log?: (line: string) => void;
}

export interface PolicyRow {
  name: string;
  n: number;
  accuracy: number;
  accuracyCi95: [number, number];
  formatCompliance: number;
  /** Whitespace-separated words of the transcript (the chapter's "Avg. Length"). */
  avgWords: number;
  /** Sampled tokens per question. */
  avgTokens: number;
  calculatorCalls: number;
  reward: number;
}

export interface Gsm8kRunResult {
  table: PolicyRow[];
  sft: MetricsRecord[];
  grpo: MetricsRecord[];
  demonstration: Trajectory;
  adapter: string;
  exported: string;
  sftMerged: string;
}

function settings(quick: boolean, custom: boolean) {
  return {
    demonstrations: quick ? 64 : 2000,
    grpoQuestions: quick ? 16 : 500,
    testQuestions: quick ? 8 : 200,
    sftSteps: quick ? 16 : custom ? 300 : 600,
    grpoSteps: quick ? 2 : custom ? 100 : 40,
    queriesPerStep: quick ? 2 : custom ? 4 : 8,
    generations: quick ? 4 : 8,
    maxNewTokens: custom ? 512 : quick ? 96 : 384,
    maxTotalTokens: custom ? 2048 : 1024,
  };
}

/** The chapter's table: one row per metric, one column per policy. */
export function formatTable(rows: readonly PolicyRow[]): string {
  const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
  const metrics: [string, (r: PolicyRow) => string][] = [
    ['Accuracy', (r) => pct(r.accuracy)],
    [
      '  95% CI',
      (r) => `${(100 * r.accuracyCi95[0]).toFixed(0)}–${(100 * r.accuracyCi95[1]).toFixed(0)}%`,
    ],
    ['Format compliance', (r) => pct(r.formatCompliance)],
    ['Avg. length (words)', (r) => r.avgWords.toFixed(0)],
    ['Avg. tokens', (r) => r.avgTokens.toFixed(0)],
    ['Calculator calls', (r) => r.calculatorCalls.toFixed(2)],
    ['Reward (multi-dim)', (r) => r.reward.toFixed(3)],
  ];
  const width = Math.max(...rows.map((r) => r.name.length), 9) + 2;
  const head = `${'Metric'.padEnd(20)}${rows.map((r) => r.name.padStart(width)).join('')}`;
  const lines = metrics.map(
    ([label, f]) => `${label.padEnd(20)}${rows.map((r) => f(r).padStart(width)).join('')}`,
  );
  return [head, '-'.repeat(head.length), ...lines].join('\n');
}

function policyRow(r: EvalResult): PolicyRow {
  const ts = r.trajectories ?? [];
  const n = Math.max(1, ts.length);
  const mean = (f: (t: Trajectory) => number) => ts.reduce((s, t) => s + f(t), 0) / n;
  const transcript = (t: Trajectory) => String(t.metadata?.completion ?? '');
  return {
    name: r.name,
    n: r.n,
    accuracy: r.accuracy,
    accuracyCi95: r.accuracy_ci95,
    formatCompliance: mean((t) => (hasThinkTags(transcript(t)) ? 1 : 0)),
    avgWords: mean((t) => transcript(t).split(/\s+/).filter(Boolean).length),
    avgTokens: r.completion_length_mean,
    calculatorCalls: mean((t) => ((t.metadata?.toolCalls as unknown[]) ?? []).length),
    reward: 0,
  };
}

function copyTokenizerFiles(from: string, to: string): void {
  for (const f of ['tokenizer.json', 'tokenizer_config.json', 'generation_config.json'])
    if (existsSync(join(from, f))) copyFileSync(join(from, f), join(to, f));
}

function agentTokenizer(tok: Tokenizer): PolicyTokenizer {
  return {
    encode: (t) => tok.encode(t),
    decode: (ids) => tok.decode(ids),
    ...(tok.applyChatTemplate && {
      applyChatTemplate: (m, a) => tok.applyChatTemplate!(m, a),
    }),
    ...(tok.eosTokenId !== undefined && { eosTokenId: tok.eosTokenId }),
  };
}

export async function runGsm8k(o: Gsm8kRunOptions): Promise<Gsm8kRunResult> {
  const log = o.log ?? console.log;
  const custom = o.model !== undefined;
  const s = settings(o.quick ?? false, custom);
  const seed = o.seed ?? 1;
  const device = o.device ?? 'cpu';
  const out = resolve(o.out);
  mkdirSync(out, { recursive: true });

  // ---- 1. data in the agent format ------------------------------------------------------------
  const trainAll = await loadDataset(o.data.train, 'gsm8k');
  const testAll = await loadDataset(o.data.test, 'gsm8k');
  const demoRows = trainAll.slice(0, s.demonstrations);
  const grpoRows = trainAll.slice(s.demonstrations, s.demonstrations + s.grpoQuestions);
  const test: SampleRow[] = testAll.slice(0, o.testQuestions ?? s.testQuestions);
  const demos = new Map(demoRows.map((row) => [row.question, toDemonstration(row)]));
  const withCalc = [...demos.values()].filter((d) => d.expression !== undefined).length;
  log(
    `GSM8K: ${trainAll.length} train / ${testAll.length} test; ${demoRows.length} demonstrations ` +
      `(${withCalc} with a calculator call), ${grpoRows.length} GRPO questions, ${test.length} test questions`,
  );

  // ---- the model and its LoRA artifacts ---------------------------------------------------------
  let weights: ModelWeights;
  let tokenizer: Tokenizer;
  let modelDir: string;
  if (o.model) {
    modelDir = resolve(o.model);
    weights = await loadDecoderModel(modelDir, { dtype: 'F32' });
    tokenizer = await loadTokenizer(modelDir);
    log(`model: ${modelDir}`);
  } else {
    modelDir = join(out, 'model');
    const tiny = await createTinyQwen2(modelDir, {
      seed,
      hiddenSize: 64,
      layers: 2,
      heads: 4,
      kvHeads: 2,
      intermediateSize: 128,
      ropeTheta: 10_000,
      embeddingInitRange: 0.2,
      maxPositionEmbeddings: 2048,
    });
    weights = tiny.weights;
    tokenizer = tiny.tokenizer;
    log('model: a tiny Qwen2 created from the seed (2 layers, hidden 64, byte-level tokenizer)');
  }
  // The chapter's LoRA: r 16, alpha 32 on the attention projections (all modules for the tiny
  // model, which has no pretrained knowledge to keep).
  const targets: LoraTargetModule[] = custom
    ? ['q_proj', 'k_proj', 'v_proj', 'o_proj']
    : [...LORA_TARGET_MODULES];
  const lora = { r: 16, alpha: 32, targetModules: targets };
  const loraConfig = { r: 16, lora_alpha: 32, target_modules: targets };
  const artifacts = join(out, 'artifacts');
  buildTrainingArtifacts(weights, artifacts, { lora, maxPositions: s.maxTotalTokens });
  const agentOptions = {
    maxNewTokens: s.maxNewTokens,
    maxAnswerTokens: 24,
    maxTotalTokens: s.maxTotalTokens,
  };

  const evalPolicy = async (name: string, dir: string, adapter?: string): Promise<PolicyRow> => {
    const art = await DecoderArtifacts.open(dir, { graphs: ['decode'], device });
    try {
      const engine = new LocalPolicyEngine({ artifacts: art, tokenizer, model: name });
      if (adapter) await engine.updateAdapter({ name, path: adapter });
      const agent = new CalculatorAgent({
        policy: greedy(engine as PolicyEngine),
        ...agentOptions,
      });
      const r = await evaluate({
        agent,
        dataset: test,
        reward: accuracyReward,
        name,
        keepTrajectories: true,
      });
      const row = policyRow(r);
      const rewards = await Promise.all(
        (r.trajectories ?? []).map(async (t) => {
          const input = {
            question: t.question ?? '',
            groundTruth: t.groundTruth ?? '',
            finalAnswer: t.finalAnswer,
            trajectory: t,
          };
          return (await multiDimensionReward.score(input)).score;
        }),
      );
      row.reward = rewards.reduce((a, b) => a + b, 0) / Math.max(1, rewards.length);
      log(
        `  ${name}: accuracy ${(100 * row.accuracy).toFixed(1)}%, format ${(100 * row.formatCompliance).toFixed(1)}% (${r.time_s.toFixed(1)} s)`,
      );
      return row;
    } finally {
      await art.release();
    }
  };

  log('evaluating the base model…');
  const table: PolicyRow[] = [await evalPolicy('base', artifacts)];

  // ---- 2. SFT with LoRA on the recorded demonstrations --------------------------------------
  const teacher = new CalculatorAgent({
    policy: new DemonstrationPolicy(agentTokenizer(tokenizer), demos),
    tokenizer: agentTokenizer(tokenizer),
    maxNewTokens: 100_000,
    maxAnswerTokens: 100_000,
    maxTotalTokens: 100_000,
  });
  const recorded = await Promise.all(
    demoRows.map((row, i) =>
      teacher.run(row.question, { queryId: `demo-${i}`, groundTruth: row.result }),
    ),
  );
  const fitting = recorded.filter(
    (t) => (t.segments ?? []).reduce((n, g) => n + g.tokens.length, 0) <= s.maxTotalTokens,
  );
  const calcOk = recorded.filter((t) =>
    ((t.metadata?.toolCalls as { ok: boolean }[]) ?? []).some((c) => c.ok),
  ).length;
  log(
    `SFT: ${fitting.length} demonstrations fit ${s.maxTotalTokens} tokens; the calculator ran in ${calcOk} of them ` +
      `(its responses are observations: not trained on)`,
  );
  const sft = await new SFTTrainer({
    config: {
      output_dir: join(out, 'runs', 'sft'),
      // The example's own output folder: a re-run replaces the previous run (logged).
      overwrite_output_dir: true,
      learning_rate: custom ? 2e-4 : 5e-3,
      lr_scheduler_type: 'cosine',
      warmup_ratio: 0.1,
      weight_decay: 0.01,
      max_steps: o.sftSteps ?? s.sftSteps,
      per_device_train_batch_size: custom ? 16 : 8,
      max_length: s.maxTotalTokens,
      lora: loraConfig,
      seed,
    },
    artifacts,
    tokenizer,
    trainDataset: fitting.map((trajectory) => ({ trajectory })),
    device,
  }).train();
  const sftLosses = sft.metrics
    .filter((m) => typeof m.loss === 'number')
    .map((m) => Number(m.loss));
  log(
    `  ${sft.globalStep} steps, loss ${sftLosses[0]?.toFixed(3)} → ${sftLosses.at(-1)?.toFixed(3)}`,
  );
  table.push(await evalPolicy('SFT', artifacts, sft.bestCheckpoint));

  // As the chapter: the SFT adapter merged into the weights is the model GRPO starts from and
  // the KL reference (the reference is the artifacts' base: lora_scale 0), with a fresh adapter.
  const sftAdapter = await loadLoraAdapter(sft.bestCheckpoint, weights.config);
  const sftModel = mergeLora(weights, sftAdapter.lora, sftAdapter.params);
  const sftMerged = join(out, 'models', 'sft-merged');
  await saveHfModel(sftMerged, sftModel);
  copyTokenizerFiles(modelDir, sftMerged);
  const grpoArtifacts = join(out, 'artifacts-grpo');
  buildTrainingArtifacts(sftModel, grpoArtifacts, { lora, maxPositions: s.maxTotalTokens });

  // ---- 3. GRPO with the multi-dimension reward ----------------------------------------------
  log(
    `GRPO: ${o.grpoSteps ?? s.grpoSteps} steps × ${s.queriesPerStep} questions × G=${s.generations}, multi-dimension reward`,
  );
  const grpoSteps: MetricsRecord[] = [];
  const grpo = await new GRPOTrainer({
    config: {
      output_dir: join(out, 'runs', 'grpo'),
      overwrite_output_dir: true,
      max_steps: o.grpoSteps ?? s.grpoSteps,
      queries_per_step: s.queriesPerStep,
      num_generations: s.generations,
      learning_rate: custom ? 5e-6 : 1e-3,
      warmup_ratio: 0.1,
      max_grad_norm: 0.5,
      beta: 0.05,
      temperature: custom ? 0.7 : 1,
      loss_type: 'grpo',
      max_completion_length: s.maxNewTokens,
      lora: loraConfig,
      seed,
    },
    artifacts: grpoArtifacts,
    tokenizer,
    agent: (policy) =>
      new CalculatorAgent({ policy, ...agentOptions, temperature: custom ? 0.7 : 1 }),
    reward: multiDimensionReward,
    trainDataset: grpoRows,
    device,
    onLog: (m) => {
      grpoSteps.push(m);
      const n = (k: string, d = 3) => Number(m[k] ?? 0).toFixed(d);
      log(
        `  step ${m.step}: reward ${n('reward')} ± ${n('reward_std')}, kl ${n('kl', 4)}, ` +
          `trainable tokens ${(100 * Number(m.trainable_token_ratio ?? 0)).toFixed(1)}%, ` +
          `rollout ${n('timing/rollout_s', 1)} s, train ${n('timing/train_s', 1)} s`,
      );
    },
  }).train();
  const adapter = grpo.checkpoint!;
  table.push(await evalPolicy('GRPO', grpoArtifacts, adapter));

  log('');
  log(`GSM8K test set, first ${test.length} questions (greedy):`);
  log(formatTable(table));

  // ---- 5. merged export --------------------------------------------------------------------------
  const exported = join(out, 'export', 'hf-model');
  const { lora: trained, params } = await loadLoraAdapter(adapter, weights.config);
  await saveHfModel(exported, mergeLora(sftModel, trained, params));
  copyTokenizerFiles(modelDir, exported);
  log('');
  log(`SFT model (base + SFT adapter, merged): ${sftMerged}`);
  log(`GRPO adapter (PEFT, on the SFT model): ${adapter}`);
  log(`merged GRPO model (HF folder for transformers / vLLM / TGI): ${exported}`);
  log(
    `  the same with the CLI: pnpm flowgrpo export --model ${sftMerged} --adapter ${adapter} --out ${exported} --merge --overwrite`,
  );
  return {
    table,
    sft: sft.metrics,
    grpo: grpoSteps,
    demonstration: recorded[0]!,
    adapter,
    exported,
    sftMerged,
  };
}
