// One GRPO step of a Qwen2.5-1.5B-shaped model in a process of its own (bench/grpo-model.ts), so
// that the peak it reports (VmHWM) is the run's: random weights at the real vocabulary, the
// frozen projections in bf16, 8 rollouts of up to 512 new tokens sampled by the trainer's own
// engine, then the update. First the memory preflight of the default switches (the advice a user
// gets), then the run with the switches it names. Prints one JSON line.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LORA_TARGET_MODULES, loadTokenizer, readArtifactsManifest } from '@flowgrpo/models';
import { createAlmanac } from '../src/demo/almanac.js';
import { demoAgent } from '../src/demo/roles.js';
import { makeQuestions, questionRows } from '../src/demo/task.js';
import { buildTrainingArtifacts, checkGrpoMemory, InsufficientMemoryError } from '../src/index.js';
import { GRPOTrainer } from '../src/trainers/grpo-trainer.js';
import { qwen15, randomWeights } from './models.js';

const [tokenizerDir] = process.argv.slice(2);
const NEW_TOKENS = 512;
// No end-of-sequence token: every rollout samples its 512 tokens, so the step's size is fixed.
const config = { ...qwen15(28), eosTokenId: undefined };
const peakMiB = () =>
  Number(/VmHWM:\s+(\d+)/.exec(readFileSync('/proc/self/status', 'utf8'))![1]) / 1024;

const root = mkdtempSync(join(tmpdir(), 'flowgrpo-bench-grpo-model-'));
try {
  const lora = { r: 16, alpha: 32, targetModules: [...LORA_TARGET_MODULES] };
  let t = performance.now();
  buildTrainingArtifacts(randomWeights(config), join(root, 'artifacts'), {
    lora,
    maxPositions: 1024,
    baseWeightsDtype: 'bfloat16',
    gradientCheckpointing: true,
  });
  const buildS = (performance.now() - t) / 1000;
  const almanac = createAlmanac({ seed: 'bench', trainLandmarks: 200, testLandmarks: 20 });
  const tokenizer = await loadTokenizer(tokenizerDir!);
  const questions = questionRows(makeQuestions(almanac, 'train', 16, 'bench'));
  const trainer = (maxTokensPerMicrobatch: number) =>
    new GRPOTrainer({
      config: {
        max_tokens_per_microbatch: maxTokensPerMicrobatch,
        output_dir: join(root, 'run'),
        max_steps: 1,
        queries_per_step: 1,
        num_generations: 8,
        max_completion_length: NEW_TOKENS,
        learning_rate: 5e-4,
        lora: { r: lora.r, lora_alpha: lora.alpha, target_modules: lora.targetModules },
        seed: 1,
        rollout_concurrency: 8,
        gradient_checkpointing: true,
        share_frozen_weights: true,
      },
      artifacts: join(root, 'artifacts'),
      tokenizer,
      agent: (policy) => demoAgent(policy, almanac, { maxTokens: NEW_TOKENS, maxTurns: 1 }),
      // Random weights answer nothing: a reward that differs between rollouts (the length of the
      // trajectory's record, mod 7) gives the step nonzero advantages, so a real gradient.
      reward: {
        name: 'varied',
        score: (input) => ({
          score: (JSON.stringify(input.trajectory ?? '').length % 7) / 6,
          details: {},
        }),
      },
      trainDataset: questions,
    });
  const run = trainer(8192);
  // The run's own preflight (both switches on): refused, it is said and not run.
  const refusal = (g: GRPOTrainer) => {
    try {
      return { estimate: g.memoryEstimate() };
    } catch (e) {
      if (!(e instanceof InsufficientMemoryError)) throw e;
      return { refused: `${e.message}; ${e.hint}` };
    }
  };
  // The default switches' preflight from the same facts, what a user who names this model meets
  // first (a trainer with them off would refuse these artifacts, built with gradient
  // checkpointing, before its preflight).
  const manifest = readArtifactsManifest(join(root, 'artifacts'));
  let advice = 'fits';
  try {
    checkGrpoMemory(
      { ...run.config, gradient_checkpointing: false, share_frozen_weights: false },
      {
        config: manifest.config,
        lora: manifest.lora,
        headChunk: manifest.vocabChunks?.size ?? manifest.config.vocabSize,
        maxPositions: manifest.maxPositions,
        halfProjections: manifest.baseWeightsDtype !== undefined,
        promptTokens: Math.max(...questions.map((q) => tokenizer.encode(q.question).length)),
        localRollouts: true,
      },
    );
  } catch (e) {
    if (!(e instanceof InsufficientMemoryError)) throw e;
    advice = `${e.message}; ${e.hint}`;
  }
  // Both switches on, at the default micro-batch (8,192 tokens), then at the halvings the
  // preflight's advice names, until one fits: "in the micro-batches the preflight advises".
  let chosen = run;
  let checked = refusal(run);
  const refusals: string[] = [];
  for (let tokens = 4096; checked.refused && tokens >= 512; tokens /= 2) {
    refusals.push(checked.refused);
    chosen = trainer(tokens);
    checked = refusal(chosen);
  }
  const { estimate, refused } = checked;
  if (!estimate) console.log(JSON.stringify({ buildS, advice, refused }));
  else {
    t = performance.now();
    const r = await chosen.train();
    const m = r.metrics.filter((x) => typeof x.reward === 'number').at(-1)!;
    console.log(
      JSON.stringify({
        buildS,
        advice,
        refusals,
        maxTokensPerMicrobatch: chosen.config.max_tokens_per_microbatch,
        estimateMiB: estimate.bytes / 2 ** 20,
        runS: (performance.now() - t) / 1000,
        peakMiB: peakMiB(),
        metrics: m,
      }),
    );
  }
} finally {
  rmSync(root, { recursive: true, force: true });
}
