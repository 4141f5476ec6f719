// Training driven by the agents (`flowgrpo serve --train`): agents run episodes against the
// gateway on their own and post rewards with a group id; every queries_per_step complete groups
// of G rollouts make one GRPO update, and the role serves its new adapter from then on. The run
// is a whole trainer: checkpoints, rotation, exact resume after a SIGKILL, logging_steps.
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError } from '@flowgrpo/core';
import type { LocalPolicyEngine } from '@flowgrpo/models';
import { afterAll, expect, it } from 'vitest';
import {
  GATEWAY_LORA,
  randomAdapter,
  tinyGatewayModel,
} from '../../gateway/test/support/gateway-fixtures.js';
import { TRAINING_GRAPH_BUILDERS } from '../src/graphs/training-artifacts.js';
import {
  buildTrainingArtifacts,
  listCheckpoints,
  MultiRoleGRPOTrainer,
  NonFiniteLossError,
  OnlineGRPOTrainer,
} from '../src/index.js';
import { killAtMarker } from './support/kill-at-marker.js';
import { grpoTrainerKeys, readRecords, recordKeys } from './support/record-keys.js';
import { comparable } from './support/tiny-grpo.js';
import { checkpointFiles } from './support/tiny-multi-role.js';
import { feed, onlineConfig, onlineTrainer } from './support/tiny-online.js';

interface PlainChoice {
  message: { content: string };
  logprobs?: { content: { logprob: number }[] };
}

const root = mkdtempSync(join(tmpdir(), 'flowgrpo-gateway-online-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

it('updates the served adapter from the rewards agents post, group by group', async () => {
  const { model, artifacts } = await tinyGatewayModel(root, TRAINING_GRAPH_BUILDERS);
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
      expect(m['policy/train/tokens']).toBeGreaterThan(0);
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

it("writes GRPOTrainer's step record: every key of a GRPOTrainer run, the role's under policy/", async () => {
  const out = join(root, 'keys');
  const trainer = await onlineTrainer(root, onlineConfig(out));
  try {
    await feed(trainer, 0, 4);
    await trainer.finished;
  } finally {
    await trainer.close();
  }
  const records = readRecords(out);
  expect(records.map((r) => r.step)).toEqual([1, 2, 3, 4]);
  // The agents choose the tasks (no epoch), roll out and score them (no rollout or reward phase).
  const theirs = new Set(['epoch', 'timing/rollout_s', 'timing/reward_s']);
  const expected = (await grpoTrainerKeys(join(root, 'grpo'))).filter((k) => !theirs.has(k));
  const policy = recordKeys(records, { name: 'policy', roles: ['policy'] });
  expect(expected.filter((k) => !policy.includes(k))).toEqual([]);
  // So every alarm is judged for the role: entropy, clip ratio, lengths, zero-variance groups …
  for (const alarm of [
    'entropy_collapse',
    'clip_ratio_spike',
    'length_blowup',
    'truncation',
    'zero_variance_groups',
    'logprob_mismatch_spike',
    'grad_norm_spike',
  ])
    for (const r of records) expect(r[`policy/alarms/${alarm}`], alarm).toBeTypeOf('number');
  // … and the rollouts' as a whole, unprefixed.
  for (const k of ['reward', 'reward_std', 'frac_reward_zero_std', 'completions/mean_length'])
    for (const r of records) expect(r[k], k).toBeTypeOf('number');
  // The rollouts are in Parquet, as GRPOTrainer's: the viewer reads them the same.
  expect(existsSync(join(out, 'rollouts', 'step-000004.parquet'))).toBe(true);
}, 120_000);

it('killed with SIGKILL after a checkpoint and resumed, continues bit-identically to the uninterrupted run fed the same groups', async () => {
  // save_steps, save_total_limit, logging_steps and success_threshold, all taking effect.
  const keys = { logging_steps: 2, success_threshold: 0.5 };
  const full = join(root, 'full');
  const uninterrupted = await onlineTrainer(
    root,
    onlineConfig(full, { ...keys, save_steps: 1, save_total_limit: 2 }),
  );
  let rewards: number[][];
  try {
    rewards = await feed(uninterrupted, 0, 4);
    await uninterrupted.finished;
  } finally {
    await uninterrupted.close();
  }
  // save_total_limit: the two latest; each a folder per trained role, adapter + optimizer state.
  expect(listCheckpoints(full).map((c) => c.step)).toEqual([3, 4]);
  for (const f of checkpointFiles(full, 4, 'policy')) expect(existsSync(f)).toBe(true);
  // logging_steps: 2 → steps 2 and 4 in metrics.jsonl; every update in trainer_state.json.
  const lines = readFileSync(join(full, 'metrics.jsonl'), 'utf8').trim().split('\n');
  const logged = lines.map((l) => JSON.parse(l) as Record<string, number>);
  expect(logged.map((m) => m.step)).toEqual([2, 4]);
  expect(uninterrupted.metrics.map((m) => m.step)).toEqual([1, 2, 3, 4]);
  const state = JSON.parse(readFileSync(join(full, 'checkpoint-4', 'trainer_state.json'), 'utf8'));
  expect(state.global_step).toBe(4);
  expect(state.batches).toBe(4);
  // success_threshold: accuracy is the share of the batch's rewards at or above 0.5.
  for (const [k, m] of uninterrupted.metrics.entries())
    expect(m.accuracy).toBe(rewards[k]!.filter((r) => r >= 0.5).length / rewards[k]!.length);
  expect(new Set(uninterrupted.metrics.map((m) => m.accuracy)).size).toBeGreaterThan(1);

  const out = join(root, 'killed');
  const marker = join(root, 'holding');
  // The child holds with a group of batch 2 half full (after checkpoint-2): kill it there.
  expect(
    await killAtMarker('tiny-online.ts', [root, out, marker, JSON.stringify(keys)], marker),
  ).toBe('SIGKILL');
  expect(listCheckpoints(out).map((c) => c.step)).toEqual([1, 2]);

  // A fresh run into it is refused (HF's rule); resume_from_checkpoint continues it.
  await expect(onlineTrainer(root, onlineConfig(out, keys))).rejects.toThrow(
    /already holds a run's checkpoints/,
  );
  const resumed = await onlineTrainer(
    root,
    onlineConfig(out, { ...keys, save_steps: 1, resume_from_checkpoint: true }),
  );
  try {
    expect(resumed.step).toBe(2);
    // The half-filled group died with the child: its agents post the batch again, whole.
    expect(resumed.pending()).toEqual({});
    await feed(resumed, 2, 4);
    await resumed.finished;
  } finally {
    await resumed.close();
  }
  // Steps 1–2 from before the kill, 3–4 after: the same records (but the clock), the same bits.
  expect(resumed.metrics.map(comparable)).toEqual(uninterrupted.metrics.map(comparable));
  const resumedLines = readFileSync(join(out, 'metrics.jsonl'), 'utf8').trim().split('\n');
  expect(resumedLines.map((l) => comparable(JSON.parse(l)))).toEqual(logged.map(comparable));
  for (const [a, b] of zip(checkpointFiles(full, 4, 'policy'), checkpointFiles(out, 4, 'policy')))
    expect(readFileSync(b).equals(readFileSync(a))).toBe(true);
}, 300_000);

const zip = <A, B>(a: readonly A[], b: readonly B[]) => a.map((x, i) => [x, b[i]!] as const);

it('close() before max_steps checkpoints the last update; a resume from it goes on from there', async () => {
  const out = join(root, 'closed');
  const first = await onlineTrainer(root, onlineConfig(out, { save_steps: 10 }));
  try {
    await feed(first, 0, 1);
  } finally {
    await first.close();
  }
  // No save_steps boundary was crossed: close() wrote checkpoint-1, and the adapters.
  expect(listCheckpoints(out).map((c) => c.step)).toEqual([1]);
  expect(existsSync(join(out, 'adapters', 'policy', 'adapter_model.safetensors'))).toBe(true);
  const again = await onlineTrainer(
    root,
    onlineConfig(out, { save_steps: 10, resume_from_checkpoint: true }),
  );
  try {
    expect(again.step).toBe(1);
  } finally {
    await again.close();
  }
  // Nothing trained since: no new checkpoint, checkpoint-1 is left as it was.
  expect(listCheckpoints(out).map((c) => c.step)).toEqual([1]);

  // overwrite_output_dir: a fresh run from step 0 replaces it once it has a checkpoint.
  const over = await onlineTrainer(root, onlineConfig(out, { overwrite_output_dir: true }));
  try {
    expect(over.step).toBe(0);
    await feed(over, 0, 2);
  } finally {
    await over.close();
  }
  expect(listCheckpoints(out).map((c) => c.step)).toEqual([2]);
  expect(readFileSync(join(out, 'metrics.jsonl'), 'utf8').trim().split('\n')).toHaveLength(2);
});

it('a failed update stops training: close() saves nothing more and throws its error', async () => {
  // A corrupt adapter (one NaN) makes every loss non-finite; max_nan_steps_in_a_row: 1 stops it.
  const { model } = await tinyGatewayModel(root, TRAINING_GRAPH_BUILDERS);
  const adapter = randomAdapter(model, 'nan');
  [...adapter.values()][0]![0] = Number.NaN;
  const out = join(root, 'failed');
  const trainer = await onlineTrainer(
    root,
    onlineConfig(out, { save_steps: 1, max_nan_steps_in_a_row: 1 }),
    { trainable: true, adapter },
  );
  await expect(feed(trainer, 0, 1)).rejects.toBeInstanceOf(NonFiniteLossError);
  await trainer.finished;
  await expect(trainer.close()).rejects.toBeInstanceOf(NonFiniteLossError);
  expect(listCheckpoints(out)).toEqual([]);
  expect(existsSync(join(out, 'adapters'))).toBe(false);
  // Closed whole: the lock is released, a new run may open the folder.
  await (await onlineTrainer(root, onlineConfig(out))).close();
});

it('refuses the GRPO keys it cannot act on, each with why, before opening anything', async () => {
  // The agents run their rollouts: their turns, top_k and failures are theirs, not the trainer's.
  const { model, artifacts } = await tinyGatewayModel(root, TRAINING_GRAPH_BUILDERS);
  const config = (extra: Record<string, unknown>) => ({
    ...onlineConfig(join(root, 'refused')),
    num_iterations: 2, // GRPOTrainer's update: accepted
    ...extra,
  });
  const start = (extra: Record<string, unknown>) =>
    OnlineGRPOTrainer.start({
      config: config(extra),
      artifacts,
      tokenizer: model.tokenizer,
      roles: { policy: { trainable: true } },
    });
  await expect(start({ max_turns: 3, top_k: 5 })).rejects.toThrow(
    /max_turns = 3, top_k = 5: OnlineGRPOTrainer does not use these keys: the agents run their own rollouts/,
  );
  // No memory preflight here: skipping it would skip nothing.
  await expect(start({ skip_memory_check: true })).rejects.toThrow(
    /skip_memory_check = true: the gateway trainers run no memory preflight/,
  );
  // eval_steps: no dataset of its own; the error says what to use instead.
  const evalSteps = start({ eval_steps: 2 });
  await expect(evalSteps).rejects.toBeInstanceOf(ConfigError);
  await expect(evalSteps).rejects.toThrow(/eval_steps = 2: OnlineGRPOTrainer has no dataset/);
  await expect(evalSteps).rejects.toMatchObject({
    hint: expect.stringContaining('flowgrpo eval --adapter'),
  });
  // load_best_model_at_end: there is nothing to evaluate, so no best to keep.
  await expect(start({ load_best_model_at_end: true })).rejects.toMatchObject({
    key: 'load_best_model_at_end',
    message: expect.stringContaining('OnlineGRPOTrainer was given no eval dataset'),
  });
  expect(
    () =>
      new MultiRoleGRPOTrainer({
        config: { ...config({}), top_k: 5 },
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

it('share_sampling_weights: the served roles sample with the decode session alone, even where the artifacts have a generate graph', async () => {
  // The fused generator opens an artifacts folder's generate graph (and its float32 copies) of
  // its own accord; with the key, the roles' engines never do.
  const { model } = await tinyGatewayModel(root, TRAINING_GRAPH_BUILDERS);
  const withGenerate = join(root, 'artifacts-with-generate');
  buildTrainingArtifacts(model.weights, withGenerate, {
    lora: GATEWAY_LORA,
    graphs: ['generate', 'decode', 'logprobs', 'train_step'],
    maxPositions: 1024,
  });
  // bf16 artifacts whose decode graph casts at load: refused before output_dir is opened.
  const halfAtLoad = join(root, 'artifacts-bf16-at-load');
  buildTrainingArtifacts(model.weights, halfAtLoad, {
    lora: GATEWAY_LORA,
    graphs: ['decode', 'logprobs', 'train_step'],
    maxPositions: 1024,
    baseWeightsDtype: 'bfloat16',
  });
  const refusedOut = join(root, 'ssw-refused');
  const refused = await OnlineGRPOTrainer.start({
    config: onlineConfig(refusedOut, { share_sampling_weights: true }),
    artifacts: halfAtLoad,
    tokenizer: model.tokenizer,
    roles: { policy: { trainable: true } },
  }).catch((e: unknown) => e);
  expect(ConfigError.isInstance(refused)).toBe(true);
  expect((refused as ConfigError).key).toBe('share_sampling_weights');
  expect(existsSync(refusedOut)).toBe(false);
  for (const share of [false, true]) {
    const trainer = await OnlineGRPOTrainer.start({
      config: onlineConfig(join(root, `ssw-${share}`), { share_sampling_weights: share }),
      artifacts: withGenerate,
      tokenizer: model.tokenizer,
      roles: { policy: { trainable: true } },
    });
    try {
      expect(await trainer.roles[0]!.engine.generator.usesFusedGraph(), `share ${share}`).toBe(
        !share,
      );
      // The host's own engines too: the base model's (and any hot-loaded adapter's).
      const base = trainer.gateway.host.engine('base') as LocalPolicyEngine;
      expect(await base.generator.usesFusedGraph(), `base, share ${share}`).toBe(!share);
    } finally {
      await trainer.close();
    }
  }
});
