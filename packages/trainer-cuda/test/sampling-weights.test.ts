// share_sampling_weights: the local rollout engine samples with the decode graph over the mapped
// weights.data — its session's prepacking off, half-precision projections cast at each product
// (DecoderGraphOptions.castPerUse) — instead of the fused generate graph, which keeps its own
// float32 copies of the weights (about 1.3× the projections and 2× the head). Checked here: the
// same tokens and log-probs as the fused graph (the expected values are the fused graph's own
// outputs on the same artifacts); a process that samples this way measured against the fused
// graph's and against the estimate; a GRPO run with it against the default run; the refusal of
// half-precision artifacts built without it; the preflight's advice.
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError } from '@flowgrpo/core';
import { decodeModel } from '@flowgrpo/graph';
import {
  DecoderArtifacts,
  DecoderGenerator,
  initTinyWeights,
  LORA_TARGET_MODULES,
  type LocalPolicyEngine,
  readArtifactsManifest,
} from '@flowgrpo/models';
import { qwen3StyleConfig } from '@flowgrpo/models/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { thrownSync } from '../../../test-utils/folder-snapshot.js';
import {
  buildTrainingArtifacts,
  checkGrpoMemory,
  estimateMemory,
  InsufficientMemoryError,
} from '../src/index.js';
import { halfWeights } from './support/half-checkpoint.js';
import { measureSamplingPeak } from './support/measure-train-step-peak.js';
import { QWEN05_FACTS, QWEN05_GRPO, twoQwen05Layers } from './support/qwen05-preflight.js';
import { LORA, metricsOf, tinyConfig, tinySetup, tinyTrainer } from './support/tiny-grpo.js';

const tmp = mkdtempSync(join(tmpdir(), 'flowgrpo-sampling-weights-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const MiB = 2 ** 20;
const lora = { r: 8, alpha: 16, targetModules: [...LORA_TARGET_MODULES] };

describe('share_sampling_weights', () => {
  it('the decode graph casting per product, prepacking off: the tokens and log-probs of the fused graph', async () => {
    // Qwen3-style layers (q/k norms, o and MLP biases, untied head): every kind of projection.
    const config = qwen3StyleConfig({ seed: 0, hiddenSize: 64, layers: 2, heads: 4, kvHeads: 2 });
    const weights = halfWeights(config, 3);
    const dir = join(tmp, 'values-bf16');
    buildTrainingArtifacts(weights, dir, {
      lora,
      maxPositions: 64,
      baseWeightsDtype: 'bfloat16',
      decodeCastsPerUse: true,
    });
    expect(readArtifactsManifest(dir).decodeCastsPerUse).toBe(true);
    // In the decode graph no Cast reads a projection as stored (ORT would fold it at load into
    // a float32 copy): each reads the weight with the activation's empty slice appended
    // (half-weights.ts' castAfter). Built the default way, every projection has such a Cast.
    const castsOfStored = (d: string) =>
      decodeModel(readFileSync(join(d, 'decode.onnx'))).graph.nodes.filter(
        (n) => n.opType === 'Cast' && n.inputs.some((i) => /_proj\.weight$/.test(i)),
      ).length;
    const atLoad = join(tmp, 'values-bf16-at-load');
    buildTrainingArtifacts(weights, atLoad, {
      lora,
      graphs: ['decode'],
      maxPositions: 64,
      baseWeightsDtype: 'bfloat16',
    });
    expect(readArtifactsManifest(atLoad).decodeCastsPerUse).toBeUndefined();
    expect(castsOfStored(atLoad)).toBe(2 * 7);
    expect(castsOfStored(dir)).toBe(0);
    // With float32 projections there is nothing to cast: nothing is recorded.
    const f32 = join(tmp, 'values-f32');
    buildTrainingArtifacts(weights, f32, { lora, maxPositions: 64, decodeCastsPerUse: true });
    expect(readArtifactsManifest(f32).decodeCastsPerUse).toBeUndefined();

    const fused = await DecoderArtifacts.open(dir, { graphs: ['generate'] });
    const shared = await DecoderArtifacts.open(dir, { graphs: ['decode'], prepackWeights: false });
    try {
      const prompts = [
        [1, 5, 9, 3],
        [7, 7, 2],
      ];
      // The standard path for the decode session: the fused generator would open the generate
      // graph of its own accord.
      const sample = (art: DecoderArtifacts, temperature: number) =>
        new DecoderGenerator(art, { useGenerateGraph: art === fused }).generate(prompts, {
          maxNewTokens: 12,
          temperature,
          seed: 5,
        });
      expect(await new DecoderGenerator(shared, { useGenerateGraph: false }).usesFusedGraph()).toBe(
        false,
      );
      for (const temperature of [0, 1]) {
        const want = await sample(fused, temperature);
        const got = await sample(shared, temperature);
        want.forEach((row, i) => {
          expect(Array.from(got[i]!.tokens), `temperature ${temperature}`).toEqual(
            Array.from(row.tokens),
          );
          for (const [j, lp] of row.logprobs.entries())
            expect(Math.abs(got[i]!.logprobs[j]! - lp)).toBeLessThan(1e-5);
        });
      }
    } finally {
      await fused.release();
      await shared.release();
    }
  }, 120_000);

  it('a process that samples this way holds no copy of the weights: under 0.6× the fused graph’s peak; the estimate within 25%', async () => {
    // Two Qwen2.5-0.5B layers at the real vocabulary, bf16 projections: the fused graph holds the
    // projections (float32, packed) and the head twice; the decode session maps weights.data.
    const config = twoQwen05Layers(64);
    const dir = join(tmp, 'peak');
    buildTrainingArtifacts(initTinyWeights(config, 1), dir, {
      lora,
      graphs: ['generate', 'decode'],
      maxPositions: 64,
      baseWeightsDtype: 'bfloat16',
      decodeCastsPerUse: true,
    });
    const fused = (await measureSamplingPeak(dir, 8, 32, 16)).peakMiB;
    const shared = (
      await measureSamplingPeak(dir, 8, 32, 16, { graph: 'decode', prepackWeights: false })
    ).peakMiB;
    rmSync(dir, { recursive: true, force: true });
    const estimate =
      estimateMemory({
        config,
        headChunk: config.vocabSize,
        sessions: { trainStep: false, logprobs: false, sampling: 1 },
        sampling: { rows: 8, seqLen: 48 },
        halfProjections: true,
        sharedSamplingWeights: true,
      }).bytes / MiB;
    console.log(
      `sampling, bf16: fused graph ${fused.toFixed(0)} MiB; shared ${shared.toFixed(0)} MiB, estimate ${estimate.toFixed(0)} MiB (${(estimate / shared).toFixed(2)}×)`,
    );
    expect(shared).toBeLessThan(0.6 * fused);
    expect(estimate / shared).toBeGreaterThan(0.75);
    expect(estimate / shared).toBeLessThan(1.25);
  }, 300_000);

  it('a GRPO run with it draws the rollouts of the default run; half artifacts built without it are refused before output_dir', async () => {
    const root = join(tmp, 'grpo');
    const metrics = async (name: string, extra: { share_sampling_weights?: boolean }) => {
      const out = join(root, name);
      const trainer = await tinyTrainer(root, tinyConfig(out, { max_steps: 3, ...extra }));
      await trainer.train();
      // The engine sampled with the fused graph, or not.
      const engine = trainer.engine as LocalPolicyEngine;
      expect(await engine.generator.usesFusedGraph()).toBe(!extra.share_sampling_weights);
      return metricsOf(out);
    };
    // The tiny setup's artifacts hold float32 projections: the decode graph reads them mapped.
    const byDefault = await metrics('default', {});
    const shared = await metrics('shared', { share_sampling_weights: true });
    expect(byDefault).toHaveLength(3);
    // The same rollouts (the decode graph samples the fused graph's tokens for the same seeds),
    // so the same rewards; the update is the same graph.
    expect(shared.map((m) => [m.step, m.reward])).toEqual(byDefault.map((m) => [m.step, m.reward]));
    for (const [i, m] of byDefault.entries())
      expect(Math.abs((shared[i]!.loss as number) - (m.loss as number))).toBeLessThanOrEqual(
        1e-4 * Math.abs(m.loss as number) + 1e-7,
      );

    // bf16 artifacts whose decode graph casts at load: refused, nothing written.
    const { model } = await tinySetup(root);
    const halfAtLoad = join(root, 'artifacts-bf16');
    buildTrainingArtifacts(model.weights, halfAtLoad, {
      lora: { ...LORA, targetModules: [...LORA.targetModules] },
      maxPositions: 512,
      baseWeightsDtype: 'bfloat16',
    });
    const refusedOut = join(root, 'refused');
    const err = await tinyTrainer(
      root,
      tinyConfig(refusedOut, { max_steps: 1, share_sampling_weights: true }),
      { extra: { artifacts: halfAtLoad } },
    ).catch((e: unknown) => e);
    expect(ConfigError.isInstance(err)).toBe(true);
    expect((err as ConfigError).key).toBe('share_sampling_weights');
    expect((err as ConfigError).hint).toMatch(/flowgrpo export --share-sampling-weights/);
    expect(existsSync(refusedOut)).toBe(false);

    // Built for it: the run trains, and the preflight counts the sampling session's mapping
    // (bf16 projections) instead of its float32 copies.
    const halfPerUse = join(root, 'artifacts-bf16-per-use');
    buildTrainingArtifacts(model.weights, halfPerUse, {
      lora: { ...LORA, targetModules: [...LORA.targetModules] },
      maxPositions: 512,
      baseWeightsDtype: 'bfloat16',
      decodeCastsPerUse: true,
    });
    const out = join(root, 'half');
    const trainer = await tinyTrainer(
      root,
      tinyConfig(out, { max_steps: 2, share_sampling_weights: true }),
      { extra: { artifacts: halfPerUse } },
    );
    const term = trainer.memoryEstimate().terms.find((t) => t.name === 'sampling weights')!;
    expect(term.what).toMatch(/share_sampling_weights: no copy of its own/);
    await trainer.train();
    const half = metricsOf(out);
    expect(half).toHaveLength(2);
    expect(half.every((m) => Number.isFinite(m.loss as number))).toBe(true);
  }, 300_000);

  it('the preflight names it when the training sessions’ switches are not enough', () => {
    // The 0.5B shape with rollouts sampled here, both training switches on already. The fused
    // graph's copies (1.34× the projections' 358M parameters and 2.1× the head's 136M, float32:
    // 2.9 GiB) against the decode session's mapping (the projections in bf16, the head float32:
    // 1.2 GiB, as the resident set counts a mapping once more) and its cast: 1.5 GiB saved.
    const facts = { ...QWEN05_FACTS, localRollouts: true, halfProjections: true };
    const c = {
      ...QWEN05_GRPO,
      // One row of 200 + 512 tokens per micro-batch already, and the concurrency at the group:
      // no knob that costs speed only is left.
      max_tokens_per_microbatch: 712,
      max_completion_length: 512,
      queries_per_step: 1,
      rollout_concurrency: 8,
      share_frozen_weights: true,
      gradient_checkpointing: true,
    };
    const bytes = (o: object) => checkGrpoMemory({ ...c, ...o }, facts, 2 ** 50).bytes;
    const shared = bytes({ share_sampling_weights: true });
    expect(bytes({}) - shared).toBeGreaterThan(1.5 * 2 ** 30);
    const available = shared + 2 ** 28;
    const err = thrownSync(() => checkGrpoMemory(c, facts, available));
    expect(InsufficientMemoryError.isInstance(err)).toBe(true);
    expect((err as InsufficientMemoryError).hint).toMatch(
      /^set share_sampling_weights: true \(the sampling session reads the mapped weights, .* as fast; .*: that fits\); or set skip_memory_check/,
    );
    expect(checkGrpoMemory({ ...c, share_sampling_weights: true }, facts, available).bytes).toBe(
      shared,
    );
    // Rollouts on a server: no sampling session here, nothing to share, not named.
    const remote = { ...facts, localRollouts: false };
    const big = { ...c, max_tokens_per_microbatch: 2 ** 20 };
    const remoteErr = thrownSync(() => checkGrpoMemory(big, remote, available));
    expect(InsufficientMemoryError.isInstance(remoteErr)).toBe(true);
    expect((remoteErr as InsufficientMemoryError).hint).not.toContain('share_sampling_weights');
  });
});
