// GRPO on the embedded demo task (almanac questions) for the openai-agents-js agent in agent.ts,
// through flowgrpo's policy gateway: the trainer runs the agent G times per question with its
// base URL pointed at the gateway; the gateway records every model call token-exactly; the
// trainer trains the tiny planner's LoRA adapter on exactly those tokens.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { createPolicyGateway, EnginePolicyHost, gatewayAgent } from '@flowgrpo/gateway';
import { createTinyQwen2, DecoderArtifacts, greedy, LocalPolicyEngine } from '@flowgrpo/models';
import type { RewardFunction } from '@flowgrpo/reward';
import {
  buildTrainingArtifacts,
  type EvalResult,
  evaluate,
  GRPOTrainer,
  type MetricsRecord,
  type TrainResult,
} from '@flowgrpo/trainer';
import {
  createAlmanac,
  demoReward,
  lookupAlmanac,
  makeQuestions,
  questionRows,
} from '@flowgrpo/trainer/demo';
import { runAlmanacAgent } from './agent.js';

export interface TrainOptions {
  out: string;
  steps: number;
  queriesPerStep: number;
  generations: number;
  seed?: number;
  /** Held-out questions scored (greedy) before and after training; 0 = none. */
  evalQuestions?: number;
  learningRate?: number;
  /** The agent to train (default: the openai-agents-js agent of agent.ts). */
  runAgent?: typeof runAlmanacAgent;
  log?: (line: string) => void;
}

export interface TrainAgentResult extends TrainResult {
  /** Held-out evaluation of the untrained policy (the adapter starts as B = 0: the base). */
  before?: EvalResult;
}

const LORA = {
  r: 8,
  alpha: 16,
  targetModules: ['q_proj' as const, 'v_proj' as const, 'o_proj' as const, 'up_proj' as const],
};

/**
 * The demo's judge (1 for the right answer) plus a small shaping term, the share of letters and
 * digits in the answer: an untrained tiny model never answers right, and a reward with no
 * variance in a group gives GRPO nothing to learn from.
 */
export function exampleReward(): RewardFunction<object> {
  const judge = demoReward();
  return {
    name: 'judge+shape',
    async score(input) {
      const j = (await judge.score(input)).score;
      const a = input.finalAnswer;
      const shape =
        a.length === 0 ? 0 : [...a].filter((c) => /[a-z0-9 ]/i.test(c)).length / a.length;
      return { score: j + 0.1 * shape, details: { judge: j, shape } };
    },
  };
}

export async function trainAgent(o: TrainOptions): Promise<TrainAgentResult> {
  const seed = o.seed ?? 1;
  const log = o.log ?? (() => {});
  mkdirSync(o.out, { recursive: true });
  const almanac = createAlmanac({ seed, trainLandmarks: 24, testLandmarks: 12 });
  // The tiny byte-level Qwen2 of the embedded demo, created from the seed.
  const model = await createTinyQwen2(join(o.out, 'model'), {
    seed,
    hiddenSize: 32,
    layers: 1,
    heads: 4,
    kvHeads: 2,
    intermediateSize: 64,
    ropeTheta: 10_000,
    embeddingInitRange: 0.2,
    maxPositionEmbeddings: 2048,
  });
  const artifacts = join(o.out, 'artifacts');
  buildTrainingArtifacts(model.weights, artifacts, {
    lora: LORA,
    graphs: ['decode', 'logprobs', 'train_step'],
    maxPositions: 2048,
  });
  // The gateway serves whatever engine the trainer binds to each rollout (its local policy).
  const gateway = await createPolicyGateway({
    host: new EnginePolicyHost({ tokenizer: model.tokenizer, engines: {}, maxContext: 2048 }),
  });
  log(`gateway: ${gateway.baseURL}`);
  // The agent program: the openai-agents-js agent, its base URL pointed at the gateway.
  const agent = gatewayAgent({
    gateway,
    model: 'policy',
    temperature: 1,
    program: ({ baseURL, apiKey, model, question }) =>
      (o.runAgent ?? runAlmanacAgent)({
        baseURL,
        apiKey,
        model,
        question,
        lookup: (q) => lookupAlmanac(almanac, q),
        // The untrained tiny model never ends a reply before max_tokens; over the Responses API
        // the SDK treats such a reply ("incomplete") as a failed run, over Chat Completions as
        // an answer. test/tool-call.test.ts runs the agent over both APIs.
        api: 'chat_completions',
      }),
  });
  const reward = exampleReward();
  const heldOut = o.evalQuestions
    ? questionRows(makeQuestions(almanac, 'test', o.evalQuestions, `${seed}:test`))
    : undefined;
  try {
    let before: EvalResult | undefined;
    if (heldOut) {
      const opened = await DecoderArtifacts.open(artifacts, { graphs: ['decode'] });
      try {
        const engine = new LocalPolicyEngine({ artifacts: opened, tokenizer: model.tokenizer });
        before = await evaluate({
          agent: agent(greedy(engine)),
          dataset: heldOut,
          reward,
          name: 'before',
        });
        log(`held-out reward before training: ${before.reward_mean.toFixed(4)} (greedy)`);
      } finally {
        await opened.release();
      }
    }
    const trainer = new GRPOTrainer({
      config: {
        output_dir: join(o.out, 'run'),
        // The example's own output folder: a re-run replaces the previous run (logged).
        overwrite_output_dir: true,
        max_steps: o.steps,
        queries_per_step: o.queriesPerStep,
        num_generations: o.generations,
        learning_rate: o.learningRate ?? 5e-3,
        temperature: 1,
        beta: 0,
        lora: { r: LORA.r, lora_alpha: LORA.alpha, target_modules: LORA.targetModules },
        seed,
      },
      artifacts,
      tokenizer: model.tokenizer,
      agent,
      reward,
      ...(heldOut && { evalDataset: heldOut }),
      trainDataset: questionRows(makeQuestions(almanac, 'train', 32, `${seed}:train`)),
      onLog: (r: MetricsRecord) => {
        if (typeof r.reward === 'number')
          log(
            `step ${r.step}: reward ${Number(r.reward).toFixed(3)}  logprob_mismatch/max ${Number(r['logprob_mismatch/max']).toExponential(2)}  train tokens ${r['train/tokens']}`,
          );
      },
    });
    const result = await trainer.train();
    if (result.eval)
      log(`held-out reward after training: ${result.eval.reward_mean.toFixed(4)} (greedy)`);
    return { ...result, ...(before && { before }) };
  } finally {
    await gateway.close();
  }
}
