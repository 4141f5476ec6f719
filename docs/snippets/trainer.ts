// Snippets of docs/guides/trainer.md and docs/scaling.md (compiled by the test command).
import { OpenAIPolicyEngine, type PolicyEngine, TagAgent } from '@flowgrpo/agent';
import type { SampleRow } from '@flowgrpo/core';
import {
  createTinyQwen2,
  DecoderArtifacts,
  greedy,
  LocalPolicyEngine,
  loadDecoderModel,
  loadTokenizer,
} from '@flowgrpo/models';
import { tokenF1Reward } from '@flowgrpo/reward';
import { createCalculatorTool } from '@flowgrpo/tools';
import {
  buildTrainingArtifacts,
  comparisonTable,
  evaluate,
  GRPOTrainer,
  SFTTrainer,
} from '@flowgrpo/trainer';

export async function grpoTagAgent(train: SampleRow[]): Promise<void> {
  // #region grpo
  // A tiny Qwen2 made from a seed (or loadDecoderModel('<HF folder>') for a real one).
  const model = await createTinyQwen2('out/tiny', { seed: 1, hiddenSize: 64, layers: 2 });
  const lora = { r: 8, alpha: 16, targetModules: ['q_proj' as const, 'v_proj' as const] };
  buildTrainingArtifacts(model.weights, 'out/tiny-artifacts', { lora, maxPositions: 1024 });

  const trainer = new GRPOTrainer({
    config: {
      output_dir: 'out/runs/grpo', // config.json, metrics.jsonl, rollouts/, checkpoints, report.html
      max_steps: 10,
      queries_per_step: 4,
      num_generations: 8, // G
      learning_rate: 1e-5,
      loss_type: 'flow', // or grpo, dapo, bnpo, dr_grpo
      beta: 0.04, // KL to the base (LoRA scale 0)
      lora: { r: 8, lora_alpha: 16, target_modules: ['q_proj', 'v_proj'] },
    },
    artifacts: 'out/tiny-artifacts',
    tokenizer: model.tokenizer,
    agent: (policy) => new TagAgent({ policy, tools: [createCalculatorTool()], maxTurns: 4 }),
    reward: tokenF1Reward(),
    trainDataset: train,
    onLog: (m) => console.log(m.step, m.reward, m.kl, m.trainable_token_ratio),
  });
  const result = await trainer.train();
  console.log(result.checkpoint, result.report); // PEFT adapter folder, report.html
  // #endregion grpo
}

export async function sftThenEval(modelDir: string, test: SampleRow[]): Promise<void> {
  // #region sft-eval
  const weights = await loadDecoderModel(modelDir); // HF folder or llama2.c .bin
  const tokenizer = await loadTokenizer(modelDir);
  const lora = { r: 16, alpha: 32, targetModules: ['q_proj' as const, 'v_proj' as const] };
  buildTrainingArtifacts(weights, 'out/artifacts', { lora });
  const sft = await new SFTTrainer({
    config: {
      output_dir: 'out/runs/sft',
      max_steps: 200,
      learning_rate: 2e-4,
      lora: { r: 16, lora_alpha: 32, target_modules: ['q_proj', 'v_proj'] },
    },
    artifacts: 'out/artifacts',
    tokenizer,
    // TRL's formats: {messages}, {prompt, completion}, {text}, or a recorded {trajectory}
    trainDataset: [{ prompt: 'What is 2+2?', completion: ' 4' }],
  }).train();

  const art = await DecoderArtifacts.open('out/artifacts', { graphs: ['decode'] });
  const engine = new LocalPolicyEngine({ artifacts: art, tokenizer });
  const agent = (policy: PolicyEngine) => new TagAgent({ policy, maxTurns: 1 });
  const base = await evaluate({
    agent: agent(greedy(engine)),
    dataset: test,
    reward: tokenF1Reward(),
    name: 'base',
  });
  await engine.updateAdapter({ name: 'sft', path: sft.bestCheckpoint });
  const tuned = await evaluate({
    agent: agent(greedy(engine)),
    dataset: test,
    reward: tokenF1Reward(),
    name: 'sft',
  });
  console.log(comparisonTable([base, tuned]));
  await art.release();
  // #endregion sft-eval
}

export function remoteRollouts(): PolicyEngine {
  // #region remote-rollouts
  // GRPOTrainer({ …, rolloutEngine }) samples on the servers and trains locally: after every
  // update the adapter is saved and hot-loaded into each server; set
  // vllm_importance_sampling_correction: true in the config to weight tokens by π_old / π_sampler.
  const rolloutEngine = new OpenAIPolicyEngine({
    model: 'Qwen/Qwen2.5-1.5B-Instruct',
    baseURLs: ['http://10.0.0.1:8000/v1', 'http://10.0.0.2:8000/v1', 'http://10.0.0.3:8000/v1'],
    loraRoutes: 'vllm',
  });
  // #endregion remote-rollouts
  return rolloutEngine;
}
