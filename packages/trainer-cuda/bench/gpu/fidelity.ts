// Our side of the fidelity check against HF transformers + PEFT (scripts/gpu/torch_side.py
// `fidelity` compares). Writes into one folder — the contract between the two sides:
//   model/          a random-weight Qwen2 HF folder (config.json, model.safetensors: float32)
//   adapter/        a PEFT LoRA adapter on it, A and B both random (PEFT's own init has B = 0,
//                   which would leave the gradients of every A zero and the check half blind)
//   batch.json      {input_ids: [[...]]}: B rows of T random ids, no padding
//   ours.safetensors
//     logits.cpu, logits.webgpu   [B, T, V] float32, every position, adapter applied (scale 1)
//     grad.<PEFT name>            ∂loss/∂(adapter matrix) on the CPU EP, loss = mean next-token
//                                 NLL over every position (HF's loss with labels = input_ids)
//   ours.json       the loss, what ran and what did not (WebGPU absent or a software adapter)
// Fresh random draws for every tensor (createRng forks), never zeros.

import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createRng, type TensorSource, writeSafetensors } from '@flowgrpo/core';
import { toOnnxModel, WeightsFileWriter, writeModel } from '@flowgrpo/graph';
import type { Device, ModelWeights } from '@flowgrpo/models';
import {
  buildDecoderGraph,
  createSession,
  initTinyWeights,
  LORA_SCALE,
  LORA_TARGET_MODULES,
  type LoraConfig,
  type LoraParams,
  loraParamSpecs,
  parseDecoderConfig,
  saveHfModel,
  saveLoraAdapter,
  writeBaseWeights,
} from '@flowgrpo/models';
import * as ort from 'onnxruntime-node';
import { buildTrainingArtifacts } from '../../src/index.js';
import { type TrainRow, targetsOf } from '../../src/update/collate.js';
import { LoraPolicy } from '../../src/update/lora-policy.js';

export interface FidelitySpec {
  config: Record<string, unknown>;
  batch: number;
  seq: number;
  lora: { r: number; alpha: number };
}

/** Logits of every position through a prefill graph built with `logits: 'all'`. */
async function allLogits(
  weights: ModelWeights,
  lora: LoraConfig,
  params: LoraParams,
  ids: number[][],
  device: Device,
  dir: string,
): Promise<Float32Array> {
  mkdirSync(dir, { recursive: true });
  const writer = new WeightsFileWriter(join(dir, 'weights.data'));
  const base = writeBaseWeights(weights, writer, { maxPositions: ids[0]!.length });
  const g = buildDecoderGraph(base, { kind: 'prefill', lora, logits: 'all' });
  writeModel(toOnnxModel(g.graph), { dir, fileName: 'full.onnx', weights: writer });
  writer.close();
  const session = await createSession(join(dir, 'full.onnx'), {
    device,
    disableCpuFallback: true,
  });
  try {
    const B = ids.length;
    const T = ids[0]!.length;
    const int64 = (f: (r: number, t: number) => number) =>
      new ort.Tensor(
        'int64',
        BigInt64Array.from({ length: B * T }, (_, i) => BigInt(f(Math.floor(i / T), i % T))),
        [B, T],
      );
    const feeds: Record<string, ort.Tensor> = {
      input_ids: int64((r, t) => ids[r]![t]!),
      attention_mask: int64(() => 1),
      position_ids: int64((_, t) => t),
      [LORA_SCALE]: new ort.Tensor('float32', Float32Array.of(1), []),
    };
    for (const s of loraParamSpecs(weights.config, lora))
      feeds[s.name] = new ort.Tensor('float32', params.get(s.name)!, [...s.shape]);
    const wanted = new Set(session.inputs.map((i) => i.name));
    for (const k of Object.keys(feeds)) if (!wanted.has(k)) delete feeds[k];
    const r = await session.run(feeds);
    return Float32Array.from(r.outputs.logits!.data as Float32Array);
  } finally {
    await session.release();
  }
}

export async function exportFidelity(
  spec: FidelitySpec,
  out: string,
  webgpu: { run: boolean; why?: string },
): Promise<Record<string, unknown>> {
  const config = { ...parseDecoderConfig(spec.config), torchDtype: 'float32' };
  const lora: LoraConfig = { ...spec.lora, targetModules: LORA_TARGET_MODULES };
  const weights = initTinyWeights(config, 'gpu-fidelity');
  // initTinyWeights leaves the q/k/v biases zero: draw them too, so the check sees them.
  const biasRng = createRng('gpu-fidelity-bias');
  for (const [name, t] of weights.tensors)
    if (name.endsWith('.bias')) {
      const v = t.data as Float32Array;
      for (let i = 0; i < v.length; i++) v[i] = (2 * biasRng.next() - 1) * 0.1;
    }
  mkdirSync(out, { recursive: true });
  await saveHfModel(join(out, 'model'), weights, { dtype: 'F32' });

  const rng = createRng('gpu-fidelity-lora');
  const params: LoraParams = new Map();
  for (const s of loraParamSpecs(config, lora)) {
    const r = rng.fork(s.name);
    params.set(
      s.name,
      Float32Array.from({ length: s.shape[0] * s.shape[1] }, () => (2 * r.next() - 1) * 0.05),
    );
  }
  await saveLoraAdapter(join(out, 'adapter'), config, lora, params, { baseModel: '../model' });

  const idRng = createRng('gpu-fidelity-ids');
  const ids = Array.from({ length: spec.batch }, () =>
    Array.from({ length: spec.seq }, () => Math.floor(idRng.next() * config.vocabSize)),
  );
  writeFileSync(join(out, 'batch.json'), `${JSON.stringify({ input_ids: ids })}\n`);

  const shape = [spec.batch, spec.seq, config.vocabSize];
  const tensors: [string, TensorSource][] = [];
  tensors.push([
    'logits.cpu',
    {
      dtype: 'F32',
      shape,
      data: await allLogits(weights, lora, params, ids, 'cpu', join(out, 'graph-cpu')),
    },
  ]);
  const ran: string[] = ['cpu'];
  let webgpuError: string | undefined;
  if (webgpu.run) {
    try {
      const data = await allLogits(weights, lora, params, ids, 'webgpu', join(out, 'graph-webgpu'));
      tensors.push(['logits.webgpu', { dtype: 'F32', shape, data }]);
      ran.push('webgpu');
    } catch (e) {
      webgpuError = e instanceof Error ? e.message : String(e);
    }
  }

  // Gradients through LoraPolicy.gradients: the train_step graph the trainer runs.
  const art = join(out, 'artifacts');
  buildTrainingArtifacts(weights, art, {
    graphs: ['logprobs', 'train_step'],
    maxPositions: spec.seq,
    lora,
  });
  const policy = await LoraPolicy.open({ artifacts: art, params, device: 'cpu' });
  let loss: number;
  try {
    const rows: TrainRow[] = ids.map((row, r) => ({
      tokens: Int32Array.from(row),
      mask: new Uint8Array(row.length).fill(1),
      logprobs: new Float32Array(row.length).fill(Number.NaN),
      advantage: 0,
      trajectory: r,
      turn: 0,
    }));
    const targets = targetsOf(rows);
    const g = await policy.gradients(
      rows,
      targets,
      { nllWeights: new Float64Array(targets.count).fill(1 / targets.count) },
      {
        learningRate: 0,
        temperature: 1,
        epsilonLow: 0.2,
        epsilonHigh: 0.2,
        beta: 0,
        klEstimator: 'k3',
        maxTokensPerMicrobatch: spec.batch * spec.seq,
      },
    );
    loss = g.loss;
    for (const s of loraParamSpecs(config, lora))
      tensors.push([
        `grad.${s.name}`,
        { dtype: 'F32', shape: [...s.shape], data: g.grads[s.name]! },
      ]);
  } finally {
    await policy.release();
  }
  await writeSafetensors(join(out, 'ours.safetensors'), tensors);
  const summary = {
    loss,
    logitsDevices: ran,
    ...(webgpu.run ? {} : { webgpuSkipped: webgpu.why ?? 'not asked' }),
    ...(webgpuError && { webgpuError }),
    batch: spec.batch,
    seq: spec.seq,
    vocab: config.vocabSize,
    loraTensors: loraParamSpecs(config, lora).length,
  };
  writeFileSync(join(out, 'ours.json'), `${JSON.stringify(summary, null, 2)}\n`);
  return summary;
}
