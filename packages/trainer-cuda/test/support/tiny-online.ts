// A tiny, deterministic `serve --train` run: an agent of its own posts whole groups of episodes
// to an OnlineGRPOTrainer, one episode at a time (so every group holds its rollouts in one
// order), waiting for each update — shared by the online trainer's tests and by the child
// process that the resume test kills with SIGKILL.
import { writeFileSync } from 'node:fs';
import { GATEWAY_LORA, tinyGatewayModel } from '../../../gateway/test/support/gateway-fixtures.js';
import { TRAINING_GRAPH_BUILDERS } from '../../src/graphs/training-artifacts.js';
import type { GRPOConfigInput, RoleSpec } from '../../src/index.js';
import { OnlineGRPOTrainer } from '../../src/index.js';

export const G = 4;
export const Q = 2;

export function onlineConfig(
  outputDir: string,
  extra: Partial<GRPOConfigInput> = {},
): GRPOConfigInput {
  return {
    output_dir: outputDir,
    max_steps: 4,
    num_generations: G,
    queries_per_step: Q,
    learning_rate: 1e-2,
    beta: 0.04,
    lora: {
      r: GATEWAY_LORA.r,
      lora_alpha: GATEWAY_LORA.alpha,
      target_modules: [...GATEWAY_LORA.targetModules],
    },
    seed: 3,
    ...extra,
  };
}

/** An OnlineGRPOTrainer training `policy` over the tiny gateway model (built once under `root`). */
export async function onlineTrainer(
  root: string,
  config: GRPOConfigInput,
  policy: RoleSpec = { trainable: true },
): Promise<OnlineGRPOTrainer> {
  const { model, artifacts } = await tinyGatewayModel(root, TRAINING_GRAPH_BUILDERS);
  return OnlineGRPOTrainer.start({
    config,
    artifacts,
    tokenizer: model.tokenizer,
    roles: { policy },
  });
}

/** The reward the agent computes: the share of letters in the reply. */
const letters = (s: string) =>
  s.length === 0 ? 0 : [...s].filter((c) => /[a-z]/i.test(c)).length / s.length;

/** One episode of task `q` of batch `b` (id and seed fixed by b, q, g); returns its reward. */
export async function episode(
  trainer: OnlineGRPOTrainer,
  b: number,
  q: number,
  g: number,
): Promise<number> {
  const id = `b${b}.q${q}.g${g}`;
  const task = `task ${b}-${q}`;
  const r = await fetch(`${trainer.gateway.rolloutBaseURL(id)}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      model: 'policy',
      messages: [{ role: 'user', content: task }],
      max_tokens: 8,
      seed: 1000 * b + 10 * q + g,
    }),
  });
  if (!r.ok) throw new Error(await r.text());
  const text = ((await r.json()) as { choices: { message: { content: string } }[] }).choices[0]!
    .message.content;
  const reward = letters(text);
  const posted = await fetch(`${trainer.gateway.baseURL}/rollouts/${id}/reward`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ reward, group_id: task }),
  });
  if (!posted.ok) throw new Error(await posted.text());
  return reward;
}

/** Batches [from, to): Q whole groups each, then the update; returns the rewards posted. */
export async function feed(trainer: OnlineGRPOTrainer, from: number, to: number) {
  const rewards: number[][] = [];
  for (let b = from; b < to; b++) {
    const batch: number[] = [];
    for (let q = 0; q < Q; q++)
      for (let g = 0; g < G; g++) batch.push(await episode(trainer, b, q, g));
    await trainer.idle();
    rewards.push(batch);
  }
  return rewards;
}

// As a child process: checkpoint every update, train batches 0 and 1, post half a group of
// batch 2, write `marker` and stay alive — the parent kills it there with SIGKILL.
if (process.argv[1]?.endsWith('tiny-online.ts') && process.argv[2]) {
  const [root, outputDir, marker, extra] = process.argv.slice(2) as [
    string,
    string,
    string,
    string,
  ];
  const trainer = await onlineTrainer(
    root,
    onlineConfig(outputDir, { save_steps: 1, ...JSON.parse(extra) }),
  );
  await feed(trainer, 0, 2);
  await episode(trainer, 2, 0, 0);
  await episode(trainer, 2, 0, 1);
  writeFileSync(marker, 'holding');
  setInterval(() => {}, 60_000); // stay alive, a group half full, until the parent's SIGKILL
}
