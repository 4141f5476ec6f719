// Several roles, one adapter each, on one base model: two trained (planner, solver) with their
// own advantages and optimizer states, one frozen (critic). The agent program calls each role by
// model name through the gateway and posts per-role rewards. MultiRoleGRPOTrainer is a whole
// trainer: GRPOTrainer's update (num_iterations), per-role checkpoints with exact resume after a
// SIGKILL, evaluation, report.html, and an abort that checkpoints.
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
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
import { TRAINING_GRAPH_BUILDERS } from '../src/graphs/training-artifacts.js';
import { AlarmStopError, listCheckpoints, MultiRoleGRPOTrainer } from '../src/index.js';
import { killAtMarker } from './support/kill-at-marker.js';
import { grpoTrainerKeys, readRecords, recordKeys } from './support/record-keys.js';
import { comparable } from './support/tiny-grpo.js';
import {
  checkpointFiles,
  twoRoleConfig,
  twoRoleProgram,
  twoRoleTrainer,
} from './support/tiny-multi-role.js';

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
      expect(m[`${role}/train/tokens`]).toBeGreaterThan(0);
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

it("num_iterations: 2 is GRPOTrainer's μ — two optimizer steps on one batch of rollouts", async () => {
  const { model } = await tinyGatewayModel(root, TRAINING_GRAPH_BUILDERS);
  const run = async (name: string, numIterations: number) => {
    const out = join(root, name);
    const result = await (
      await twoRoleTrainer(
        root,
        twoRoleConfig(out, { max_steps: numIterations, num_iterations: numIterations }),
      )
    ).train();
    const params = (await loadLoraAdapter(result.adapters.planner!, model.weights.config)).params;
    return { result, params };
  };
  const one = await run('mu-1', 1);
  const two = await run('mu-2', 2);
  // One batch of rollouts (the same seeds: the same rollouts), trained once vs twice.
  expect(one.result.globalStep).toBe(1);
  expect(two.result.globalStep).toBe(2);
  expect(two.result.metrics.map((m) => m.step)).toEqual([2]);
  expect(two.result.metrics[0]!['planner/train/tokens']).toBe(
    one.result.metrics[0]!['planner/train/tokens'],
  );
  const bName = [...one.params.keys()].find((k) => k.includes('lora_B'))!;
  expect(one.params.get(bName)!.some((v) => v !== 0)).toBe(true);
  expect(Array.from(two.params.get(bName)!)).not.toEqual(Array.from(one.params.get(bName)!));
});

it("writes GRPOTrainer's step record per trained role: every key of a GRPOTrainer run, under <role>/", async () => {
  const out = join(root, 'keys');
  await (await twoRoleTrainer(root, twoRoleConfig(out))).train();
  const records = readRecords(out);
  expect(records.map((r) => r.step)).toEqual([1, 2, 3, 4]);
  const expected = await grpoTrainerKeys(join(root, 'grpo'));
  const roles = ['planner', 'solver'];
  for (const name of roles) {
    const role = recordKeys(records, { name, roles });
    expect(
      expected.filter((k) => !role.includes(k)),
      name,
    ).toEqual([]);
  }
  // Each role's record is its own batch's (its calls, its rewards): the solver, which posts no
  // role reward, is scored by the rollout's.
  for (const r of records) {
    expect(r['planner/train/tokens']).not.toBe(r['solver/train/tokens']);
    expect(r['solver/reward']).toBe(r.reward);
  }
});

it("judges each trained role's own record: its alarm is <role>/alarms/<name>, and stop_on ends the run on it", async () => {
  // The planner's posted role reward never varies; the rollout's (the solver's) does.
  const chat = async (baseURL: string, model: string, content: string) => {
    const r = await fetch(`${baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model, messages: [{ role: 'user', content }], max_tokens: 8 }),
    });
    return ((await r.json()) as { choices: { message: { content: string } }[] }).choices[0]!.message
      .content;
  };
  const program: AgentProgram = async ({ baseURL, rolloutId, question }) => {
    const plan = await chat(baseURL, 'planner', question);
    const answer = await chat(baseURL, 'solver', `${question}\nPlan: ${plan}`);
    const letters = [...answer].filter((c) => /[a-z]/i.test(c)).length / Math.max(1, answer.length);
    await fetch(`${baseURL}/rollouts/${rolloutId}/reward`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ reward: letters, role_rewards: { planner: 0.5 } }),
    });
    return answer;
  };
  const out = join(root, 'alarm');
  const alarms = { window: 2, stop_on: ['zero_variance_groups' as const] };
  const error = await (await twoRoleTrainer(root, twoRoleConfig(out, { alarms }), program))
    .train()
    .catch((e: unknown) => e);
  expect(AlarmStopError.isInstance(error)).toBe(true);
  expect(error).toMatchObject({ alarm: 'zero_variance_groups', role: 'planner', step: 2 });
  expect((error as Error).message).toContain('alarm planner/zero_variance_groups');
  const last = readRecords(out).at(-1)!;
  expect(last).toMatchObject({
    step: 2,
    'planner/frac_reward_zero_std': 1,
    'planner/alarms/zero_variance_groups': 1,
    'solver/alarms/zero_variance_groups': 0,
    'alarms/zero_variance_groups': 0,
  });
  // The policies of the step the alarm was raised at are kept for reading.
  expect(listCheckpoints(out).map((c) => c.step)).toEqual([2]);
});

it('killed with SIGKILL mid-step and resumed, continues bit-identically to the uninterrupted run', async () => {
  const full = join(root, 'full');
  const uninterrupted = await (
    await twoRoleTrainer(root, twoRoleConfig(full, { save_steps: 1, save_total_limit: 2 }))
  ).train();
  expect(uninterrupted.globalStep).toBe(4);
  // save_total_limit: the two latest; each a folder per trained role, adapter + optimizer state.
  expect(listCheckpoints(full).map((c) => c.step)).toEqual([3, 4]);
  for (const role of ['planner', 'solver'])
    for (const f of checkpointFiles(full, 4, role)) expect(existsSync(f)).toBe(true);
  expect(readFileSync(join(full, 'report.html'), 'utf8')).toContain('Multi-role GRPO run');
  expect(readFileSync(join(full, 'metrics.jsonl'), 'utf8').trim().split('\n')).toHaveLength(4);

  const out = join(root, 'killed');
  const marker = join(root, 'holding');
  // The child holds inside batch 2's rollouts (after checkpoint-2 was written): kill it there.
  expect(await killAtMarker('tiny-multi-role.ts', [root, out, '2', marker], marker)).toBe(
    'SIGKILL',
  );
  expect(listCheckpoints(out).map((c) => c.step)).toEqual([1, 2]);

  const resumed = await (
    await twoRoleTrainer(root, twoRoleConfig(out, { save_steps: 1, resume_from_checkpoint: true }))
  ).train();
  expect(resumed.globalStep).toBe(4);
  // Steps 1–2 from before the kill, 3–4 after: the same records (but the clock), the same bits.
  expect(resumed.metrics.map(comparable)).toEqual(uninterrupted.metrics.map(comparable));
  for (const role of ['planner', 'solver'])
    for (const [a, b] of zip(checkpointFiles(full, 4, role), checkpointFiles(out, 4, role)))
      expect(readFileSync(b).equals(readFileSync(a))).toBe(true);
}, 300_000);

const zip = <A, B>(a: readonly A[], b: readonly B[]) => a.map((x, i) => [x, b[i]!] as const);

it('eval_steps: the trained roles, greedy, on the eval dataset — at each interval and at the end', async () => {
  const out = join(root, 'eval');
  const result = await (
    await twoRoleTrainer(root, twoRoleConfig(out, { max_steps: 2, eval_steps: 1 }), undefined, {
      evalDataset: ['p?', 'q?', 'r?'].map((q, id) => ({
        id,
        question: q,
        chain: '',
        result: 'x',
        source: 't',
        extra_info: { ground_truth: 'x', idx: id },
      })),
    })
  ).train();
  // Step 1's evaluation, then the final one (HF: none at the last step besides the final).
  const evals = result.metrics.filter((m) => m['eval/accuracy'] !== undefined);
  expect(evals.map((m) => m.step)).toEqual([1, 2]);
  expect(result.eval?.n).toBe(3);
  expect(existsSync(join(out, 'eval', 'step-1.json'))).toBe(true);
  expect(existsSync(join(out, 'eval', 'final.json'))).toBe(true);
  expect(JSON.parse(readFileSync(join(out, 'eval', 'final.json'), 'utf8')).n).toBe(3);
});

it('an abort during a batch stops the run there and checkpoints the last finished step', async () => {
  const out = join(root, 'aborted');
  const controller = new AbortController();
  const program: AgentProgram = async (a) => {
    if (a.rolloutId.startsWith('b1.')) {
      controller.abort();
      throw new Error('stopped by the user');
    }
    return twoRoleProgram(a);
  };
  const result = await (
    await twoRoleTrainer(root, twoRoleConfig(out), program, { signal: controller.signal })
  ).train();
  expect(result.stopped).toBe('aborted');
  expect(result.globalStep).toBe(1);
  expect(listCheckpoints(out).map((c) => c.step)).toEqual([1]);
  for (const f of checkpointFiles(out, 1, 'planner')) expect(existsSync(f)).toBe(true);
});
