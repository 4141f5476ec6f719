// share_frozen_weights: the train_step and logprobs sessions read the frozen weights from the
// mapped weights file, one copy, instead of each keeping prepacked copies (ONNX Runtime's
// `session.disable_prepacking`; CreateSessionOptions.prepackWeights: false).
// - The same step to float32 rounding, not to the bit: MLAS packs B on each call instead of
//   once, and sums K in other blocks. Measured (this test's model): loss and log-probs within
//   2e-7 relative, the gradients 7.4e-7 in relative L2 over all of them; bounds 1e-6 and 1e-5.
//   (The default stays prepacked, so the demo's numbers do not move.)
// - Held once: opening train_step and logprobs, measured in fresh processes as RssAnon (memory
//   of the process's own; the mapped file counts in RssFile), takes about 3× the weights'
//   float32 size prepacked (the train step's two layouts, logprobs' one) and less than one copy
//   shared. Bytes, not times: they do not move with the machine's load.
// - The estimate of the shared step within 25% of its measured peak (as memory-preflight.test.ts
//   checks the prepacked one).
// - The config reaches the sessions' options (policyOptions → LoraPolicy's sessions; the option's
//   mapping to ORT is runtime-session.test.ts's), and a 4-step GRPO run with it logs the default
//   run's rewards, and its losses and gradient norms within 1e-4 relative (float32 rounding;
//   steps 1–2 have no gradient: the tiny model's rewards vary from step 3 on).
// - Full fine-tuning (SFT use_peft: false) refuses the key: it has no frozen weights.
// - The preflight names share_frozen_weights when it alone makes a run fit; with
//   gradient_checkpointing when only the two switches together do, and with a smaller
//   micro-batch too when only that does.
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError } from '@flowgrpo/core';
import {
  createTinyQwen2,
  initTinyWeights,
  LORA_TARGET_MODULES,
  readArtifactsManifest,
  tinyQwen2Config,
} from '@flowgrpo/models';
import { afterAll, describe, expect, it } from 'vitest';
import { thrownSync } from '../../../test-utils/folder-snapshot.js';
import {
  buildTrainingArtifacts,
  checkGrpoMemory,
  estimateMemory,
  GRPOConfigSchema,
  InsufficientMemoryError,
  SFTTrainer,
} from '../src/index.js';
import { policyOptions } from '../src/run/config.js';
import { measureTrainStepPeak } from './support/measure-train-step-peak.js';
import { QWEN05_FACTS, QWEN05_GRPO } from './support/qwen05-preflight.js';
import { metricsOf, tinyConfig, tinyTrainer } from './support/tiny-grpo.js';

const tmp = mkdtempSync(join(tmpdir(), 'flowgrpo-shared-weights-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const MiB = 2 ** 20;
const lora = { r: 16, alpha: 32, targetModules: [...LORA_TARGET_MODULES] };
// 3 layers 512 wide, vocabulary 4,096 (the head whole): 42 MiB of float32 weights, large
// enough that a copy of them stands well clear of what a session allocates for itself.
const config = tinyQwen2Config({
  seed: 0,
  vocabSize: 4096,
  hiddenSize: 512,
  layers: 3,
  heads: 8,
  kvHeads: 2,
  intermediateSize: 1536,
  maxPositionEmbeddings: 256,
});
const B = 2;
const T = 128;

describe('frozen weights held once', () => {
  it('the same step to float32 rounding, about 3× the weights of its own prepacked and under 1× shared; the estimate within 25%', async () => {
    const dir = join(tmp, 'artifacts');
    buildTrainingArtifacts(initTinyWeights(config, 1), dir, {
      lora,
      graphs: ['train_step', 'logprobs'],
      maxPositions: T,
    });
    const weightsMiB = readArtifactsManifest(dir).weights.bytes / MiB;
    const step = (name: string, session: { prepackWeights?: boolean }) =>
      measureTrainStepPeak(join(dir, 'train_step.onnx'), B, T, config.vocabSize, {
        session,
        logprobs: join(dir, 'logprobs.onnx'),
        outputs: join(tmp, `${name}.json`),
      });
    const packed = await step('packed', {});
    const shared = await step('shared', { prepackWeights: false });
    const read = (name: string) =>
      JSON.parse(readFileSync(join(tmp, `${name}.json`), 'utf8')) as Record<string, number[]>;
    const [p, s] = [read('packed'), read('shared')];
    console.log(
      `weights ${weightsMiB.toFixed(0)} MiB; opening train_step + logprobs: prepacked +${packed.anonOpenMiB.toFixed(0)} MiB, shared +${shared.anonOpenMiB.toFixed(0)} MiB of their own; peaks ${packed.peakMiB.toFixed(0)} / ${shared.peakMiB.toFixed(0)} MiB`,
    );
    expect(Object.keys(s).sort()).toEqual(Object.keys(p).sort());
    for (const name of ['loss', 'logprobs']) {
      const scale = Math.max(...p[name]!.map(Math.abs));
      const worst = Math.max(...p[name]!.map((x, i) => Math.abs(x - s[name]![i]!)));
      expect(worst / scale, name).toBeLessThan(1e-6);
    }
    let norm = 0;
    let diff = 0;
    for (const name of Object.keys(p).filter((k) => k.startsWith('grad.')))
      for (const [i, x] of p[name]!.entries()) {
        norm += x * x;
        diff += (x - s[name]![i]!) ** 2;
      }
    expect(norm).toBeGreaterThan(0);
    expect(Math.sqrt(diff / norm)).toBeLessThan(1e-5);
    expect(packed.anonOpenMiB).toBeGreaterThan(2.5 * weightsMiB);
    expect(shared.anonOpenMiB).toBeLessThan(weightsMiB);
    expect(shared.peakMiB).toBeLessThan(packed.peakMiB - weightsMiB);

    const estimate =
      estimateMemory({
        config,
        lora,
        headChunk: config.vocabSize,
        sessions: { trainStep: true, logprobs: true, sampling: 0 },
        microBatch: { rows: B, seqLen: T },
        sharedWeights: true,
      }).bytes / MiB;
    expect(estimate / shared.peakMiB).toBeGreaterThan(0.75);
    expect(estimate / shared.peakMiB).toBeLessThan(1.25);
  }, 300_000);

  it("the key becomes the policy sessions' prepackWeights: false; left out, no option at all", () => {
    const parse = (extra: object) =>
      GRPOConfigSchema.parse({ output_dir: 'x', max_steps: 1, ...extra });
    expect(policyOptions(parse({ share_frozen_weights: true }))).toMatchObject({
      prepackWeights: false,
    });
    expect(policyOptions(parse({}))).not.toHaveProperty('prepackWeights');
    expect(policyOptions(parse({ share_frozen_weights: false }))).not.toHaveProperty(
      'prepackWeights',
    );
  });

  it('full fine-tuning refuses the key (ConfigError naming it) when the trainer is made', async () => {
    const model = await createTinyQwen2(join(tmp, 'full-model'), {
      seed: 'full',
      hiddenSize: 32,
      layers: 1,
      heads: 4,
      kvHeads: 2,
      intermediateSize: 48,
    });
    const out = join(tmp, 'full-run');
    const err = thrownSync(
      () =>
        new SFTTrainer({
          config: {
            output_dir: out,
            max_steps: 1,
            learning_rate: 1e-3,
            use_peft: false,
            share_frozen_weights: true,
          },
          model: model.dir,
          tokenizer: model.tokenizer,
          trainDataset: [{ text: 'one example' }],
        }),
    );
    expect(ConfigError.isInstance(err)).toBe(true);
    expect((err as ConfigError).key).toBe('share_frozen_weights');
    expect(existsSync(out)).toBe(false);
  });

  it('a GRPO run with share_frozen_weights logs the metrics of the default run, step by step', async () => {
    const metrics = async (name: string, extra: { share_frozen_weights?: boolean }) => {
      const out = join(tmp, 'grpo', name);
      const trainer = await tinyTrainer(
        join(tmp, 'grpo'),
        tinyConfig(out, { max_steps: 4, ...extra }),
      );
      // The preflight counts the weights file once when they are shared.
      expect(trainer.memoryEstimate().terms.some((t) => t.name === 'frozen weights')).toBe(
        extra.share_frozen_weights === true,
      );
      await trainer.train();
      return metricsOf(out);
    };
    const byDefault = await metrics('default', {});
    const shared = await metrics('shared', { share_frozen_weights: true });
    // The quote reward has variance from step 3 on: a gradient to compare (steps 1–2: all 0).
    expect(byDefault).toHaveLength(4);
    expect(byDefault.some((m) => (m.grad_norm as number) > 1e-3)).toBe(true);
    // To float32 rounding, as above: measured equal through step 3, then step 4's gradient norm
    // (1.8e-6, a near-zero loss) 9e-6 apart in relative terms; the same rollouts (rewards).
    expect(shared.map((m) => [m.step, m.reward])).toEqual(byDefault.map((m) => [m.step, m.reward]));
    for (const [i, m] of byDefault.entries())
      for (const key of ['loss', 'grad_norm'] as const) {
        const [a, b] = [m[key] as number, shared[i]![key] as number];
        expect(Math.abs(a - b), `${key} at step ${m.step}`).toBeLessThanOrEqual(1e-4 * Math.abs(a));
      }
    const saved = JSON.parse(readFileSync(join(tmp, 'grpo', 'shared', 'config.json'), 'utf8'));
    expect(saved.share_frozen_weights).toBe(true);
  }, 300_000);

  it('the preflight names share_frozen_weights when it alone makes the run fit', () => {
    // Qwen2.5-0.5B's shape (24 layers, 896 wide, vocabulary 151,936 in chunks), rollouts on a
    // server: the frozen weights dominate the estimate.
    const facts = QWEN05_FACTS;
    const c = QWEN05_GRPO;
    const unshared = checkGrpoMemory(c, facts, 2 ** 40).bytes;
    const sharedBytes = checkGrpoMemory({ ...c, share_frozen_weights: true }, facts, 2 ** 40).bytes;
    // Prepacked: train_step 2× the projections + 1× the head's chunks, logprobs 1× + 1×; shared:
    // the file once (projections + head) + 1× the head's chunks in each. Saved: 2 × the
    // projections' 358M − the head's 136M parameters, in float32: 2.1 GiB.
    expect(unshared - sharedBytes).toBeGreaterThan(2 * 2 ** 30);
    const available = (unshared + sharedBytes) / 2;
    const err = thrownSync(() => checkGrpoMemory(c, facts, available));
    expect(InsufficientMemoryError.isInstance(err)).toBe(true);
    const hint = (err as InsufficientMemoryError).hint ?? '';
    expect(hint).toMatch(/^set share_frozen_weights: true/);
    expect(checkGrpoMemory({ ...c, share_frozen_weights: true }, facts, available).bytes).toBe(
      sharedBytes,
    );

    // Neither switch alone fits: a budget of 4,096 tokens (8 rows of 456; a row's activations are
    // ~1.9 GB here) against 1 GiB over the shared run at 512. The 4,096-token run exceeds that by
    // far more than sharing saves (2.1 GiB), and with the activations recomputed
    // (gradient_checkpointing) the frozen weights' prepacked copies still keep it over. Both
    // switches together fit.
    const wide = { ...c, max_tokens_per_microbatch: 4096 };
    const between = sharedBytes + 2 ** 30;
    const at = (o: object, bytes = 2 ** 40) =>
      checkGrpoMemory({ ...wide, ...o }, facts, bytes).bytes;
    expect(at({ share_frozen_weights: true })).toBeGreaterThan(between);
    expect(at({ gradient_checkpointing: true })).toBeGreaterThan(between);
    expect(unshared).toBeGreaterThan(between);
    const hintAt = (bytes: number) => {
      const err = thrownSync(() => checkGrpoMemory(wide, facts, bytes));
      expect(InsufficientMemoryError.isInstance(err)).toBe(true);
      return (err as InsufficientMemoryError).hint ?? '';
    };
    expect(hintAt(between)).toMatch(
      /^set share_frozen_weights: true and gradient_checkpointing: true: together they fit; or set skip_memory_check/,
    );
    expect(at({ share_frozen_weights: true, gradient_checkpointing: true }, between)).toBeLessThan(
      between,
    );

    // With less memory only the switches and a smaller micro-batch together fit.
    const less = at({ share_frozen_weights: true, gradient_checkpointing: true }) - 2 ** 30;
    const pairHint = hintAt(less);
    expect(pairHint).toMatch(
      /^set share_frozen_weights: true and gradient_checkpointing: true and lower max_tokens_per_microbatch \(4096; (\d+) fits\)/,
    );
    const advised = Number(/\(4096; (\d+) fits\)/.exec(pairHint)![1]);
    const both = { share_frozen_weights: true, gradient_checkpointing: true };
    expect(at({ ...both, max_tokens_per_microbatch: advised }, less)).toBeLessThanOrEqual(less);
    // And the micro-batch alone does not fit: the switches are what the pair needs.
    expect(() =>
      checkGrpoMemory({ ...wide, max_tokens_per_microbatch: advised }, facts, less),
    ).toThrow();
  });

  it('the preflight names the switches with a smaller micro-batch before a shorter completion', () => {
    // The grpo-model bench's case on the 0.5B shape: one question, 8 rollouts of up to 512 new
    // tokens sampled here (their KV cache grows with the completion), the default 8,192-token
    // micro-batch, both switches off. Just under what both switches need at 8,192 tokens, two
    // things fit: both switches with 4,096 tokens (speed only), and one row per micro-batch with
    // a completion cut to 32 tokens (what the run learns changes). The first is named first.
    const facts = { ...QWEN05_FACTS, localRollouts: true };
    const c = {
      ...QWEN05_GRPO,
      max_tokens_per_microbatch: 8192,
      max_completion_length: 512,
      queries_per_step: 1,
      rollout_concurrency: 8,
    };
    const both = { share_frozen_weights: true, gradient_checkpointing: true };
    const available = checkGrpoMemory({ ...c, ...both }, facts, 2 ** 40).bytes - 2 ** 28;
    const err = thrownSync(() => checkGrpoMemory(c, facts, available));
    expect(InsufficientMemoryError.isInstance(err)).toBe(true);
    const hint = (err as InsufficientMemoryError).hint ?? '';
    expect(hint).toMatch(
      /^set share_frozen_weights: true and gradient_checkpointing: true and lower max_tokens_per_microbatch \(8192; 4096 fits\); lower max_tokens_per_microbatch to (\d+) \(one row per micro-batch\) and max_completion_length to (\d+): that fits; or set skip_memory_check/,
    );
    // Each fix fits as stated: the first with no learning key changed.
    const advised = { ...c, ...both, max_tokens_per_microbatch: 4096 };
    expect(checkGrpoMemory(advised, facts, available).bytes).toBeLessThanOrEqual(available);
    const [, rowTokens, completion] = /to (\d+) \(one row.*to (\d+): that fits/.exec(hint)!;
    const shorter = {
      ...c,
      max_tokens_per_microbatch: Number(rowTokens),
      max_completion_length: Number(completion),
    };
    expect(checkGrpoMemory(shorter, facts, available).bytes).toBeLessThanOrEqual(available);
  });
});
