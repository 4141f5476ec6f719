// base_weights_dtype: the layers' projection matrices stored and held in half precision, cast to
// float32 where each product needs them (packages/models' half-weights.ts).
// - The same values: for a checkpoint whose weights are bf16 (or fp16) values, as every such
//   checkpoint's are, the cast is exact, so the reference is the float32 artifacts of the same
//   weights (the path the fidelity tests check against PyTorch). The train step's loss, log-probs
//   and every LoRA gradient, and the logprobs graph's log-probs, agree within 1e-5 in relative L2
//   (measured 8e-7: the Gemms pack the cast weight on every call, which sums in other blocks than
//   the prepacked float32 weight); greedy generation gives the same tokens through the fused
//   generate graph and the decode graph.
// - Less memory: peaks (VmHWM) of fresh processes opening train_step and logprobs as a trainer
//   does and running one train step, bytes not times. Measured on this test's model (4 layers,
//   2,048 wide, 772 MiB of float32 projections): 2,625 MiB float32 prepacked against 896 MiB bf16;
//   1,048 MiB float32 shared against 774 MiB bf16. The estimate within 25% of the bf16 peaks.
// - The key: 'auto' takes the artifacts as they are, a dtype they were not built with is refused
//   before output_dir exists, full fine-tuning refuses half precision.
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError, float32ToTensor, tensorToFloat32 } from '@flowgrpo/core';
import {
  DecoderArtifacts,
  type DecoderConfig,
  DecoderGenerator,
  initTinyWeights,
  LORA_TARGET_MODULES,
  readArtifactsManifest,
  tinyQwen2Config,
} from '@flowgrpo/models';
import { qwen3StyleConfig } from '@flowgrpo/models/testing';
import * as ort from 'onnxruntime-node';
import { afterAll, describe, expect, it } from 'vitest';
import { thrownSync } from '../../../test-utils/folder-snapshot.js';
import {
  buildTrainingArtifacts,
  checkArtifactsBaseWeights,
  checkSftConfig,
  estimateMemory,
  resolveBaseWeightsDtype,
  SFTConfigSchema,
} from '../src/index.js';
import { halfWeights } from './support/half-checkpoint.js';
import { measureTrainStepPeak } from './support/measure-train-step-peak.js';
import { LORA, metricsOf, tinyConfig, tinySetup, tinyTrainer } from './support/tiny-grpo.js';

const tmp = mkdtempSync(join(tmpdir(), 'flowgrpo-half-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const MiB = 2 ** 20;
const lora = { r: 8, alpha: 16, targetModules: [...LORA_TARGET_MODULES] };

/** The logprobs graph's log-probs of every next token of `rows`, with a non-zero adapter. */
async function graphLogprobs(dir: string, rows: number[][]): Promise<Record<string, number[]>> {
  const art = await DecoderArtifacts.open(dir, { graphs: ['logprobs'] });
  try {
    const session = art.session('logprobs');
    const out: Record<string, number[]> = {};
    for (const [r, seq] of rows.entries()) {
      const T = seq.length;
      const i64 = (v: number[]) =>
        new ort.Tensor('int64', BigInt64Array.from(v, BigInt), [1, v.length]);
      const feeds: Record<string, ort.Tensor> = {
        input_ids: i64(seq),
        attention_mask: i64(seq.map(() => 1)),
        position_ids: i64(seq.map((_, i) => i)),
        target_positions: i64(seq.slice(1).map((_, k) => k)),
        target_ids: i64(seq.slice(1)),
        temperature: new ort.Tensor('float32', Float32Array.of(1), []),
        lora_scale: new ort.Tensor('float32', Float32Array.of(1), []),
      };
      for (const s of session.inputs)
        if (!feeds[s.name]) {
          const dims = s.shape as number[];
          const n = dims.reduce((a, b) => a * b, 1);
          feeds[s.name] = new ort.Tensor(
            'float32',
            Float32Array.from({ length: n }, (_, i) => 0.05 * Math.sin(i + T)),
            dims,
          );
        }
      out[`row${r}`] = Array.from(
        (await session.run(feeds)).outputs.logprobs!.data as Float32Array,
      );
    }
    return out;
  } finally {
    await art.release();
  }
}

/** ‖a − b‖ / ‖a‖ over every output of two train steps. */
function relL2(a: Record<string, number[]>, b: Record<string, number[]>): number {
  let num = 0;
  let den = 0;
  for (const [name, x] of Object.entries(a)) {
    const y = b[name]!;
    expect(y, name).toHaveLength(x.length);
    for (let i = 0; i < x.length; i++) {
      num += (x[i]! - y[i]!) ** 2;
      den += x[i]! ** 2;
    }
  }
  return Math.sqrt(num / den);
}

describe('base_weights_dtype', () => {
  it('a bf16 or fp16 checkpoint: the same step, log-probs and greedy tokens as its float32 artifacts', async () => {
    // Qwen3-style layers (q/k norms, o and MLP biases, untied head): every kind of projection.
    const qwen3: DecoderConfig = qwen3StyleConfig({
      seed: 0,
      hiddenSize: 64,
      layers: 2,
      heads: 4,
      kvHeads: 2,
    });
    const weights = halfWeights(qwen3, 3);
    const build = (dtype: 'float32' | 'bfloat16', checkpointing: boolean) => {
      const dir = join(tmp, `values-${dtype}-${checkpointing}`);
      buildTrainingArtifacts(weights, dir, {
        lora,
        maxPositions: 64,
        baseWeightsDtype: dtype,
        gradientCheckpointing: checkpointing,
      });
      return dir;
    };
    const step = async (dir: string) => {
      const outputs = join(dir, 'outputs.json');
      await measureTrainStepPeak(join(dir, 'train_step.onnx'), 2, 48, qwen3.vocabSize, {
        outputs,
      });
      return JSON.parse(readFileSync(outputs, 'utf8')) as Record<string, number[]>;
    };
    for (const checkpointing of [false, true]) {
      const f32 = build('float32', checkpointing);
      const half = build('bfloat16', checkpointing);
      expect(readArtifactsManifest(f32).baseWeightsDtype).toBeUndefined();
      expect(readArtifactsManifest(half).baseWeightsDtype).toBe('bfloat16');
      // The projections are most of this model's weights: the file is well under float32's.
      const size = (d: string) => statSync(join(d, 'weights.data')).size;
      expect(size(half)).toBeLessThan(0.8 * size(f32));
      const want = await step(f32);
      const got = await step(half);
      expect(Object.keys(got).sort()).toEqual(Object.keys(want).sort());
      expect(
        want['grad.base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight'],
      ).toBeDefined();
      expect(relL2(want, got), `checkpointing ${checkpointing}`).toBeLessThan(1e-5);
    }
    const rows = [
      [1, 5, 9, 3, 200, 17, 44, 2],
      [7, 7, 2, 90, 31],
    ];
    const lpWant = await graphLogprobs(join(tmp, 'values-float32-false'), rows);
    expect(
      relL2(lpWant, await graphLogprobs(join(tmp, 'values-bfloat16-false'), rows)),
    ).toBeLessThan(1e-5);

    // An fp16 checkpoint in float16, the same way.
    const f16 = halfWeights(qwen3, 4, 'F16');
    for (const dtype of ['float32', 'float16'] as const)
      buildTrainingArtifacts(f16, join(tmp, `fp16-${dtype}`), {
        lora,
        maxPositions: 64,
        baseWeightsDtype: dtype,
      });
    expect(readArtifactsManifest(join(tmp, 'fp16-float16')).baseWeightsDtype).toBe('float16');
    const f16Want = await step(join(tmp, 'fp16-float32'));
    expect(relL2(f16Want, await step(join(tmp, 'fp16-float16'))), 'fp16 step').toBeLessThan(1e-5);
    const f16Lp = await graphLogprobs(join(tmp, 'fp16-float32'), rows);
    expect(relL2(f16Lp, await graphLogprobs(join(tmp, 'fp16-float16'), rows))).toBeLessThan(1e-5);

    // Sampling: the fused generate graph and the decode graph cast once, at load.
    const f32 = await DecoderArtifacts.open(join(tmp, 'values-float32-false'), {
      graphs: ['decode', 'generate'],
    });
    const half = await DecoderArtifacts.open(join(tmp, 'values-bfloat16-false'), {
      graphs: ['decode', 'generate'],
    });
    try {
      const prompts = [
        [1, 5, 9, 3],
        [7, 7, 2],
      ];
      for (const useGenerateGraph of [true, false]) {
        const a = await new DecoderGenerator(f32, { useGenerateGraph }).generate(prompts, {
          maxNewTokens: 10,
          temperature: 0,
        });
        const b = await new DecoderGenerator(half, { useGenerateGraph }).generate(prompts, {
          maxNewTokens: 10,
          temperature: 0,
        });
        a.forEach((row, i) => {
          expect(Array.from(b[i]!.tokens), `generate graph ${useGenerateGraph}`).toEqual(
            Array.from(row.tokens),
          );
          for (const [j, lp] of row.logprobs.entries())
            expect(Math.abs(b[i]!.logprobs[j]! - lp)).toBeLessThan(1e-5);
        });
      }
    } finally {
      await f32.release();
      await half.release();
    }
  }, 300_000);

  it('holds the projections once, in half: well under float32’s peak; the estimate within 25%', async () => {
    // The projections dominate: 4 layers of 2,048 × (2,048 · 2 + 512 · 2 + 6,144 · 3) weights,
    // 772 MiB in float32, against a 32 MiB head and one row of 64 tokens.
    const config = tinyQwen2Config({
      seed: 0,
      vocabSize: 4096,
      hiddenSize: 2048,
      layers: 4,
      heads: 8,
      kvHeads: 2,
      intermediateSize: 6144,
      maxPositionEmbeddings: 128,
    });
    const weights = halfWeights(config, 1);
    const peaks: Record<string, number> = {};
    for (const dtype of ['float32', 'bfloat16'] as const) {
      const dir = join(tmp, `memory-${dtype}`);
      buildTrainingArtifacts(weights, dir, {
        lora,
        graphs: ['train_step', 'logprobs'],
        maxPositions: 128,
        baseWeightsDtype: dtype,
      });
      for (const shared of [false, true]) {
        const p = await measureTrainStepPeak(
          join(dir, 'train_step.onnx'),
          1,
          64,
          config.vocabSize,
          {
            session: { prepackWeights: !shared },
            logprobs: join(dir, 'logprobs.onnx'),
          },
        );
        const key = `${dtype} ${shared ? 'shared' : 'prepacked'}`;
        peaks[key] = p.peakMiB;
        if (dtype === 'bfloat16') {
          const estimate =
            estimateMemory({
              config,
              lora,
              headChunk: config.vocabSize,
              sessions: { trainStep: true, logprobs: true, sampling: 0 },
              sharedWeights: shared,
              halfProjections: true,
              microBatch: { rows: 1, seqLen: 64 },
            }).bytes / MiB;
          console.log(`${key}: peak ${p.peakMiB.toFixed(0)} MiB, estimate ${estimate.toFixed(0)}`);
          expect(estimate / p.peakMiB, key).toBeGreaterThan(0.75);
          expect(estimate / p.peakMiB, key).toBeLessThan(1.25);
        } else console.log(`${key}: peak ${p.peakMiB.toFixed(0)} MiB`);
      }
    }
    expect(peaks['bfloat16 prepacked']!).toBeLessThan(0.6 * peaks['float32 prepacked']!);
    expect(peaks['bfloat16 shared']!).toBeLessThan(0.85 * peaks['float32 shared']!);
  }, 600_000);

  it("'auto' takes the artifacts as built; another dtype is refused before output_dir; full fine-tuning refuses half", async () => {
    expect(resolveBaseWeightsDtype('auto', 'bfloat16')).toBe('bfloat16');
    expect(resolveBaseWeightsDtype('auto', 'float16')).toBe('float16');
    expect(resolveBaseWeightsDtype('auto', 'float32')).toBe('float32');
    expect(resolveBaseWeightsDtype('auto', undefined)).toBe('float32');
    expect(resolveBaseWeightsDtype('auto', 'bfloat16', 'webgpu')).toBe('float32');
    expect(resolveBaseWeightsDtype('float16', 'bfloat16')).toBe('float16');

    const root = join(tmp, 'grpo');
    // The tiny setup's artifacts hold float32 projections.
    const refusedOut = join(root, 'refused');
    const err = await tinyTrainer(
      root,
      tinyConfig(refusedOut, { max_steps: 2, base_weights_dtype: 'bfloat16' }),
    ).catch((e: unknown) => e);
    expect(ConfigError.isInstance(err)).toBe(true);
    expect((err as ConfigError).key).toBe('base_weights_dtype');
    expect((err as ConfigError).hint).toMatch(/flowgrpo export --base-weights-dtype bfloat16/);
    expect(existsSync(refusedOut)).toBe(false);

    // Artifacts of the same model in bf16, under 'auto' (the default): a run that learns
    // something (a gradient), and the preflight counts the projections in half.
    const { model } = await tinySetup(root);
    const artifacts = join(root, 'artifacts-bf16');
    buildTrainingArtifacts(model.weights, artifacts, {
      lora: { ...LORA, targetModules: [...LORA.targetModules] },
      maxPositions: 512,
      baseWeightsDtype: 'bfloat16',
    });
    const out = join(root, 'half');
    const trainer = await tinyTrainer(root, tinyConfig(out, { max_steps: 4 }), {
      extra: { artifacts },
    });
    expect(trainer.memoryEstimate().terms.map((t) => t.name)).toContain('projection casts');
    await trainer.train();
    const metrics = metricsOf(out);
    expect(metrics).toHaveLength(4);
    expect(metrics.some((m) => (m.grad_norm as number) > 1e-3)).toBe(true);
    expect(metrics.every((m) => Number.isFinite(m.loss as number))).toBe(true);

    // WebGPU has no bfloat16: such artifacts are refused there, float16 ones are not.
    const webgpu = thrownSync(() => checkArtifactsBaseWeights('auto', 'bfloat16', 'webgpu'));
    expect((webgpu as ConfigError).key).toBe('base_weights_dtype');
    expect(() => checkArtifactsBaseWeights('auto', 'float16', 'webgpu')).not.toThrow();

    // float16 ends at 65,504: a weight past it is refused, not stored as inf, and nothing is left.
    const wide = initTinyWeights(tinyQwen2Config({ seed: 0, hiddenSize: 32, layers: 1 }), 5);
    const q = wide.tensors.get('model.layers.0.self_attn.q_proj.weight')!;
    const qv = Float32Array.from(tensorToFloat32(q));
    qv[3] = 7e4;
    wide.tensors.set(
      'model.layers.0.self_attn.q_proj.weight',
      float32ToTensor(qv, 'F32', [...q.shape]),
    );
    const overDir = join(root, 'over-f16');
    const over = thrownSync(() =>
      buildTrainingArtifacts(wide, overDir, { baseWeightsDtype: 'float16', graphs: ['logprobs'] }),
    );
    expect(ConfigError.isInstance(over)).toBe(true);
    expect((over as ConfigError).message).toContain(
      'model.layers.0.self_attn.q_proj.weight holds 70000',
    );
    expect(existsSync(overDir)).toBe(false);

    const full = SFTConfigSchema.parse({
      output_dir: join(root, 'sft'),
      max_steps: 1,
      use_peft: false,
      base_weights_dtype: 'bfloat16',
    });
    const refused = thrownSync(() => checkSftConfig(full));
    expect(ConfigError.isInstance(refused)).toBe(true);
    expect((refused as ConfigError).key).toBe('base_weights_dtype');
    expect(() => checkSftConfig({ ...full, base_weights_dtype: 'auto' })).not.toThrow();
  }, 300_000);
});
