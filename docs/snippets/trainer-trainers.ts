// Snippets of packages/trainer-cuda/docs/trainers.md (compiled by the test command).
// #region grpo-trainer
import { FlowRollout, OpenAIEngine } from '@flowgrpo/agent';
import { readSampleRows } from '@flowgrpo/core';
import { loadDecoderModel, loadTokenizer } from '@flowgrpo/models';
import { llmJudgeReward } from '@flowgrpo/reward';
import { createCalculatorTool } from '@flowgrpo/tools';
import { buildTrainingArtifacts, GRPOTrainer } from '@flowgrpo/trainer';

buildTrainingArtifacts(await loadDecoderModel('models/planner'), 'out/artifacts', {
  lora: { r: 16, alpha: 32, targetModules: ['q_proj', 'k_proj', 'v_proj', 'o_proj'] },
});
// The fixed roles (executor, verifier, generator) and the judge: a served model, not trained.
const fixed = new OpenAIEngine({
  baseURL: 'http://127.0.0.1:8000/v1',
  model: 'Qwen/Qwen2.5-7B-Instruct',
});
const trainer = new GRPOTrainer({
  config: {
    output_dir: 'out/run',
    max_steps: 200,
    num_generations: 8, // G
    queries_per_step: 16,
    learning_rate: 1e-5,
    loss_type: 'flow',
    beta: 0.04,
    temperature: 0.7, // the policy's calls are sampled at these, whatever the agent asks
    top_p: 0.9,
    lora: { r: 16, lora_alpha: 32, target_modules: ['q_proj', 'k_proj', 'v_proj', 'o_proj'] },
    save_steps: 50,
  },
  artifacts: 'out/artifacts',
  tokenizer: await loadTokenizer('models/planner'),
  agent: (policy) => new FlowRollout({ policy, engine: fixed, tools: [createCalculatorTool()] }),
  reward: llmJudgeReward({ engine: fixed }), // any RewardFunction; combineRewards() for several
  trainDataset: await readSampleRows('out/data/train.parquet'), // SampleRows: question, result
  evalDataset: await readSampleRows('out/data/val.parquet'),
});
const result = await trainer.train(); // result.report → report.html
// #endregion grpo-trainer

// Uses the region's result (noUnusedLocals).
export const shown = result;
