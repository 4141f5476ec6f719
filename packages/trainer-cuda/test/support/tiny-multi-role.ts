// A tiny, deterministic two-role run through the gateway (planner → solver, each its own LoRA
// adapter), shared by the multi-role trainer tests and by the child process that the resume
// test kills with SIGKILL.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { AgentProgram } from '@flowgrpo/gateway';
import { GATEWAY_LORA, tinyGatewayModel } from '../../../gateway/test/support/gateway-fixtures.js';
import { TRAINING_GRAPH_BUILDERS } from '../../src/graphs/training-artifacts.js';
import type { GRPOConfigInput } from '../../src/index.js';
import { MultiRoleGRPOTrainer, type MultiRoleGRPOTrainerOptions } from '../../src/index.js';

async function chat(baseURL: string, body: object): Promise<string> {
  const r = await fetch(`${baseURL}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ max_tokens: 8, ...body }),
  });
  if (!r.ok) throw new Error(await r.text());
  return ((await r.json()) as { choices: { message: { content: string } }[] }).choices[0]!.message
    .content;
}

const share = (s: string, re: RegExp) =>
  s.length === 0 ? 0 : [...s].filter((c) => re.test(c)).length / s.length;

/** Planner then solver; per-role rewards (digits for the planner, letters for the solver). */
export const twoRoleProgram: AgentProgram = async ({ baseURL, rolloutId, question }) => {
  const plan = await chat(baseURL, {
    model: 'planner',
    messages: [{ role: 'user', content: question }],
  });
  const answer = await chat(baseURL, {
    model: 'solver',
    messages: [{ role: 'user', content: `${question}\nPlan: ${plan}` }],
  });
  await fetch(`${baseURL}/rollouts/${rolloutId}/reward`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      reward: share(answer, /[a-z]/i),
      role_rewards: { planner: share(plan, /\d/) },
    }),
  });
  return answer;
};

export function twoRoleConfig(
  outputDir: string,
  extra: Partial<GRPOConfigInput> = {},
): GRPOConfigInput {
  return {
    output_dir: outputDir,
    max_steps: 4,
    num_generations: 4,
    queries_per_step: 2,
    learning_rate: 1e-2,
    beta: 0.04,
    lora: {
      r: GATEWAY_LORA.r,
      lora_alpha: GATEWAY_LORA.alpha,
      target_modules: [...GATEWAY_LORA.targetModules],
    },
    seed: 5,
    ...extra,
  };
}

/** A MultiRoleGRPOTrainer over the tiny gateway model (artifacts built once under `root`). */
export async function twoRoleTrainer(
  root: string,
  config: GRPOConfigInput,
  program: AgentProgram = twoRoleProgram,
  extra: Partial<MultiRoleGRPOTrainerOptions> = {},
): Promise<MultiRoleGRPOTrainer> {
  const { model, artifacts } = await tinyGatewayModel(root, TRAINING_GRAPH_BUILDERS);
  return new MultiRoleGRPOTrainer({
    config,
    artifacts,
    tokenizer: model.tokenizer,
    roles: { planner: { trainable: true }, solver: { trainable: true } },
    program,
    trainDataset: ['a?', 'b?', 'c?', 'd?', 'e?'].map((q, id) => ({
      id,
      question: q,
      chain: '',
      result: 'x',
      source: 't',
      extra_info: { ground_truth: 'x', idx: id },
    })),
    ...extra,
  });
}

// As a child process: train with a checkpoint every step, and block forever in the first
// rollout of batch `holdAt` after writing `marker` — the parent kills it there with SIGKILL.
if (process.argv[1]?.endsWith('tiny-multi-role.ts') && process.argv[2]) {
  const [root, outputDir, holdAt, marker] = process.argv.slice(2) as [
    string,
    string,
    string,
    string,
  ];
  const program: AgentProgram = (a) => {
    if (a.rolloutId.startsWith(`b${holdAt}.`)) {
      writeFileSync(marker, 'holding');
      setInterval(() => {}, 60_000); // stay alive, mid-step, until the parent's SIGKILL
      return new Promise(() => {});
    }
    return twoRoleProgram(a);
  };
  await (await twoRoleTrainer(root, twoRoleConfig(outputDir, { save_steps: 1 }), program)).train();
}

export const checkpointFiles = (out: string, step: number, role: string) =>
  ['adapter_model.safetensors', 'adapter_config.json', 'optimizer.safetensors'].map((f) =>
    join(out, `checkpoint-${step}`, role, f),
  );
