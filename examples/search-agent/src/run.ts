// The AReaL search-agent notebook as one flowgrpo program:
//
//   1. a local retrieval server (BM25 over HotpotQA's paragraphs or a FlashRAG wiki sample,
//      `POST /retrieve`), started here and closed at the end
//   2. the policy: a tiny Qwen2 created from a seed (default) or an HF model folder (--model),
//      as ONNX artifacts with LoRA
//   3. (tiny model only, by default) a short SFT warm start on demonstrations recorded through
//      the same agent and server, so that the policy emits the protocol at all
//   4. GRPO steps: G rollouts per question in parallel through the TagAgent (<search> →
//      <information>, masked → <answer>), F1 reward, one line of timings per step
//   5. F1 on held-out questions before and after
import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { PolicyEngine, RolloutAgent } from '@flowgrpo/agent';
import { loadDataset, type SampleRow, type Trajectory } from '@flowgrpo/core';
import {
  createTinyQwen2,
  DecoderArtifacts,
  type DeviceRequest,
  greedy,
  LORA_TARGET_MODULES,
  LocalPolicyEngine,
  loadDecoderModel,
  loadTokenizer,
  type ModelWeights,
  type Tokenizer,
} from '@flowgrpo/models';
import { type RewardFunction, tokenF1Reward } from '@flowgrpo/reward';
import { loadFlashRagPassages, loadHotpotQaPassages, type Passage } from '@flowgrpo/tools';
import {
  buildTrainingArtifacts,
  evaluate,
  GRPOTrainer,
  type MetricsRecord,
  SFTTrainer,
} from '@flowgrpo/trainer';
import { type RetrievalServer, startRetrievalServer } from './retrieval-server.js';
import { createSearchAgent, createSearchTool, DemonstratorPolicy } from './search-agent.js';

export interface SearchAgentRunOptions {
  /** A folder laid out like ../shared: data/hotpotqa (and data/wiki-sample for that corpus). */
  sharedDir: string;
  out: string;
  quick?: boolean;
  /** 'hotpotqa' (default: the 4,947 paragraphs of the questions' contexts) or 'wiki-sample'. */
  corpus?: 'hotpotqa' | 'wiki-sample';
  /** An existing /retrieve endpoint instead of starting ours. */
  retrieverUrl?: string;
  /** An HF model folder (with tokenizer.json); default a tiny Qwen2 from `seed`. */
  model?: string;
  /** SFT warm-start steps (default: 0 with --model, else 400; --quick 40). */
  sftSteps?: number;
  grpoSteps?: number;
  seed?: number;
  device?: DeviceRequest;
  log?: (line: string) => void;
}

export interface PolicyScore {
  name: string;
  n: number;
  /** Mean F1 of the final answers (the reward). */
  f1: number;
  exact: number;
  /** Rollouts that ended with an <answer>. */
  answered: number;
  searchesPerRollout: number;
  tokensPerRollout: number;
}

export interface SearchAgentRunResult {
  scores: PolicyScore[];
  steps: MetricsRecord[];
  /** The /retrieve endpoint used (ours is closed when the run returns). */
  retrieverUrl: string;
  retrieverQueries: number;
  demonstration?: Trajectory;
  checkpoint: string | undefined;
}

function settings(quick: boolean, custom: boolean) {
  return {
    trainQuestions: quick ? 32 : 400,
    testQuestions: quick ? 8 : 100,
    demonstrations: quick ? 32 : 400,
    sftSteps: custom ? 0 : quick ? 40 : 400,
    grpoSteps: quick ? 2 : 20,
    queriesPerStep: quick ? 2 : 4,
    generations: 4,
    topK: quick ? 2 : 3,
    maxNewTokens: custom ? 512 : quick ? 48 : 96,
    maxTurns: quick ? 3 : 4,
    maxTotalTokens: custom ? 4096 : quick ? 768 : 1536,
    maxObservationTokens: custom ? 500 : quick ? 160 : 320,
  };
}

async function loadCorpus(shared: string, which: 'hotpotqa' | 'wiki-sample'): Promise<Passage[]> {
  return which === 'wiki-sample'
    ? loadFlashRagPassages(join(shared, 'data', 'wiki-sample', 'wiki18-sample-1000.jsonl'))
    : loadHotpotQaPassages(join(shared, 'data', 'hotpotqa', 'dev-distractor-500.jsonl'));
}

/** Scores a policy on held-out questions with greedy decoding. */
async function score(
  name: string,
  agent: RolloutAgent,
  rows: readonly SampleRow[],
  reward: RewardFunction<object>,
): Promise<PolicyScore> {
  const r = await evaluate({ agent, dataset: rows, reward, name, keepTrajectories: true });
  const ts = r.trajectories ?? [];
  const n = Math.max(1, ts.length);
  const sum = (f: (t: Trajectory) => number) => ts.reduce((s, t) => s + f(t), 0) / n;
  return {
    name,
    n: r.n,
    f1: r.reward_mean,
    exact: r.accuracy,
    answered: sum((t) => (t.stopReason === 'answer' ? 1 : 0)),
    searchesPerRollout: sum((t) => ((t.metadata?.toolCalls as unknown[]) ?? []).length),
    tokensPerRollout: sum((t) =>
      (t.segments ?? []).filter((s) => s.trainable).reduce((a, s) => a + s.tokens.length, 0),
    ),
  };
}

export function scoreTable(scores: readonly PolicyScore[]): string {
  const head = ['policy', 'n', 'F1', 'exact', 'answered', 'searches', 'tokens'];
  const rows = scores.map((s) => [
    s.name,
    String(s.n),
    s.f1.toFixed(3),
    `${(100 * s.exact).toFixed(1)}%`,
    `${(100 * s.answered).toFixed(1)}%`,
    s.searchesPerRollout.toFixed(2),
    s.tokensPerRollout.toFixed(1),
  ]);
  const w = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) =>
    cells.map((c, i) => (i === 0 ? c.padEnd(w[i]!) : c.padStart(w[i]!))).join('  ');
  return [line(head), ...rows.map(line)].join('\n');
}

/** One line per GRPO step: reward, F1 share, mask ratio and where the time went. */
export function stepLine(m: MetricsRecord): string {
  const n = (k: string, digits = 2) => Number(m[k] ?? 0).toFixed(digits);
  return (
    `step ${m.step}: reward(F1) ${n('reward', 3)} ± ${n('reward_std', 3)}  zero-std groups ${n('frac_reward_zero_std')}  ` +
    `trainable tokens ${(100 * Number(m.trainable_token_ratio ?? 0)).toFixed(1)}%  loss ${n('loss', 4)}  | ` +
    `rollout ${n('timing/rollout_s', 1)} s  reward ${n('timing/reward_s', 2)} s  logprobs ${n('timing/logprobs_s', 1)} s  ` +
    `train ${n('timing/train_s', 1)} s  sync ${n('timing/sync_s', 2)} s`
  );
}

export async function runSearchAgent(o: SearchAgentRunOptions): Promise<SearchAgentRunResult> {
  const log = o.log ?? console.log;
  const s = settings(o.quick ?? false, o.model !== undefined);
  const seed = o.seed ?? 1;
  const device = o.device ?? 'cpu';
  const out = resolve(o.out);
  mkdirSync(out, { recursive: true });

  // ---- 1. data and the retrieval server ------------------------------------------------------
  const questions = await loadDataset(
    join(o.sharedDir, 'data', 'hotpotqa', 'dev-distractor-500.jsonl'),
    'hotpotqa',
  );
  const train = questions.slice(0, s.trainQuestions);
  const test = questions.slice(questions.length - s.testQuestions);
  let server: RetrievalServer | undefined;
  let url = o.retrieverUrl;
  if (!url) {
    const passages = await loadCorpus(o.sharedDir, o.corpus ?? 'hotpotqa');
    server = await startRetrievalServer({ passages });
    url = server.url;
    log(
      `retrieval server: ${url} (BM25 over ${passages.length} passages, ${o.corpus ?? 'hotpotqa'})`,
    );
  } else log(`retrieval server: ${url} (external)`);

  try {
    const search = createSearchTool(url, s.topK);
    const probe = await search.execute({ query: train[0]!.question }, {});
    const first = Array.isArray(probe.output) ? (probe.output[0] as { title?: string }) : undefined;
    log(`  /retrieve "${train[0]!.question.slice(0, 60)}…" → top passage "${first?.title ?? '?'}"`);

    // ---- 2. the policy --------------------------------------------------------------------
    let weights: ModelWeights;
    let tokenizer: Tokenizer;
    if (o.model) {
      weights = await loadDecoderModel(o.model, { dtype: 'F32' });
      tokenizer = await loadTokenizer(o.model);
      log(
        `policy: ${o.model} (${weights.config.numHiddenLayers} layers, hidden ${weights.config.hiddenSize})`,
      );
    } else {
      const tiny = await createTinyQwen2(join(out, 'model'), {
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
      log('policy: a tiny Qwen2 created from the seed (2 layers, hidden 64, byte-level tokenizer)');
    }
    const r = o.model ? 16 : 8;
    const lora = { r, alpha: 2 * r, targetModules: [...LORA_TARGET_MODULES] };
    const artifacts = join(out, 'artifacts');
    buildTrainingArtifacts(weights, artifacts, { lora, maxPositions: s.maxTotalTokens + 64 });
    const loraConfig = { r, lora_alpha: 2 * r, target_modules: lora.targetModules };
    const agentOptions = {
      maxTurns: s.maxTurns,
      maxNewTokens: s.maxNewTokens,
      maxTotalTokens: s.maxTotalTokens,
      maxObservationTokens: s.maxObservationTokens,
    };
    const reward = tokenF1Reward({ variant: 'set' }) as RewardFunction<object>;

    const evalPolicy = async (name: string, adapter?: string) => {
      const art = await DecoderArtifacts.open(artifacts, { graphs: ['decode'], device });
      try {
        const engine = new LocalPolicyEngine({ artifacts: art, tokenizer, model: name });
        if (adapter) await engine.updateAdapter({ name, path: adapter });
        return await score(
          name,
          createSearchAgent(greedy(engine as PolicyEngine), search, agentOptions),
          test,
          reward,
        );
      } finally {
        await art.release();
      }
    };
    const scores: PolicyScore[] = [await evalPolicy('base')];

    // ---- 3. warm start on recorded demonstrations (masked observations) ---------------------
    let adapter: string | undefined;
    let demonstration: Trajectory | undefined;
    const sftSteps = o.sftSteps ?? s.sftSteps;
    if (sftSteps > 0) {
      const answers = new Map(train.map((row) => [row.question, row.result]));
      const demonstrator = new DemonstratorPolicy(
        {
          encode: (t) => tokenizer.encode(t),
          decode: (ids) => tokenizer.decode(ids),
          ...(tokenizer.applyChatTemplate && {
            applyChatTemplate: (m, a) => tokenizer.applyChatTemplate!(m, a),
          }),
        },
        answers,
      );
      const teacher = createSearchAgent(demonstrator, search, agentOptions);
      const demos = await Promise.all(
        train
          .slice(0, s.demonstrations)
          .map((row, i) =>
            teacher.run(row.question, { queryId: `demo-${i}`, groundTruth: row.result }),
          ),
      );
      demonstration = demos[0];
      const trained = demos.flatMap((t) => t.segments ?? []).filter((g) => g.trainable);
      const total = demos.flatMap((t) => t.segments ?? []);
      const count = (gs: typeof total) => gs.reduce((a, g) => a + g.tokens.length, 0);
      log(
        `warm start: ${demos.length} demonstrations through the agent and the server; ` +
          `${(100 * (count(trained) / count(total))).toFixed(1)}% of their tokens are trained on (the rest: prompt and <information>)`,
      );
      const sft = await new SFTTrainer({
        config: {
          output_dir: join(out, 'runs', 'sft'),
          // The example's own output folder: a re-run replaces the previous run (logged).
          overwrite_output_dir: true,
          learning_rate: 5e-3,
          max_steps: sftSteps,
          per_device_train_batch_size: 8,
          lr_scheduler_type: 'cosine',
          warmup_steps: Math.min(5, sftSteps - 1),
          lora: loraConfig,
          max_length: s.maxTotalTokens,
          seed,
        },
        artifacts,
        tokenizer,
        trainDataset: demos.map((trajectory) => ({ trajectory })),
        device,
      }).train();
      const losses = sft.metrics
        .filter((m) => typeof m.loss === 'number')
        .map((m) => Number(m.loss));
      log(
        `  SFT: ${sft.globalStep} steps, loss ${losses[0]?.toFixed(3)} → ${losses.at(-1)?.toFixed(3)}`,
      );
      adapter = sft.bestCheckpoint;
      scores.push(await evalPolicy('sft', adapter));
    }

    // ---- 4. GRPO ------------------------------------------------------------------------------
    log(
      `GRPO: ${o.grpoSteps ?? s.grpoSteps} steps × ${s.queriesPerStep} questions × G=${s.generations} rollouts (in parallel), F1 reward`,
    );
    const steps: MetricsRecord[] = [];
    const trainer = new GRPOTrainer({
      config: {
        output_dir: join(out, 'runs', 'grpo'),
        overwrite_output_dir: true,
        max_steps: o.grpoSteps ?? s.grpoSteps,
        queries_per_step: s.queriesPerStep,
        num_generations: s.generations,
        learning_rate: o.model ? 1e-5 : 1e-3,
        loss_type: 'grpo',
        beta: 0,
        temperature: 1,
        max_completion_length: s.maxNewTokens,
        max_turns: s.maxTurns,
        lora: loraConfig,
        seed,
      },
      artifacts,
      tokenizer,
      agent: (policy) => createSearchAgent(policy, search, { ...agentOptions, temperature: 1 }),
      reward,
      trainDataset: train,
      ...(adapter && { adapter }),
      device,
      onLog: (m) => {
        steps.push(m);
        log(stepLine(m));
      },
    });
    const grpo = await trainer.train();
    scores.push(await evalPolicy('grpo', grpo.checkpoint));

    log('');
    log(`F1 on ${test.length} held-out HotpotQA questions (greedy):`);
    log(scoreTable(scores));
    log(
      `run directory: ${join(out, 'runs', 'grpo')} (metrics.jsonl, rollouts/*.parquet, report.html)`,
    );
    return {
      scores,
      steps,
      retrieverUrl: url,
      retrieverQueries: server?.queries ?? 0,
      ...(demonstration && { demonstration }),
      checkpoint: grpo.checkpoint,
    };
  } finally {
    await server?.close();
    if (server) log('retrieval server stopped');
  }
}
