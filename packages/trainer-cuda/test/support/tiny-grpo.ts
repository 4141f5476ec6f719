// A tiny, fully deterministic GRPO setup on the embedded demo task, shared by the trainer tests
// and by the child process that the resume test kills with SIGKILL.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RolloutAgent } from '@flowgrpo/agent';
import { createTinyQwen2 } from '@flowgrpo/models';
import type { RewardFunction } from '@flowgrpo/reward';
import {
  createAlmanac,
  demoAgent,
  demoReward,
  makeQuestions,
  questionRows,
} from '../../src/demo/index.js';
import {
  buildTrainingArtifacts,
  type GRPOConfigInput,
  GRPOTrainer,
  type GRPOTrainerOptions,
} from '../../src/index.js';

export const LORA = { r: 4, alpha: 8, targetModules: ['q_proj', 'v_proj', 'up_proj'] } as const;

/** Builds (once) the tiny model's artifacts under `root`. */
export async function tinySetup(root: string) {
  const almanac = createAlmanac({ seed: 'tiny', trainLandmarks: 40, testLandmarks: 20 });
  const model = await createTinyQwen2(join(root, 'model'), {
    seed: 'tiny',
    hiddenSize: 32,
    layers: 2,
    heads: 4,
    kvHeads: 2,
    intermediateSize: 64,
    ropeTheta: 10000,
    embeddingInitRange: 0.2,
  });
  const artifacts = join(root, 'artifacts');
  if (!existsSync(join(artifacts, 'artifacts.json')))
    buildTrainingArtifacts(model.weights, artifacts, {
      lora: { ...LORA, targetModules: [...LORA.targetModules] },
      maxPositions: 512,
    });
  return { almanac, model, artifacts };
}

export function tinyConfig(
  outputDir: string,
  extra: Partial<GRPOConfigInput> = {},
): GRPOConfigInput {
  return {
    output_dir: outputDir,
    max_steps: 4,
    num_generations: 4,
    queries_per_step: 2,
    learning_rate: 5e-3,
    max_completion_length: 24,
    temperature: 1,
    beta: 0.04,
    lora: { r: LORA.r, lora_alpha: LORA.alpha, target_modules: [...LORA.targetModules] },
    seed: 7,
    ...extra,
  };
}

/** Trainer options for the tiny setup; `wrapAgent` lets a test observe or hold rollouts. */
export async function tinyTrainer(
  root: string,
  config: GRPOConfigInput,
  o: {
    wrapAgent?: (a: RolloutAgent) => RolloutAgent;
    extra?: Partial<GRPOTrainerOptions>;
    /** Score with the demo's judge (all 0 for an untrained tiny model) instead of quoteReward. */
    judge?: boolean;
  } = {},
): Promise<GRPOTrainer> {
  const { almanac, model, artifacts } = await tinySetup(root);
  return new GRPOTrainer({
    config,
    artifacts,
    tokenizer: model.tokenizer,
    agent: (policy) => {
      const a = demoAgent(policy, almanac, { maxTokens: 24, maxTurns: 2 });
      return o.wrapAgent ? o.wrapAgent(a) : a;
    },
    reward: o.judge ? demoReward() : quoteReward,
    trainDataset: questionRows(makeQuestions(almanac, 'train', 16, 'tiny')),
    ...o.extra,
  });
}

/**
 * A reward with variance even for an untrained model (the judge scores it 0 everywhere, which
 * leaves every advantage 0): the share of double quotes in the planner's text — JSON-ness.
 */
export const quoteReward: RewardFunction<object> = {
  name: 'quotes',
  score(input) {
    const text = input.completion ?? input.finalAnswer;
    const quotes = [...text].filter((ch) => ch === '"').length;
    return { score: text.length === 0 ? 0 : quotes / text.length, details: {} };
  },
};

/** The metrics a run in `out` logged, step by step: the values that depend on the gradients. */
export function metricsOf(out: string) {
  return readFileSync(join(out, 'metrics.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => {
      const { loss, grad_norm, reward, step } = JSON.parse(l) as Record<string, unknown>;
      return { step, loss, grad_norm, reward };
    });
}

/** Drops what differs between two runs of the same steps: wall-clock timings. */
export function comparable(record: Record<string, unknown>): Record<string, unknown> {
  // Wall-clock keys: the run's timing/* and each policy's train/tokens_per_s (`<role>/` too).
  return Object.fromEntries(
    Object.entries(record).filter(
      ([k]) => !k.startsWith('timing/') && !k.endsWith('train/tokens_per_s'),
    ),
  );
}

// As a child process: train (replacing the run in outputDir when the fifth argument is
// 'overwrite'), and block forever in the first rollout of batch `holdAt` after writing `marker` —
// the parent kills it there with SIGKILL, mid-step.
if (process.argv[1]?.endsWith('tiny-grpo.ts') && process.argv[2]) {
  const [root, outputDir, holdAt, marker, mode] = process.argv.slice(2) as [
    string,
    string,
    string,
    string,
    string | undefined,
  ];
  const config = tinyConfig(outputDir, {
    save_steps: 1,
    ...(mode === 'overwrite' && { overwrite_output_dir: true }),
  });
  const trainer = await tinyTrainer(root, config, {
    wrapAgent: (a) => ({
      run(question, context) {
        if (context?.groupId?.startsWith(`batch-${holdAt}/`)) {
          writeFileSync(marker, 'holding');
          setInterval(() => {}, 60_000); // stay alive, mid-step, until the parent's SIGKILL
          return new Promise(() => {});
        }
        return a.run(question, context);
      },
    }),
  });
  await trainer.train();
}
