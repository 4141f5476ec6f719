// gradient_checkpointing: the train step keeps each layer's input only and recomputes the layer's
// activations in its backward (decoderForward's `recompute`, a custom VJP per layer).
// - The same step to the bit: the recomputation runs the layer's nodes again on the same inputs
//   (its input plus zeros, which changes no bit), so the loss, the log-probs and every gradient
//   equal the step that kept its activations exactly — the reference is that step, on the same
//   machine, in the same kind of fresh process.
// - Less memory: peaks (VmHWM) of fresh processes, bytes not times. Measured on this test's model
//   (8 layers, 512 wide, 4 × 512 tokens): 1,821 MiB keeping the activations, 762–765 MiB
//   recomputing them; the test asserts under 0.6×. The estimate (memory-estimate.ts) within 25%
//   of both peaks (measured 1.01× and 1.09×).
// - The config reaches the graph: a GRPO run and a full fine-tuning SFT run with the key log the
//   metrics of the runs without it, step for step; artifacts built the other way are refused.
// - The preflight names it when it alone makes a run fit.
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError } from '@flowgrpo/core';
import {
  createTinyQwen2,
  type DecoderConfig,
  initTinyWeights,
  LORA_TARGET_MODULES,
  readArtifactsManifest,
  tinyQwen2Config,
} from '@flowgrpo/models';
import { qwen3StyleConfig } from '@flowgrpo/models/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { thrownSync } from '../../../test-utils/folder-snapshot.js';
import {
  buildTrainingArtifacts,
  checkGrpoMemory,
  estimateMemory,
  InsufficientMemoryError,
  SFTTrainer,
} from '../src/index.js';
import { measureTrainStepPeak } from './support/measure-train-step-peak.js';
import { QWEN05_FACTS, QWEN05_GRPO } from './support/qwen05-preflight.js';
import { LORA, metricsOf, tinyConfig, tinySetup, tinyTrainer } from './support/tiny-grpo.js';

const tmp = mkdtempSync(join(tmpdir(), 'flowgrpo-checkpointing-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const MiB = 2 ** 20;
const lora = { r: 16, alpha: 32, targetModules: [...LORA_TARGET_MODULES] };
// Activations dominate: 8 layers of 4 × 512 tokens against about 100 MiB of float32 weights
// (vocabulary 4,096, the head whole).
const config = tinyQwen2Config({
  seed: 0,
  vocabSize: 4096,
  hiddenSize: 512,
  layers: 8,
  heads: 8,
  kvHeads: 2,
  intermediateSize: 1536,
  maxPositionEmbeddings: 512,
});
const B = 4;
const T = 512;

describe('gradient_checkpointing', () => {
  it('the same step to the bit, under 0.6× the peak; the estimate within 25% either way', async () => {
    const weights = initTinyWeights(config, 1);
    const run = async (checkpointing: boolean) => {
      const dir = join(tmp, `artifacts-${checkpointing}`);
      buildTrainingArtifacts(weights, dir, {
        lora,
        graphs: ['train_step'],
        maxPositions: T,
        gradientCheckpointing: checkpointing,
      });
      expect(readArtifactsManifest(dir).gradientCheckpointing).toBe(
        checkpointing ? true : undefined,
      );
      const outputs = join(tmp, `outputs-${checkpointing}.json`);
      const peak = await measureTrainStepPeak(
        join(dir, 'train_step.onnx'),
        B,
        T,
        config.vocabSize,
        {
          outputs,
        },
      );
      const estimate =
        estimateMemory({
          config,
          lora,
          headChunk: config.vocabSize,
          sessions: { trainStep: true, logprobs: false, sampling: 0 },
          microBatch: { rows: B, seqLen: T },
          gradientCheckpointing: checkpointing,
        }).bytes / MiB;
      const values = JSON.parse(readFileSync(outputs, 'utf8')) as Record<string, number[]>;
      return { peak: peak.peakMiB, estimate, values };
    };
    const kept = await run(false);
    const recomputed = await run(true);
    console.log(
      `peak keeping the activations ${kept.peak.toFixed(0)} MiB (estimate ${kept.estimate.toFixed(0)}), recomputing them ${recomputed.peak.toFixed(0)} MiB (estimate ${recomputed.estimate.toFixed(0)})`,
    );
    expect(Object.keys(recomputed.values).sort()).toEqual(Object.keys(kept.values).sort());
    expect(Object.keys(kept.values).filter((k) => k.startsWith('grad.'))).toHaveLength(
      config.numHiddenLayers * LORA_TARGET_MODULES.length * 2,
    );
    for (const [name, v] of Object.entries(kept.values))
      expect(recomputed.values[name], name).toEqual(v);
    expect(
      kept.values['grad.base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight']!.some(
        (x) => x !== 0,
      ),
    ).toBe(true);
    expect(recomputed.peak).toBeLessThan(0.6 * kept.peak);
    for (const r of [kept, recomputed]) {
      expect(r.estimate / r.peak).toBeGreaterThan(0.75);
      expect(r.estimate / r.peak).toBeLessThan(1.25);
    }
  }, 300_000);

  it('the same bits with q/k norms, o and MLP biases and an untied head (Qwen3-style layers)', async () => {
    const qwen3: DecoderConfig = qwen3StyleConfig({
      seed: 0,
      hiddenSize: 64,
      layers: 3,
      heads: 4,
      kvHeads: 2,
    });
    const weights = initTinyWeights(qwen3, 2);
    const values = async (checkpointing: boolean) => {
      const dir = join(tmp, `qwen3-${checkpointing}`);
      buildTrainingArtifacts(weights, dir, {
        lora,
        graphs: ['train_step'],
        maxPositions: 64,
        gradientCheckpointing: checkpointing,
      });
      const outputs = join(tmp, `qwen3-${checkpointing}.json`);
      await measureTrainStepPeak(join(dir, 'train_step.onnx'), 2, 64, qwen3.vocabSize, { outputs });
      return JSON.parse(readFileSync(outputs, 'utf8')) as Record<string, number[]>;
    };
    const kept = await values(false);
    const recomputed = await values(true);
    expect(Object.keys(recomputed).sort()).toEqual(Object.keys(kept).sort());
    for (const [name, v] of Object.entries(kept)) expect(recomputed[name], name).toEqual(v);
  }, 300_000);

  it('a GRPO run with it logs the metrics of the run without it; artifacts built the other way are refused', async () => {
    const root = join(tmp, 'grpo');
    const byDefault = join(root, 'default');
    await (await tinyTrainer(root, tinyConfig(byDefault, { max_steps: 4 }))).train();

    // The tiny setup's artifacts were built without it: refused before output_dir is made.
    const refusedOut = join(root, 'refused');
    const err = await tinyTrainer(
      root,
      tinyConfig(refusedOut, { max_steps: 2, gradient_checkpointing: true }),
    ).catch((e: unknown) => e);
    expect(ConfigError.isInstance(err)).toBe(true);
    expect((err as ConfigError).key).toBe('gradient_checkpointing');
    expect((err as ConfigError).hint).toMatch(
      /rebuild the artifacts with it on \(flowgrpo export with --gradient-checkpointing/,
    );
    expect(existsSync(refusedOut)).toBe(false);

    // The same model's artifacts built with it.
    const { model } = await tinySetup(root);
    const artifacts = join(root, 'artifacts-checkpointing');
    buildTrainingArtifacts(model.weights, artifacts, {
      lora: { ...LORA, targetModules: [...LORA.targetModules] },
      maxPositions: 512,
      gradientCheckpointing: true,
    });
    const checkpointed = join(root, 'checkpointing');
    const trainer = await tinyTrainer(
      root,
      tinyConfig(checkpointed, { max_steps: 4, gradient_checkpointing: true }),
      { extra: { artifacts } },
    );
    expect(trainer.memoryEstimate().terms.find((t) => t.name === 'activations')?.what).toMatch(
      /kept \+ one layer's/,
    );
    await trainer.train();
    const expected = metricsOf(byDefault);
    // The quote reward has variance from step 3 on: a gradient to compare (steps 1–2: all 0).
    expect(expected).toHaveLength(4);
    expect(expected.some((m) => (m.grad_norm as number) > 1e-3)).toBe(true);
    expect(metricsOf(checkpointed)).toEqual(expected);
    const saved = JSON.parse(readFileSync(join(checkpointed, 'config.json'), 'utf8'));
    expect(saved.gradient_checkpointing).toBe(true);
  }, 300_000);

  it('full fine-tuning (SFT use_peft: false) with it logs the metrics of the run without it', async () => {
    const model = await createTinyQwen2(join(tmp, 'full-model'), {
      seed: 'full',
      hiddenSize: 32,
      layers: 2,
      heads: 4,
      kvHeads: 2,
      intermediateSize: 48,
    });
    const run = async (name: string, gradient_checkpointing: boolean) => {
      const out = join(tmp, 'full', name);
      const graph = join(out, 'graphs', 'train_step.onnx');
      await new SFTTrainer({
        config: {
          output_dir: out,
          max_steps: 3,
          learning_rate: 1e-3,
          use_peft: false,
          gradient_checkpointing,
          logging_steps: 1,
        },
        model: model.dir,
        tokenizer: model.tokenizer,
        trainDataset: [
          { text: 'the first example, a few words long' },
          { text: 'a second one' },
          { text: 'and a third example to learn' },
        ],
      }).train();
      // The graph the trainer built for itself recomputes its layers exactly when asked to.
      expect(readFileSync(graph).includes('layer0.recompute.grad'), graph).toBe(
        gradient_checkpointing,
      );
      return metricsOf(out);
    };
    const kept = await run('kept', false);
    expect(kept.filter((m) => m.grad_norm !== undefined).length).toBeGreaterThanOrEqual(3);
    expect(await run('recomputed', true)).toEqual(kept);
  }, 300_000);

  it('the preflight names it when it alone makes the run fit', () => {
    // Qwen2.5-0.5B's shape at 4,096 tokens a micro-batch, rollouts on a server: the activations
    // (~16 GB of the ~21 GiB) dominate.
    const facts = QWEN05_FACTS;
    const c = { ...QWEN05_GRPO, max_tokens_per_microbatch: 4096 };
    const kept = checkGrpoMemory(c, facts, 2 ** 40).bytes;
    const recomputed = checkGrpoMemory(
      { ...c, gradient_checkpointing: true },
      facts,
      2 ** 40,
    ).bytes;
    expect(kept - recomputed).toBeGreaterThan(10 * 2 ** 30);
    const available = recomputed + 2 ** 29;
    const err = thrownSync(() => checkGrpoMemory(c, facts, available));
    expect(InsufficientMemoryError.isInstance(err)).toBe(true);
    expect((err as InsufficientMemoryError).hint).toMatch(
      /^set gradient_checkpointing: true \(each layer's activations recomputed in the backward, one more forward per step; artifacts built without it are rebuilt with flowgrpo export --gradient-checkpointing: that fits\)/,
    );
    expect(checkGrpoMemory({ ...c, gradient_checkpointing: true }, facts, available).bytes).toBe(
      recomputed,
    );
  });
});
