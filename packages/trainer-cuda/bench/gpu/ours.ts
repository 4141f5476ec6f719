// Our engine on one device (WebGPU on the GPU machine; the CPU EP and lavapipe in the CPU smoke
// run) for one shape of scripts/gpu/shapes.json, random weights (a shape, not a model):
//   decode  tokens/s of greedy generation at each batch size, through DecoderGenerator over the
//           standard prefill/decode graphs (the path LocalPolicyEngine takes on a GPU)
//   train   tokens/s of one LoRA update — train_step forward + backward + AdamW, the update
//           LoraPolicy.update makes in GRPO/SFT — on batch × seq tokens, every position a target
// Decode is measured as (time of newTokens − time of 1 new token) / (newTokens − 1): the prompt's
// prefill cancels out and what is left is the per-token step. Each figure is the median of
// `repeats` after a warm-up (which compiles the WebGPU shaders). Peak device memory comes from
// run.sh's nvidia-smi sampler (results.ts); the process's own peak RSS is reported here.

import { mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { Device } from '@flowgrpo/models';
import {
  DecoderArtifacts,
  DecoderGenerator,
  initLoraParams,
  LORA_TARGET_MODULES,
  type LoraConfig,
  parseDecoderConfig,
} from '@flowgrpo/models';
import { buildTrainingArtifacts } from '../../src/index.js';
import { type TrainRow, targetsOf } from '../../src/update/collate.js';
import { LoraPolicy } from '../../src/update/lora-policy.js';
import { median } from '../anchors.js';
import { randomWeights } from '../models.js';

export interface ShapeSpec {
  config: Record<string, unknown>;
  decode: { batches: number[]; prompt: number; newTokens: number; repeats: number };
  train: { batch: number; seq: number; steps: number; lora: { r: number; alpha: number } };
}

/**
 * A train step's build switches beyond the float32 default, named by `--variant` (run.sh's
 * step-name suffix): `fp16` keeps the layers' projections in float16 (`base_weights_dtype`; the
 * WebGPU EP has no bfloat16), `ckpt` recomputes each layer in the backward
 * (`gradient_checkpointing`), `fp16-ckpt` both.
 */
export interface TrainVariant {
  baseWeightsDtype: 'float32' | 'float16';
  gradientCheckpointing: boolean;
}

export function parseTrainVariant(name: string | undefined): TrainVariant {
  const parts = new Set((name ?? '').split('-').filter((p) => p !== ''));
  for (const p of parts)
    if (p !== 'fp16' && p !== 'ckpt')
      throw new RangeError(`--variant ${name}: parts are fp16 and ckpt, joined by '-'`);
  return {
    baseWeightsDtype: parts.has('fp16') ? 'float16' : 'float32',
    gradientCheckpointing: parts.has('ckpt'),
  };
}

export function readShape(shapesFile: string, name: string): ShapeSpec {
  const all = JSON.parse(readFileSync(shapesFile, 'utf8')) as Record<string, ShapeSpec>;
  const s = all[name];
  if (!s || name.startsWith('//')) throw new RangeError(`${shapesFile} has no shape "${name}"`);
  return s;
}

function peakRssMiB(): number {
  const m = /VmHWM:\s+(\d+)/.exec(readFileSync('/proc/self/status', 'utf8'));
  return m ? Number(m[1]) / 1024 : Number.NaN;
}

function parameterCount(weights: ReturnType<typeof randomWeights>): number {
  let n = 0;
  for (const t of weights.tensors.values()) n += t.shape.reduce((a, b) => a * b, 1);
  return n;
}

/** Deterministic, varied token ids (never all one id: every row attends over real data). */
function ids(n: number, vocab: number, salt: number): number[] {
  return Array.from({ length: n }, (_, i) => (i * 7919 + salt * 104729 + 13) % vocab);
}

export async function benchDecode(
  shape: ShapeSpec,
  device: Device,
  work: string,
): Promise<Record<string, unknown>> {
  const config = parseDecoderConfig(shape.config);
  const { batches, prompt, newTokens, repeats } = shape.decode;
  const dir = join(work, `decode-${device}`);
  const t0 = performance.now();
  const weights = randomWeights(config);
  const params = parameterCount(weights);
  buildTrainingArtifacts(weights, dir, {
    graphs: ['prefill', 'decode'],
    maxPositions: prompt + newTokens + 8,
  });
  const buildSeconds = (performance.now() - t0) / 1000;
  const t1 = performance.now();
  const art = await DecoderArtifacts.open(dir, { device, graphs: ['prefill', 'decode'] });
  const openSeconds = (performance.now() - t1) / 1000;
  const rows: Record<string, unknown>[] = [];
  try {
    const gen = new DecoderGenerator(art);
    for (const B of batches) {
      const prompts = Array.from({ length: B }, (_, r) => ids(prompt, config.vocabSize, r));
      const time = async (n: number) => {
        const s = performance.now();
        const out = await gen.generate(prompts, { maxNewTokens: n, temperature: 0 });
        const ms = performance.now() - s;
        if (out.some((o) => o.tokens.length !== n))
          throw new Error(`B=${B}: a row stopped before ${n} tokens`);
        return ms;
      };
      const w = performance.now();
      await time(2);
      const warmupSeconds = (performance.now() - w) / 1000;
      const perStep: number[] = [];
      for (let r = 0; r < repeats; r++) {
        const one = await time(1);
        const many = await time(newTokens);
        perStep.push((many - one) / (newTokens - 1));
      }
      const ms = median(perStep);
      // newTokens − 1 decode steps must outweigh the noise of two timings; when they do not,
      // the figure is not a measurement.
      if (!(ms > 0))
        throw new Error(
          `B=${B}: ${newTokens} tokens took no longer than 1 (per step ${perStep.join(', ')} ms): noise, not a figure`,
        );
      rows.push({
        batch: B,
        msPerStep: ms,
        tokensPerSecond: (B * 1000) / ms,
        msPerStepAll: perStep,
        warmupSeconds,
      });
    }
  } finally {
    await art.release();
    rmSync(dir, { recursive: true, force: true });
  }
  return {
    device,
    parameters: params,
    weightDType: 'float32',
    buildSeconds,
    openSeconds,
    prompt,
    newTokens,
    repeats,
    decode: rows,
    peakRssMiB: peakRssMiB(),
  };
}

export async function benchTrain(
  shape: ShapeSpec,
  device: Device,
  work: string,
  variant: TrainVariant = parseTrainVariant(undefined),
): Promise<Record<string, unknown>> {
  const config = parseDecoderConfig(shape.config);
  const { batch: B, seq: T, steps } = shape.train;
  const lora: LoraConfig = { ...shape.train.lora, targetModules: LORA_TARGET_MODULES };
  const dir = join(work, `train-${device}`);
  mkdirSync(work, { recursive: true });
  const t0 = performance.now();
  buildTrainingArtifacts(randomWeights(config), dir, {
    graphs: ['logprobs', 'train_step'],
    maxPositions: T,
    lora,
    baseWeightsDtype: variant.baseWeightsDtype,
    gradientCheckpointing: variant.gradientCheckpointing,
  });
  const buildSeconds = (performance.now() - t0) / 1000;
  const policy = await LoraPolicy.open({
    artifacts: dir,
    params: initLoraParams(config, lora, 'gpu-bench'),
    device,
  });
  try {
    const rows: TrainRow[] = Array.from({ length: B }, (_, r) => ({
      tokens: Int32Array.from(ids(T, config.vocabSize, r + 1)),
      mask: new Uint8Array(T).fill(1),
      logprobs: new Float32Array(T).fill(Number.NaN),
      advantage: 0,
      trajectory: r,
      turn: 0,
    }));
    const targets = targetsOf(rows);
    // SFT's mean next-token NLL: the loss PyTorch's side computes (labels = input_ids).
    const nllWeights = new Float64Array(targets.count).fill(1 / targets.count);
    const hp = {
      learningRate: 1e-5,
      temperature: 1,
      epsilonLow: 0.2,
      epsilonHigh: 0.2,
      beta: 0,
      klEstimator: 'k3' as const,
      maxTokensPerMicrobatch: B * T,
    };
    const step = async () => {
      const s = performance.now();
      const r = await policy.update(rows, targets, { nllWeights }, hp);
      if (r.skipped) throw new Error(`the update was skipped: ${r.skipped}`);
      return { ms: performance.now() - s, loss: r.stats.loss, microBatches: r.microBatches };
    };
    const w = performance.now();
    const first = await step();
    const warmupSeconds = (performance.now() - w) / 1000;
    const times: number[] = [];
    let last = first;
    for (let i = 0; i < steps; i++) {
      last = await step();
      times.push(last.ms);
    }
    const ms = median(times);
    return {
      device,
      lora: { r: lora.r, alpha: lora.alpha, targetModules: [...LORA_TARGET_MODULES] },
      ...variant,
      batch: B,
      seq: T,
      buildSeconds,
      warmupSeconds,
      msPerStep: ms,
      msPerStepAll: times,
      tokensPerSecond: ((B * T) / ms) * 1000,
      firstLoss: first.loss,
      lastLoss: last.loss,
      microBatches: last.microBatches,
      peakRssMiB: peakRssMiB(),
    };
  } finally {
    await policy.release();
    rmSync(dir, { recursive: true, force: true });
  }
}
