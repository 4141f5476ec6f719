// Not part of the README app: trains a planner with the installed trainer — a tiny model created
// from a seed, 2 steps of Flow-GRPO on the embedded demo's almanac task — and prints the steps.
import { join } from 'node:path';
import { createTinyQwen2 } from '@flowgrpo/models';
import { buildTrainingArtifacts, GRPOTrainer } from '@flowgrpo/trainer';
import {
  createAlmanac,
  demoAgent,
  demoReward,
  makeQuestions,
  questionRows,
} from '@flowgrpo/trainer/demo';

const dir = process.argv[2] ?? 'out';
const almanac = createAlmanac({ seed: 1, trainLandmarks: 20, testLandmarks: 10 });
const model = await createTinyQwen2(join(dir, 'model'), { seed: 1, hiddenSize: 16, layers: 1 });
const lora = { r: 2, alpha: 4, targetModules: ['q_proj', 'v_proj'] as const };
buildTrainingArtifacts(model.weights, join(dir, 'artifacts'), {
  lora: { ...lora, targetModules: [...lora.targetModules] },
  maxPositions: 256,
});
const trainer = new GRPOTrainer({
  config: {
    output_dir: join(dir, 'run'),
    // The example's own output folder: a re-run replaces the previous run (logged).
    overwrite_output_dir: true,
    max_steps: 2,
    queries_per_step: 2,
    num_generations: 2,
    max_completion_length: 16,
    lora: { r: 2, lora_alpha: 4, target_modules: [...lora.targetModules] },
  },
  artifacts: join(dir, 'artifacts'),
  tokenizer: model.tokenizer,
  agent: (policy) => demoAgent(policy, almanac, { maxTokens: 16, maxTurns: 1 }),
  reward: demoReward(),
  trainDataset: questionRows(makeQuestions(almanac, 'train', 8, 'app')),
});
const result = await trainer.train();
console.log(`steps: ${result.globalStep}, checkpoint: ${result.checkpoint ? 'yes' : 'no'}`);
