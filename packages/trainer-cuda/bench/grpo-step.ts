// A GRPO step, phase by phase (rollout / reward / logprobs / train / sync, from the trainer's own
// timing/* metrics), and the train phase's tokens/s: the embedded demo's tiny planner at the
// demo's batch (8 queries × 8 rollouts) and the Qwen2.5-0.5B shape (24 layers, 896 wide, GQA
// 14/2; random weights — a shape, not a model; the byte-level tokenizer's 259-token vocabulary, so
// sampled ids decode) at a small batch (2 × 2, one 16-token turn), both on the CPU EP. Step 1 warms the sessions up; the table is step 2.
// PyTorch's LoRA train step on the same widths is compared in the train-memory section.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ModelWeights } from '@flowgrpo/models';
import { ByteLevelTokenizer, createTinyQwen2, LORA_TARGET_MODULES } from '@flowgrpo/models';
import { createAlmanac } from '../src/demo/almanac.js';
import { demoAgent, demoReward } from '../src/demo/roles.js';
import { makeQuestions, questionRows } from '../src/demo/task.js';
import { buildTrainingArtifacts } from '../src/index.js';
import type { MetricsRecord } from '../src/run/run-dir.js';
import { GRPOTrainer } from '../src/trainers/grpo-trainer.js';
import { loadAverage } from './anchors.js';
import { qwen05, randomWeights } from './models.js';
import type { BenchSection } from './table.js';

/** The trainer's timing/* phases of a GRPO step, in order. */
export const PHASES = ['rollout', 'reward', 'logprobs', 'train', 'sync'] as const;

async function twoSteps(
  root: string,
  weights: ModelWeights,
  o: { queries: number; generations: number; maxTokens: number; maxTurns: number },
): Promise<MetricsRecord> {
  const lora = { r: 16, alpha: 32, targetModules: [...LORA_TARGET_MODULES] };
  buildTrainingArtifacts(weights, join(root, 'artifacts'), { lora, maxPositions: 512 });
  const almanac = createAlmanac({ seed: 'bench', trainLandmarks: 200, testLandmarks: 20 });
  const trainer = new GRPOTrainer({
    config: {
      output_dir: join(root, 'run'),
      max_steps: 2,
      queries_per_step: o.queries,
      num_generations: o.generations,
      max_completion_length: o.maxTokens,
      learning_rate: 5e-4,
      lora: { r: lora.r, lora_alpha: lora.alpha, target_modules: lora.targetModules },
      seed: 1,
    },
    artifacts: join(root, 'artifacts'),
    tokenizer: new ByteLevelTokenizer(),
    agent: (policy) => demoAgent(policy, almanac, { maxTokens: o.maxTokens, maxTurns: o.maxTurns }),
    reward: demoReward(),
    trainDataset: questionRows(makeQuestions(almanac, 'train', 64, 'bench')),
  });
  const r = await trainer.train();
  return r.metrics.filter((m) => typeof m.reward === 'number').at(-1)!;
}

export async function benchGrpoStep(): Promise<BenchSection> {
  const rows: string[][] = [];
  const notes: string[] = [`load average before: ${loadAverage()}`];
  const cases = [
    {
      name: 'demo planner 3×96, Q=8 G=8',
      weights: async (root: string) =>
        (
          await createTinyQwen2(join(root, 'model'), {
            seed: 1,
            hiddenSize: 96,
            layers: 3,
            heads: 4,
            kvHeads: 2,
            intermediateSize: 288,
            ropeTheta: 10_000,
          })
        ).weights,
      o: { queries: 8, generations: 8, maxTokens: 96, maxTurns: 4 },
    },
    {
      name: 'Qwen2.5-0.5B shape, Q=2 G=2, 16 tok',
      weights: async () => randomWeights({ ...qwen05(24), vocabSize: 259, eosTokenId: 257 }),
      o: { queries: 2, generations: 2, maxTokens: 16, maxTurns: 1 },
    },
  ];
  for (const c of cases) {
    const root = mkdtempSync(join(tmpdir(), 'flowgrpo-bench-grpo-'));
    try {
      const m = await twoSteps(root, await c.weights(root), c.o);
      const total = PHASES.reduce((s, p) => s + Number(m[`timing/${p}_s`] ?? 0), 0);
      rows.push([
        c.name,
        ...PHASES.map((p) => Number(m[`timing/${p}_s`] ?? 0).toFixed(2)),
        total.toFixed(2),
        String(m['train/tokens']),
        Number(m['train/tokens_per_s']).toFixed(0),
      ]);
    } catch (e) {
      notes.push(`${c.name}: ${(e as Error).message}`);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  }
  notes.push(
    'seconds per phase of the second step; train tokens/s = padded-free row tokens over the train phase',
  );
  return {
    title: 'GRPO step phases (CPU EP)',
    header: [
      'model, batch',
      ...PHASES.map((p) => `${p} s`),
      'step s',
      'train tokens',
      'train tok/s',
    ],
    rows,
    notes,
  };
}
