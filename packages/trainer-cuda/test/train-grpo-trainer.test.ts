// GRPOTrainer end to end on the embedded demo task with a tiny model (CPU EP): the loop's
// invariants, exact resume after SIGKILL, non-finite updates, abort, and the checkpoint format.
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RolloutAgent } from '@flowgrpo/agent';
import { ConfigError, readTrajectoriesParquet } from '@flowgrpo/core';
import { initLoraParams, type LocalPolicyEngine, readArtifactsManifest } from '@flowgrpo/models';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { demoAgent } from '../src/demo/index.js';
import {
  type GRPOConfigInput,
  type GRPOTrainer,
  listCheckpoints,
  loadCheckpoint,
  NonFiniteLossError,
  SFTTrainer,
  type TrainResult,
} from '../src/index.js';
import { killAtMarker } from './support/kill-at-marker.js';
import { comparable, LORA, tinyConfig, tinySetup, tinyTrainer } from './support/tiny-grpo.js';

const root = mkdtempSync(join(tmpdir(), 'flowgrpo-grpo-trainer-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

let full: TrainResult;
beforeAll(async () => {
  await tinySetup(root);
  full = await (await tinyTrainer(root, tinyConfig(join(root, 'full'), { save_steps: 2 }))).train();
}, 120_000);

describe('GRPOTrainer on the demo task (tiny model)', () => {
  it('runs the loop: metrics with TRL names, rollouts as Parquet, checkpoints, report', async () => {
    expect(full.globalStep).toBe(4);
    expect(full.stopped).toBe('max_steps');
    const steps = full.metrics.filter((m) => typeof m.reward === 'number');
    expect(steps.map((m) => m.step)).toEqual([1, 2, 3, 4]);
    for (const m of steps) {
      for (const k of [
        'reward',
        'reward_std',
        'frac_reward_zero_std',
        'loss',
        'grad_norm',
        'kl',
        'entropy',
        'clip_ratio/low_mean',
        'clip_ratio/high_mean',
        'clip_ratio/region_mean',
        'learning_rate',
        'turns/mean',
        'tools/calls_per_trajectory',
        'tools/error_rate',
        'trainable_token_ratio',
        'logprob_mismatch/mean',
        'logprob_mismatch/max',
        'nan_steps_skipped',
        'timing/rollout_s',
        'timing/train_s',
      ])
        expect(Number.isFinite(m[k]), k).toBe(true);
      // Local rollouts: the sampler's log-probs are the training graph's (token-exact).
      expect(m['logprob_mismatch/max'] as number).toBeLessThanOrEqual(1e-4);
    }
    expect(existsSync(join(full.checkpoint!, 'adapter_model.safetensors'))).toBe(true);
    expect(listCheckpoints(join(root, 'full')).map((c) => c.step)).toEqual([2, 4]);
    expect(readFileSync(full.report, 'utf8')).toContain('<svg');
  });

  it('records rewards and group-relative advantages: zero mean in every group, on every turn', async () => {
    for (const step of [1, 4]) {
      const file = join(root, 'full', 'rollouts', `step-${String(step).padStart(6, '0')}.parquet`);
      const trajectories = await readTrajectoriesParquet(file);
      expect(trajectories).toHaveLength(8); // 2 queries × G = 4
      const groups = new Map<string, number[]>();
      for (const t of trajectories) {
        expect(typeof t.reward).toBe('number');
        for (const u of t.turns ?? []) expect(u.advantage).toBe(t.advantage);
        groups.set(t.groupId, [...(groups.get(t.groupId) ?? []), t.advantage!]);
      }
      expect(groups.size).toBe(2);
      for (const adv of groups.values()) {
        expect(adv).toHaveLength(4);
        expect(Math.abs(adv.reduce((a, b) => a + b, 0))).toBeLessThan(1e-9);
      }
    }
  });

  it('changes the LoRA weights, and the checkpoint loads back with its optimizer state', async () => {
    const m = readArtifactsManifest(join(root, 'artifacts'));
    const ck = await loadCheckpoint(full.checkpoint!, m.config);
    const init = initLoraParams(m.config, m.lora!, '7:lora'); // the trainer's init (seed 7)
    let moved = 0;
    for (const [name, v] of ck.params) {
      const v0 = init.get(name)!;
      for (let i = 0; i < v.length; i++) moved = Math.max(moved, Math.abs(v[i]! - v0[i]!));
    }
    expect(moved).toBeGreaterThan(1e-4);
    expect(ck.trainer.global_step).toBe(4);
    expect(ck.optimizer.step).toBe(4);
    expect(Object.keys(ck.optimizer.m).sort()).toEqual([...ck.params.keys()].sort());
    expect(ck.trainer.log_history).toHaveLength(4);
  });

  it('max_grad_norm: 0 turns clipping off, as in HF (the same update as a bound no norm reaches)', async () => {
    const m = readArtifactsManifest(join(root, 'artifacts'));
    const step = async (max_grad_norm: number) => {
      const out = join(root, `clip-${max_grad_norm}`);
      const r = await (await tinyTrainer(root, tinyConfig(out, { max_grad_norm }))).train();
      return (await loadCheckpoint(r.checkpoint!, m.config)).params;
    };
    const off = await step(0);
    const unreached = await step(1e30);
    const init = initLoraParams(m.config, m.lora!, '7:lora');
    let moved = 0;
    for (const [name, v] of off) {
      expect(Array.from(v), name).toEqual(Array.from(unreached.get(name)!));
      const v0 = init.get(name)!;
      for (let i = 0; i < v.length; i++) moved = Math.max(moved, Math.abs(v[i]! - v0[i]!));
    }
    expect(moved).toBeGreaterThan(1e-4);
  }, 120_000);

  it('logging_steps: metrics at steps L, 2L, … and the last, as HF logs; the state keeps every step', async () => {
    const out = join(root, 'logging');
    const logged: number[] = [];
    const trainer = await tinyTrainer(root, tinyConfig(out, { max_steps: 5, logging_steps: 2 }), {
      extra: { onLog: (r) => logged.push(r.step as number) },
    });
    const r = await trainer.train();
    expect(logged).toEqual([2, 4, 5]);
    const lines = readFileSync(join(out, 'metrics.jsonl'), 'utf8').trim().split('\n');
    expect(lines.map((l) => JSON.parse(l).step)).toEqual([2, 4, 5]);
    const ck = await loadCheckpoint(
      r.checkpoint!,
      readArtifactsManifest(join(root, 'artifacts')).config,
    );
    expect(ck.trainer.log_history.map((h) => h.step)).toEqual([1, 2, 3, 4, 5]);

    // num_iterations 2: each batch advances two steps (0→2→4→6); logs where a batch crosses a
    // multiple of 3, and at the end.
    const mu: number[] = [];
    const two = tinyConfig(join(root, 'logging-mu'), {
      max_steps: 6,
      logging_steps: 3,
      num_iterations: 2,
    });
    await (
      await tinyTrainer(root, two, { extra: { onLog: (r) => mu.push(r.step as number) } })
    ).train();
    expect(mu).toEqual([4, 6]);

    // Empty batches (every turn of the untrained model runs to the 24-token limit and is masked)
    // still count as steps, and save_steps fires on them.
    const empty = join(root, 'logging-empty');
    const masked = await (
      await tinyTrainer(
        root,
        tinyConfig(empty, { max_steps: 4, save_steps: 2, mask_truncated_completions: true }),
      )
    ).train();
    expect(masked.metrics.map((m) => m.empty_batches)).toEqual([1, 2, 3, 4]);
    expect(listCheckpoints(empty).map((c) => c.step)).toEqual([2, 4]);
  }, 120_000);

  it('killed with SIGKILL mid-step and resumed, continues exactly as the uninterrupted run', async () => {
    const out = join(root, 'killed');
    const marker = join(root, 'holding');
    // The child holds inside batch 2's rollouts (after checkpoint-2 was written): kill it there.
    expect(await killAtMarker('tiny-grpo.ts', [root, out, '2', marker], marker)).toBe('SIGKILL');
    expect(listCheckpoints(out).map((c) => c.step)).toEqual([1, 2]);

    const resumed = await (
      await tinyTrainer(root, tinyConfig(out, { save_steps: 1, resume_from_checkpoint: true }))
    ).train();
    expect(resumed.globalStep).toBe(4);
    const byStep = (ms: TrainResult['metrics']) =>
      new Map(ms.filter((m) => typeof m.reward === 'number').map((m) => [m.step, comparable(m)]));
    const a = byStep(full.metrics);
    const b = byStep(resumed.metrics);
    expect([...b.keys()]).toEqual([1, 2, 3, 4]); // steps 1–2 from before the kill, 3–4 after
    for (const step of [3, 4]) expect(b.get(step)).toEqual(a.get(step));
  }, 180_000);

  it('skips non-finite updates, leaves the parameters alone, and stops after N in a row', async () => {
    // A corrupt adapter (one NaN in a LoRA matrix) makes every loss non-finite: each update is
    // skipped — parameters and moments unchanged — and after 2 in a row the run stops with a
    // typed error naming the step and the rollout batch.
    const m = readArtifactsManifest(join(root, 'artifacts'));
    const adapter = initLoraParams(m.config, m.lora!, 'nan');
    [...adapter.values()][0]![0] = Number.NaN;
    const trainer = await tinyTrainer(
      root,
      tinyConfig(join(root, 'nan'), { max_nan_steps_in_a_row: 2 }),
      { extra: { adapter } },
    );
    const e = await trainer.train().catch((x: unknown) => x);
    expect(NonFiniteLossError.isInstance(e)).toBe(true);
    const err = e as NonFiniteLossError;
    expect(err.step).toBe(1); // step 1 was skipped (counted), step 2 the second in a row
    expect(err.batch).toBe(1);
    expect(err.queryIds).toHaveLength(2);
    expect(err.message).toMatch(/2 updates in a row had a non-finite loss/);
  }, 120_000);

  it('TrainStepRunner: a non-finite update leaves parameters and moments exactly as they were', async () => {
    const { GraphBuilder } = await import('@flowgrpo/graph');
    const ort = await import('onnxruntime-node');
    const { TrainStepRunner } = await import('../src/index.js');
    const w0 = Float32Array.of(0.5, -1, 2);
    const runner = await TrainStepRunner.create({
      trainStep: (b: InstanceType<typeof GraphBuilder>, p) => {
        const x = b.input('x', 'float32', [3]);
        return b.reduceSum(b.mul(b.mul(p.w!, x), b.mul(p.w!, x)));
      },
      params: { w: new ort.Tensor('float32', w0, [3]) },
      device: 'cpu',
    });
    const feed = (v: number[]) => ({ x: new ort.Tensor('float32', Float32Array.from(v), [3]) });
    await runner.step(feed([1, 2, 3]), { lr: 0.1 }); // a real update: moments are non-zero now
    const before = await runner.exportState();
    const r = await runner.step(feed([1, Number.NaN, 3]), { lr: 0.1 });
    expect(r.skipped).toBe('nonfinite_loss');
    const after = await runner.exportState();
    expect(after.step).toBe(before.step);
    for (const k of ['params', 'm', 'v'] as const)
      expect(Array.from(after[k].w!.data as Float32Array)).toEqual(
        Array.from(before[k].w!.data as Float32Array),
      );
    await runner.release();
  });

  it('generate_workers: rollouts in worker threads give the run on the trainer’s thread', async () => {
    // 4 queries × G = 4: 16 rollouts in flight, where the worker batchers open. Where a rollout
    // is generated must not change a metric (the same seeds sample the same tokens).
    const run = async (workers: number) => {
      let trainer: GRPOTrainer | undefined;
      let open = 0;
      const watch = (a: RolloutAgent): RolloutAgent => ({
        run: async (question, context) => {
          const t = await a.run(question, context);
          const engine = trainer!.engine as LocalPolicyEngine;
          open = Math.max(open, (await engine.generator.batchWorkers()).open);
          return t;
        },
      });
      const config = tinyConfig(join(root, `workers-${workers}`), {
        max_steps: 2,
        queries_per_step: 4,
        generate_workers: workers,
      });
      trainer = await tinyTrainer(root, config, { wrapAgent: watch });
      const r = await trainer.train();
      return { metrics: r.metrics.map(comparable), open };
    };
    const here = await run(0);
    const there = await run(2);
    expect(here.open).toBe(0);
    expect(there.open).toBe(2);
    expect(there.metrics).toEqual(here.metrics);
  }, 120_000);

  it("samples the policy at the config's temperature, top_p and max_completion_length, not the agent's", async () => {
    // The agent asks for temperature 0.5, top_p 1 and 24 tokens; the run says 0.8, 0.9 and 12.
    // The loss takes the policy's log-probs at 0.8, so the sampler's log-probs of the same
    // tokens must be those (logprob_mismatch: the training graph against the sampler; at 0.5
    // they differ by far more than 1e-4), and no turn may be longer than 12 tokens.
    const { almanac } = await tinySetup(root);
    const warnings: string[] = [];
    const onWarning = (w: Error & { code?: string }) => {
      if (w.code === 'FLOWGRPO_SAMPLING_OVERRIDE') warnings.push(w.message);
    };
    process.on('warning', onWarning);
    try {
      const config = tinyConfig(join(root, 'sampling'), {
        max_steps: 1,
        temperature: 0.8,
        top_p: 0.9,
        max_completion_length: 12,
      });
      const trainer = await tinyTrainer(root, config, {
        extra: {
          agent: (policy) =>
            demoAgent(policy, almanac, { maxTokens: 24, maxTurns: 2, temperature: 0.5, topP: 1 }),
        },
      });
      const r = await trainer.train();
      const step = r.metrics.find((m) => typeof m.reward === 'number')!;
      expect(step['logprob_mismatch/max'] as number).toBeLessThanOrEqual(1e-4);
      const file = join(root, 'sampling', 'rollouts', 'step-000001.parquet');
      const lengths = (await readTrajectoriesParquet(file)).flatMap((t) =>
        (t.turns ?? []).map((u) => u.actionTokens.length),
      );
      expect(lengths.length).toBeGreaterThan(0);
      expect(Math.max(...lengths)).toBe(12); // an untrained model rarely stops on its own
      await new Promise((resolve) => setImmediate(resolve)); // warnings are emitted on next tick
      expect(warnings).toHaveLength(3); // temperature, top_p, the token cap: once each
      expect(warnings.join('\n')).toMatch(/temperature = 0\.5; .* temperature = 0\.8/);
    } finally {
      process.off('warning', onWarning);
    }
  }, 120_000);

  it('both trainers refuse a config.lora the artifacts were not built with (modules, rslora, rank)', async () => {
    // The artifacts: r 4, alpha 8, q/v/up (support/tiny-grpo.ts LORA).
    const { model, artifacts } = await tinySetup(root);
    const same = { r: LORA.r, lora_alpha: LORA.alpha, target_modules: [...LORA.targetModules] };
    const wrong: GRPOConfigInput['lora'][] = [
      { ...same, target_modules: ['q_proj', 'v_proj'] },
      { ...same, use_rslora: true },
      { ...same, r: 8, lora_alpha: 16 }, // same alpha / r, other shapes
    ];
    for (const lora of wrong) {
      let error: unknown;
      try {
        await tinyTrainer(root, tinyConfig(join(root, 'mismatch'), { lora }));
      } catch (e) {
        error = e;
      }
      expect(error, JSON.stringify(lora)).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).key).toBe('lora');
      const sft = new SFTTrainer({
        config: { output_dir: join(root, 'mismatch-sft'), max_steps: 1, lora },
        artifacts,
        tokenizer: model.tokenizer,
        trainDataset: [{ prompt: 'a', completion: 'b' }],
      });
      await expect(sft.train(), JSON.stringify(lora)).rejects.toThrow(
        /does not match the artifacts/,
      );
    }
  });

  it('an abort stops after the running step and writes a final checkpoint', async () => {
    const controller = new AbortController();
    const trainer = await tinyTrainer(root, tinyConfig(join(root, 'aborted'), { max_steps: 10 }), {
      extra: {
        signal: controller.signal,
        onLog: (r) => {
          if (r.step === 2) controller.abort(new Error('Ctrl-C'));
        },
      },
    });
    const r = await trainer.train();
    expect(r.stopped).toBe('aborted');
    expect(r.globalStep).toBe(2);
    expect(listCheckpoints(join(root, 'aborted')).map((c) => c.step)).toEqual([2]);
  }, 120_000);
});
