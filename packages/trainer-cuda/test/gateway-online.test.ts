// Training driven by the agents (`flowgrpo serve --train`): agents run episodes against the
// gateway on their own and post rewards with a group id; every queries_per_step complete groups
// of G rollouts make one GRPO update, and the role serves its new adapter from then on.
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError } from '@flowgrpo/core';
import { afterAll, expect, it } from 'vitest';
import { GATEWAY_LORA, tinyGatewayModel } from '../../gateway/test/support/gateway-fixtures.js';
import { MultiRoleGRPOTrainer, OnlineGRPOTrainer } from '../src/index.js';

interface PlainChoice {
  message: { content: string };
  logprobs?: { content: { logprob: number }[] };
}

const root = mkdtempSync(join(tmpdir(), 'flowgrpo-gateway-online-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

it('updates the served adapter from the rewards agents post, group by group', async () => {
  const { model, artifacts } = await tinyGatewayModel(root);
  const out = join(root, 'run');
  const trainer = await OnlineGRPOTrainer.start({
    config: {
      output_dir: out,
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
      seed: 2,
    },
    artifacts,
    tokenizer: model.tokenizer,
    roles: { policy: { trainable: true } },
  });
  const gw = trainer.gateway;
  try {
    const models = (await (await fetch(`${gw.baseURL}/models`)).json()) as {
      data: { id: string }[];
    };
    expect(models.data.map((m) => m.id).sort()).toEqual(['base', 'policy']);
    // An agent of its own: episodes with explicit seeds, a reward it computes, the task as group.
    const episode = async (id: string, task: string, seed: number) => {
      const r = await fetch(`${gw.rolloutBaseURL(id)}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          model: 'policy',
          messages: [{ role: 'user', content: task }],
          max_tokens: 8,
          // The agent asks for 0.6; the trained role samples at the config's temperature (1),
          // which the update assumes: the mismatch check below fails otherwise.
          temperature: 0.6,
          seed,
        }),
      });
      const text = ((await r.json()) as { choices: { message: { content: string } }[] }).choices[0]!
        .message.content;
      const reward =
        text.length === 0 ? 0 : [...text].filter((c) => /[a-z]/i.test(c)).length / text.length;
      const posted = await fetch(`${gw.baseURL}/rollouts/${id}/reward`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ reward, group_id: task }),
      });
      expect(posted.status).toBe(200);
    };
    // A call outside any rollout, on the probe prompt.
    const plain = async (extra: Record<string, unknown>) => {
      const r = await fetch(`${gw.baseURL}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          model: 'policy',
          messages: [{ role: 'user', content: 'probe' }],
          max_tokens: 8,
          ...extra,
        }),
      });
      return ((await r.json()) as { choices: PlainChoice[] }).choices[0]!;
    };
    // The same prompt and seed: the policy's tokens and their logprobs.
    const probe = async () =>
      (await plain({ seed: 1, logprobs: true })).logprobs!.content.map((c) => c.logprob);
    const before = await probe();
    // Calls outside a rollout sample as asked: greedy at temperature 0, whatever the seed (the
    // trained role's imposed temperature applies to named rollouts only).
    const greedy = async (seed: number) => (await plain({ temperature: 0, seed })).message.content;
    expect(await greedy(1)).toBe(await greedy(2));
    for (let batch = 0; batch < 2; batch++) {
      for (let q = 0; q < 2; q++) {
        const task = `task ${batch}-${q}`;
        await Promise.all(
          [0, 1, 2, 3].map((g) => episode(`e${batch}.${q}.${g}`, task, 100 * batch + 10 * q + g)),
        );
      }
      // Two complete groups of 4: one update (agents could go on without waiting; here they
      // wait so that every rollout is sampled by the adapter it is trained from).
      await trainer.idle();
      expect(trainer.step).toBe(batch + 1);
      expect(trainer.pending()).toEqual({});
    }
    await trainer.finished;
    for (const m of trainer.metrics) {
      expect(m['policy/logprob_mismatch/max']).toBeLessThanOrEqual(1e-4);
      expect(m['policy/train_tokens']).toBeGreaterThan(0);
      expect(m.rollouts).toBe(8);
    }
    expect(readFileSync(join(out, 'metrics.jsonl'), 'utf8').trim().split('\n')).toHaveLength(2);
    expect(existsSync(join(out, 'adapters', 'policy', 'adapter_model.safetensors'))).toBe(true);
    // The served policy is the updated one (same prompt and seed, other logprobs).
    expect(await probe()).not.toEqual(before);
  } finally {
    await trainer.close();
  }
  // close() writes report.html with the updates' curves.
  expect(readFileSync(join(out, 'report.html'), 'utf8')).toContain('Online GRPO run');
});

it('refuses the GRPO keys the gateway trainers would ignore, naming each, before opening anything', async () => {
  // Metrics every update, adapters at the end, no checkpoints: a run.json copied from a
  // GRPOTrainer run with save_steps 10 would silently do something else. (num_iterations, the
  // filters and max_nan_steps_in_a_row are GRPOTrainer's update's, accepted.)
  const { model, artifacts } = await tinyGatewayModel(root);
  const config = {
    output_dir: join(root, 'refused'),
    max_steps: 2,
    lora: {
      r: GATEWAY_LORA.r,
      lora_alpha: GATEWAY_LORA.alpha,
      target_modules: [...GATEWAY_LORA.targetModules],
    },
    save_steps: 10,
    save_total_limit: 2,
    num_iterations: 2, // GRPOTrainer's update: accepted
    logging_steps: 1, // the default: what the gateway trainers do anyway, accepted
  };
  const start = OnlineGRPOTrainer.start({
    config,
    artifacts,
    tokenizer: model.tokenizer,
    roles: { policy: { trainable: true } },
  });
  await expect(start).rejects.toBeInstanceOf(ConfigError);
  await expect(start).rejects.toThrow(
    /save_steps = 10, save_total_limit = 2: OnlineGRPOTrainer does not use these keys/,
  );
  expect(
    () =>
      new MultiRoleGRPOTrainer({
        config: { ...config, save_steps: 0, save_total_limit: 0, top_k: 5 },
        artifacts,
        tokenizer: model.tokenizer,
        roles: { policy: { trainable: true } },
        program: () => Promise.reject(new Error('not reached')),
        trainDataset: [],
      }),
  ).toThrow(
    /top_k = 5: MultiRoleGRPOTrainer does not use these keys: .*the roles sample on the gateway/,
  );
  expect(existsSync(join(root, 'refused'))).toBe(false);
});
