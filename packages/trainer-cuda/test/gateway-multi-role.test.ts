// Several roles, one adapter each, on one base model: two trained (planner, solver) with their
// own advantages and optimizer states, one frozen (critic). The agent program calls each role by
// model name through the gateway and posts per-role rewards.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AgentProgram } from '@flowgrpo/gateway';
import { loadLoraAdapter } from '@flowgrpo/models';
import { afterAll, expect, it } from 'vitest';
import {
  GATEWAY_LORA,
  randomAdapter,
  tinyGatewayModel,
  writeAdapter,
} from '../../gateway/test/support/gateway-fixtures.js';
import { MultiRoleGRPOTrainer } from '../src/index.js';
import { TRAINING_GRAPH_BUILDERS } from '../src/train/training-artifacts.js';

const root = mkdtempSync(join(tmpdir(), 'flowgrpo-gateway-roles-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

it('trains two roles with their own adapters and keeps the frozen role frozen', async () => {
  const { model, artifacts } = await tinyGatewayModel(root, TRAINING_GRAPH_BUILDERS);
  const critic = await writeAdapter(join(root, 'critic'), model, randomAdapter(model, 'critic'));
  // The critic sees one fixed prompt with one fixed seed in every rollout: a frozen adapter must
  // answer it with the same tokens at every step.
  const criticTokens: string[] = [];
  const chat = async (baseURL: string, body: object) => {
    const r = await fetch(`${baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ max_tokens: 8, return_token_ids: true, ...body }),
    });
    if (!r.ok) throw new Error(await r.text());
    return (
      (await r.json()) as { choices: { message: { content: string }; token_ids: number[] }[] }
    ).choices[0]!;
  };
  const program: AgentProgram = async ({ baseURL, rolloutId, question }) => {
    const plan = await chat(baseURL, {
      model: 'planner',
      messages: [{ role: 'user', content: question }],
    });
    const answer = await chat(baseURL, {
      model: 'solver',
      messages: [{ role: 'user', content: `${question}\nPlan: ${plan.message.content}` }],
    });
    const review = await chat(baseURL, {
      model: 'critic',
      messages: [{ role: 'user', content: 'Is it right?' }],
      seed: 123,
    });
    criticTokens.push(review.token_ids.join(','));
    // Per-role rewards: digits for the planner, letters for the solver (variance in every group).
    const share = (s: string, re: RegExp) =>
      s.length === 0 ? 0 : [...s].filter((c) => re.test(c)).length / s.length;
    await fetch(`${baseURL}/rollouts/${rolloutId}/reward`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        reward: share(answer.message.content, /[a-z]/i),
        role_rewards: { planner: share(plan.message.content, /\d/) },
      }),
    });
    return answer.message.content;
  };
  const logs: Record<string, number>[] = [];
  const result = await new MultiRoleGRPOTrainer({
    config: {
      output_dir: join(root, 'run'),
      max_steps: 2,
      num_generations: 4,
      queries_per_step: 2,
      learning_rate: 1e-2,
      beta: 0,
      lora: {
        r: GATEWAY_LORA.r,
        lora_alpha: GATEWAY_LORA.alpha,
        target_modules: [...GATEWAY_LORA.targetModules],
      },
      seed: 5,
    },
    artifacts,
    tokenizer: model.tokenizer,
    roles: {
      planner: { trainable: true },
      solver: { trainable: true },
      critic: { trainable: false, adapter: critic },
    },
    program,
    trainDataset: ['a?', 'b?', 'c?', 'd?'].map((q, id) => ({
      id,
      question: q,
      chain: '',
      result: 'x',
      source: 't',
      extra_info: { ground_truth: 'x', idx: id },
    })),
    onLog: (r) => logs.push(r),
  }).train();

  expect(result.globalStep).toBe(2);
  expect(Object.keys(result.adapters).sort()).toEqual(['planner', 'solver']);
  for (const m of logs)
    for (const role of ['planner', 'solver']) {
      // Each trained role's rows are its own calls, token-exact (sampled = recomputed logprobs).
      expect(m[`${role}/logprob_mismatch/max`]).toBeLessThanOrEqual(1e-4);
      expect(m[`${role}/train_tokens`]).toBeGreaterThan(0);
      expect(Number.isFinite(m[`${role}/loss`])).toBe(true);
      expect(m[`${role}/calls`]).toBe(1);
    }
  expect(logs[0]!['critic/loss']).toBeUndefined();
  // The trained adapters moved away from PEFT's init (B = 0); they differ from each other.
  const planner = (await loadLoraAdapter(result.adapters.planner!, model.weights.config)).params;
  const solver = (await loadLoraAdapter(result.adapters.solver!, model.weights.config)).params;
  const bName = [...planner.keys()].find((k) => k.includes('lora_B'))!;
  expect(planner.get(bName)!.some((v) => v !== 0)).toBe(true);
  expect(Array.from(planner.get(bName)!)).not.toEqual(Array.from(solver.get(bName)!));
  // The frozen critic answered its fixed prompt identically in all 16 rollouts of both steps.
  expect(criticTokens).toHaveLength(16);
  expect(new Set(criticTokens).size).toBe(1);
});
