// A GRPO rollout phase of the embedded demo, before and after issue #11: FlowRollout (the demo's
// planner + rule-based executor/verifier/generator over the almanac) with G = 8 rollouts per
// query, Q queries, at most 64 at once — the GRPO trainer's rollout loop (workers that take the
// next rollout when theirs ends) — against one LocalPolicyEngine. "Before": the standard
// prefill/decode graphs, batches formed per tick and run to their end. "After": the fused generate
// graph with continuous batching. The planner is the demo's tiny Qwen2 after a short SFT on the
// teacher's demonstrations (cached in the temp folder between bench runs), with the GRPO LoRA
// adapter (r = 16, every module); sampling at temperature 1 as in the demo's GRPO config.

import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { SampleRow, Trajectory } from '@flowgrpo/core';
import {
  ByteLevelTokenizer,
  createTinyQwen2,
  DecoderArtifacts,
  DecoderGenerator,
  LORA_TARGET_MODULES,
  LocalPolicyEngine,
  loadHfModel,
} from '@flowgrpo/models';
import { createAlmanac } from '../src/demo/almanac.js';
import { demoAgent } from '../src/demo/roles.js';
import { makeQuestions, questionRows } from '../src/demo/task.js';
import { TeacherPolicy } from '../src/demo/teacher.js';
import { runOne } from '../src/eval/evaluate.js';
import { buildTrainingArtifacts } from '../src/index.js';
import { SFTTrainer } from '../src/trainers/sft-trainer.js';
import { loadAverage, median } from './anchors.js';
import type { BenchSection } from './table.js';

const G = 8;
const QUERIES = 16;
const CONCURRENCY = 64;
const SFT_STEPS = 120;

/** The demo planner after SFT_STEPS of SFT, trained once and kept in the temp folder. */
async function planner(root: string): Promise<string> {
  const done = join(root, 'sft', `checkpoint-${SFT_STEPS}`);
  if (existsSync(join(done, 'model.safetensors'))) return done;
  rmSync(root, { recursive: true, force: true });
  mkdirSync(root, { recursive: true });
  const almanac = createAlmanac({ seed: 1, trainLandmarks: 400, testLandmarks: 300 });
  const questions = makeQuestions(almanac, 'train', 600, '1:train');
  const base = await createTinyQwen2(join(root, 'base'), {
    seed: 1,
    // The demo planner's shape (packages/cli/src/demo/pipeline.ts).
    hiddenSize: 96,
    layers: 3,
    heads: 4,
    kvHeads: 2,
    intermediateSize: 288,
    ropeTheta: 10_000,
    initializerRange: 0.02,
    embeddingInitRange: 0.2,
    maxPositionEmbeddings: 512,
  });
  const teacher = demoAgent(new TeacherPolicy(base.tokenizer, questions, { seed: 1 }), almanac);
  const demos = await Promise.all(
    questions.map((q, i) =>
      teacher.run(q.question, { queryId: `demo-${i}`, groundTruth: q.answer, seed: i }),
    ),
  );
  await new SFTTrainer({
    config: {
      output_dir: join(root, 'sft'),
      use_peft: false,
      learning_rate: 3e-3,
      lr_scheduler_type: 'cosine',
      warmup_steps: 10,
      max_steps: SFT_STEPS,
      per_device_train_batch_size: 16,
      save_total_limit: 1,
      weight_decay: 0,
      seed: 1,
    },
    model: join(root, 'base'),
    tokenizer: base.tokenizer,
    trainDataset: demos.map((t) => ({ trajectory: t })),
  }).train();
  return done;
}

/** The trainer's rollout loop: CONCURRENCY workers over Q × G jobs. */
async function rolloutPhase(
  engine: LocalPolicyEngine,
  rows: SampleRow[],
  almanac: ReturnType<typeof createAlmanac>,
): Promise<{ ms: number; trajectories: Trajectory[] }> {
  const agent = demoAgent(engine, almanac);
  const jobs = rows.flatMap((row, q) => Array.from({ length: G }, (_, g) => ({ row, q, g })));
  const out: Trajectory[] = new Array(jobs.length);
  let next = 0;
  const worker = async () => {
    for (;;) {
      const k = next++;
      if (k >= jobs.length) return;
      const { row, q, g } = jobs[k]!;
      out[k] = await runOne(agent, row, 1000 + q * G + g, undefined, { index: g });
    }
  };
  const t0 = performance.now();
  await Promise.all(Array.from({ length: Math.min(CONCURRENCY, jobs.length) }, worker));
  return { ms: performance.now() - t0, trajectories: out };
}

export async function benchRollout(): Promise<BenchSection> {
  const rows: string[][] = [];
  const notes: string[] = [];
  const t0 = performance.now();
  const model = await loadHfModel(await planner(join(tmpdir(), 'flowgrpo-bench-planner-v1')));
  notes.push(
    `planner ready in ${((performance.now() - t0) / 1000).toFixed(1)} s (SFT ${SFT_STEPS} steps, cached)`,
  );
  const tmp = mkdtempSync(join(tmpdir(), 'flowgrpo-bench-rollout-'));
  try {
    buildTrainingArtifacts(model, join(tmp, 'art'), {
      lora: { r: 16, alpha: 32, targetModules: [...LORA_TARGET_MODULES] },
      graphs: ['decode', 'generate'],
      maxPositions: 512,
    });
    const almanac = createAlmanac({ seed: 1, trainLandmarks: 400, testLandmarks: 300 });
    const questions = questionRows(makeQuestions(almanac, 'train', QUERIES, 'bench-rollout'));
    const tokenizer = new ByteLevelTokenizer();
    // "After" opens the artifacts as the GRPO trainer does (graphs: ['decode']): the generator
    // opens the generate graph itself, on one thread for a model this small. "Before" is the
    // standard path with the trainer's threads then (intra_op_threads unset: ORT's, 1 per core).
    const variants = [
      {
        label: 'prefill/decode graphs, per-tick batches (before)',
        fused: false,
        graphs: ['decode'] as const,
        threads: undefined,
      },
      {
        label: 'generate graph, continuous batching, on this thread',
        fused: true,
        graphs: ['decode'] as const,
        threads: undefined,
        workers: 0,
      },
      {
        label: 'generate graph, continuous batching, on this thread, 2 threads',
        fused: true,
        graphs: ['generate'] as const,
        threads: 2,
        workers: 0,
      },
      {
        label: 'generate graph, 2 worker batchers (after: the default)',
        fused: true,
        graphs: ['decode'] as const,
        threads: undefined,
        workers: undefined,
      },
    ];
    const results = new Map<
      string,
      { ms: number[]; tokens: number; turns: number; joins: number }
    >();
    for (let round = 0; round < 3; round++) {
      for (const v of variants) {
        const art = await DecoderArtifacts.open(join(tmp, 'art'), {
          graphs: [...v.graphs],
          ...(v.threads !== undefined && { intraOpThreads: v.threads }),
        });
        try {
          const generator = new DecoderGenerator(art, {
            useGenerateGraph: v.fused,
            ...('workers' in v && v.workers !== undefined && { generateWorkers: v.workers }),
          });
          const engine = new LocalPolicyEngine({ generator, tokenizer, maxBatchSize: 64 });
          const { ms, trajectories } = await rolloutPhase(engine, questions, almanac);
          const turns = trajectories.flatMap((t) => t.turns ?? []);
          const r = results.get(v.label) ?? { ms: [], tokens: 0, turns: 0, joins: 0 };
          r.ms.push(ms);
          r.tokens = turns.reduce((s, u) => s + u.actionTokens.length, 0);
          r.turns = turns.length;
          r.joins = (await generator.batchStats())?.joins ?? 0;
          results.set(v.label, r);
          await generator.release();
        } finally {
          await art.release();
        }
      }
    }
    const before = median(results.get(variants[0]!.label)!.ms);
    for (const v of variants) {
      const r = results.get(v.label)!;
      const ms = median(r.ms);
      rows.push([
        v.label,
        String(QUERIES * G),
        String(r.turns),
        String(r.tokens),
        (ms / 1000).toFixed(2),
        ((r.tokens / ms) * 1000).toFixed(0),
        (before / ms).toFixed(2),
        v.fused ? String(r.joins) : '—',
      ]);
    }
    notes.push(
      `${QUERIES} queries × G = ${G}, ≤ ${CONCURRENCY} rollouts at once, maxBatchSize 64, temperature 1, ` +
        `LoRA r = 16 on every module (the demo's GRPO settings); tokens = the planner's sampled ` +
        `tokens; time = the whole phase (tools and rule-based roles included), median of 3 ` +
        `alternating rounds; the tokens are the same in every variant (seeded). Joins: times ` +
        `waiting rollouts joined a running batch (0 when the rollouts move in waves: a rollout's ` +
        `next turn reaches the engine a few event-loop turns after its last one ended, by which ` +
        `time its batch-mates, of similar length, have ended too). Load average at the end: ` +
        `${loadAverage()}`,
    );
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  return {
    title: `GRPO rollout phase of the demo (FlowRollout, G = ${G}), before and after`,
    header: ['engine', 'rollouts', 'turns', 'tokens', 'seconds', 'tokens/s', '× before', 'joins'],
    rows,
    notes,
  };
}
