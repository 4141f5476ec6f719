// A tiny LoRA policy and a batch of one-turn rollouts of random ids, for the tests that drive
// LoraPolicy directly (policy-worker, importance-weights): the model, the adapter's targets, the
// artifacts with the logprobs and train_step graphs, and GRPO's update hyper-parameters.
import { join } from 'node:path';
import { createRng, type Trajectory } from '@flowgrpo/core';
import {
  type DecoderConfig,
  initTinyWeights,
  type LoraConfig,
  tinyQwen2Config,
} from '@flowgrpo/models';
import { buildTrainingArtifacts, rowsFromTrajectories, targetsOf } from '../../src/index.js';
import { updateHyperParams } from '../../src/update/lora-policy.js';

export const tinyLora: LoraConfig = {
  r: 2,
  alpha: 4,
  targetModules: ['q_proj', 'v_proj', 'down_proj'],
};

/** A 2-layer, 16-wide model from `seed`, its artifacts built into `<tmp>/artifacts`. */
export function tinyLoraArtifacts(
  tmp: string,
  seed: number,
  weightsSeed: string,
): { config: DecoderConfig; dir: string } {
  const config = tinyQwen2Config({
    seed,
    hiddenSize: 16,
    layers: 2,
    heads: 4,
    kvHeads: 2,
    intermediateSize: 24,
  });
  const dir = join(tmp, 'artifacts');
  buildTrainingArtifacts(initTinyWeights(config, weightsSeed), dir, {
    lora: tinyLora,
    graphs: ['logprobs', 'train_step'],
  });
  return { config, dir };
}

/** GRPO's update hyper-parameters (PPO clip 0.2, no KL) at learning rate 1e-2. */
export function tinyUpdateHp(maxTokensPerMicrobatch: number) {
  return updateHyperParams(
    {
      temperature: 1,
      epsilon: 0.2,
      clip_ratio_c: undefined,
      epsilon_high: undefined,
      beta: 0,
      kl_estimator: 'k3',
      max_tokens_per_microbatch: maxTokensPerMicrobatch,
    },
    1e-2,
  );
}

/**
 * One one-turn trajectory per advantage, of random ids from `rngSeed`: `promptLength` prompt
 * tokens, `actionLength(k)` action tokens, each with the sampled log-prob `logprob(k)`.
 */
export function oneTurnBatch(
  config: DecoderConfig,
  o: {
    rngSeed: string;
    advantages: number[];
    promptLength: number;
    actionLength: (k: number) => number;
    logprob: (k: number) => number;
  },
) {
  const rng = createRng(o.rngSeed);
  const id = () => 3 + Math.floor(rng.next() * (config.vocabSize - 3));
  const trajectories: Trajectory[] = o.advantages.map((_, k) => {
    const actionTokens = Int32Array.from({ length: o.actionLength(k) }, id);
    return {
      queryId: 'q',
      groupId: 'g',
      turns: [
        {
          index: 0,
          promptTokens: Int32Array.from({ length: o.promptLength }, id),
          actionTokens,
          actionLogprobs: new Float32Array(actionTokens.length).fill(o.logprob(k)),
          text: '',
          parsed: true,
        },
      ],
      finalAnswer: '',
      stopReason: 'answer',
      timings: {},
    };
  });
  const rows = rowsFromTrajectories(trajectories, o.advantages);
  return { rows, targets: targetsOf(rows) };
}
