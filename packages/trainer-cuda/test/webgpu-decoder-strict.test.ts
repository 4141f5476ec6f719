// The decoder graphs on the WebGPU EP with CPU fallback disabled (`session.disable_cpu_ep_fallback`
// = 1: the session refuses to load if any node would run on the CPU EP). Reference: the same
// graphs on the CPU EP (themselves checked against the plain-TS reference forward in
// decoder-reference.test.ts); WebGPU's float32 results must match them to 1e-4. A tiny Qwen2 with
// GQA 4:2 and a left-padded batch of two exercises the causal/padding bias and the group stacking.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { WeightsFileWriter } from '@flowgrpo/graph';
import {
  ALL_GRAPHS,
  buildArtifactGraph,
  createSession,
  type DecoderConfig,
  deviceAvailability,
  initTinyWeights,
  type LoraConfig,
  loraParamSpecs,
  tinyQwen2Config,
  writeBaseWeights,
} from '@flowgrpo/models';
import { qwen3StyleConfig } from '@flowgrpo/models/testing';
import * as ort from 'onnxruntime-node';
import { afterAll, describe, expect, it } from 'vitest';
import { TRAINING_GRAPH_BUILDERS } from '../src/graphs/training-artifacts.js';
import { buildTrainingArtifacts } from '../src/index.js';

const webgpu = await deviceAvailability('webgpu');
if (!webgpu.available) console.info(`[decoder] WebGPU strict tests skipped: ${webgpu.reason}`);

const tmp = mkdtempSync(join(tmpdir(), 'flowgrpo-webgpu-decoder-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

// Qwen2 (q/k/v biases, tied head, GQA 4:2, one layer) and a Qwen3/Llama-like variant (per-head
// q/k RMSNorm, o/MLP biases, untied head, MHA, two layers). Weights 10× the default init scale,
// so the logits differ clearly between tokens.
const qwen2 = tinyQwen2Config({
  seed: 0,
  hiddenSize: 32,
  layers: 1,
  heads: 4,
  kvHeads: 2,
  initializerRange: 0.2,
});
const configs: [string, DecoderConfig][] = [
  ['qwen2, GQA 4:2', qwen2],
  [
    'q/k norm, biases, untied, MHA, 2 layers',
    qwen3StyleConfig({ seed: 0, hiddenSize: 16, layers: 2, heads: 2, initializerRange: 0.2 }),
  ],
];
const lora: LoraConfig = { r: 2, alpha: 4, targetModules: ['q_proj', 'v_proj', 'o_proj'] };

const int64 = (values: readonly number[], dims: number[]) =>
  new ort.Tensor(
    'int64',
    BigInt64Array.from(values, (v) => BigInt(v)),
    dims,
  );
const f32 = (values: readonly number[], dims: number[]) =>
  new ort.Tensor('float32', Float32Array.from(values), dims);

function expectClose(got: ort.Tensor, want: ort.Tensor, tol: number, what: string) {
  expect(got.dims, what).toEqual(want.dims);
  const g = got.data as Float32Array;
  const w = want.data as Float32Array;
  let worst = 0;
  for (let i = 0; i < w.length; i++) worst = Math.max(worst, Math.abs(g[i]! - w[i]!));
  expect(worst, what).toBeLessThan(tol);
}

// Two rows, the first left-padded by two: ids, mask and positions as the generation engine feeds.
const T = 5;
const ids = [0, 0, 7, 19, 3, 11, 4, 25, 8, 30];
const mask = [0, 0, 1, 1, 1, 1, 1, 1, 1, 1];
const pos = [0, 0, 0, 1, 2, 0, 1, 2, 3, 4];
// Every graph of the artifacts takes the LoRA matrices: small non-zero values (a fixed sine
// pattern), so the adapters take part in the products.
function loraFeedsFor(config: DecoderConfig): Record<string, ort.Tensor> {
  const feeds: Record<string, ort.Tensor> = { lora_scale: f32([1], []) };
  for (const s of loraParamSpecs(config, lora)) {
    const n = s.shape.reduce((a, b) => a * b, 1);
    feeds[s.name] = f32(
      Array.from({ length: n }, (_, i) => 0.1 * Math.sin(i * 1.3 + s.name.length)),
      [...s.shape],
    );
  }
  return feeds;
}

describe('the decoder graphs do no int64 arithmetic (no WebGPU needed)', () => {
  // WebGPU has no kernel taking int64 data (not even Shape): int64 may only enter a graph as the
  // indices of Gather/GatherElements and leave Shape as a shape operand.
  for (const [label, config] of configs)
    it(label, () => {
      const base = writeBaseWeights(
        initTinyWeights(config, 3),
        new WeightsFileWriter(join(tmp, `${label.length}.data`)),
        { maxPositions: 16 },
      );
      // train_step twice: with each layer recomputed in the backward (gradient_checkpointing) too.
      const builds = [
        ...ALL_GRAPHS.map((kind) => ({ kind, gradientCheckpointing: false })),
        { kind: 'train_step' as const, gradientCheckpointing: true },
      ];
      for (const { kind, gradientCheckpointing } of builds) {
        const { graph } = buildArtifactGraph(base, kind, lora, TRAINING_GRAPH_BUILDERS, {
          gradientCheckpointing,
        });
        for (const n of graph.nodes) {
          const what = `${kind}${gradientCheckpointing ? ' (checkpointed)' : ''} ${n.name}`;
          if (n.outputs.some((o) => o.dtype === 'int64')) expect(n.op, what).toBe('Shape');
          expect(n.inputs[0]?.dtype, what).not.toBe('int64');
        }
      }
    });
});

describe.skipIf(!webgpu.available).each(configs)(
  `decoder graphs on WebGPU with CPU fallback disabled${webgpu.available ? '' : ` (skipped: ${webgpu.reason})`}: %s`,
  (label, config) => {
    const dir = join(tmp, label.replace(/\W+/g, '-'));
    buildTrainingArtifacts(initTinyWeights(config, 3), dir, { lora, maxPositions: 16 });
    // The train step with each layer recomputed in its backward (gradient_checkpointing).
    buildTrainingArtifacts(initTinyWeights(config, 3), `${dir}-checkpointed`, {
      lora,
      maxPositions: 16,
      graphs: ['train_step'],
      gradientCheckpointing: true,
    });
    const loraFeeds = loraFeedsFor(config);
    const prefillFeeds = {
      ...loraFeeds,
      input_ids: int64(ids, [2, T]),
      attention_mask: int64(mask, [2, T]),
      position_ids: int64(pos, [2, T]),
    };
    const open = (kind: string, strict: boolean, from = dir) =>
      createSession(join(from, `${kind}.onnx`), {
        device: strict ? 'webgpu' : 'cpu',
        disableCpuFallback: strict,
      });

    it('prefill then decode load strictly and give the CPU EP’s logits and KV', async () => {
      const [cpuPre, gpuPre, cpuDec, gpuDec] = await Promise.all([
        open('prefill', false),
        open('prefill', true),
        open('decode', false),
        open('decode', true),
      ]);
      expect(gpuPre.device).toBe('webgpu');
      const want = (await cpuPre.run(prefillFeeds)).outputs;
      const got = (await gpuPre.run(prefillFeeds)).outputs;
      const layers = Array.from({ length: config.numHiddenLayers }, (_, l) => l);
      const outNames = [
        'logits',
        ...layers.flatMap((l) => [`present.${l}.key`, `present.${l}.value`]),
      ];
      for (const name of outNames) expectClose(got[name]!, want[name]!, 1e-4, `prefill ${name}`);

      // One decode step on the CPU's cache: total length T + 1, next positions 3 and 5.
      const decodeFeeds: Record<string, ort.Tensor> = {
        ...loraFeeds,
        input_ids: int64([12, 40], [2, 1]),
        attention_mask: int64([...mask.slice(0, T), 1, ...mask.slice(T), 1], [2, T + 1]),
        position_ids: int64([3, 5], [2, 1]),
      };
      for (const l of layers) {
        decodeFeeds[`past_key_values.${l}.key`] = want[`present.${l}.key`]!;
        decodeFeeds[`past_key_values.${l}.value`] = want[`present.${l}.value`]!;
      }
      const wantDec = (await cpuDec.run(decodeFeeds)).outputs;
      const gotDec = (await gpuDec.run(decodeFeeds)).outputs;
      for (const name of outNames)
        expectClose(gotDec[name]!, wantDec[name]!, 1e-4, `decode ${name}`);
      await Promise.all([cpuPre, gpuPre, cpuDec, gpuDec].map((s) => s.release()));
    });

    it('logprobs loads strictly and gives the CPU EP’s log-probabilities', async () => {
      const [cpu, gpu] = await Promise.all([open('logprobs', false), open('logprobs', true)]);
      const feeds = {
        ...prefillFeeds,
        target_positions: int64([2, 3, 0, 3], [2, 2]),
        target_ids: int64([19, 3, 4, qwen2.vocabSize - 1], [2, 2]),
        temperature: f32([0.7], []),
      };
      const want = (await cpu.run(feeds)).outputs.logprobs!;
      expect(Array.from(want.data as Float32Array).every((v) => v < 0 && v > -20)).toBe(true);
      expectClose((await gpu.run(feeds)).outputs.logprobs!, want, 1e-4, 'logprobs');
      await Promise.all([cpu.release(), gpu.release()]);
    });

    it('train_step loads strictly and gives the CPU EP’s loss, logprobs and LoRA gradients (a packed row too), with each layer recomputed too', async () => {
      const [cpu, gpu, gpuRecomputed] = await Promise.all([
        open('train_step', false),
        open('train_step', true),
        open('train_step', true, `${dir}-checkpointed`),
      ]);
      const feeds: Record<string, ort.Tensor> = {
        ...prefillFeeds,
        // The second row packs two examples (2 + 3 tokens): positions restart, and the
        // block-diagonal mask is built from segment_ids on the device too.
        position_ids: int64([0, 0, 0, 1, 2, 0, 1, 0, 1, 2], [2, T]),
        segment_ids: int64([0, 0, 0, 0, 0, 0, 0, 1, 1, 1], [2, T]),
        target_positions: int64([2, 3, 0, 3], [2, 2]),
        target_ids: int64([19, 3, 4, 30], [2, 2]),
        temperature: f32([1], []),
        // A GRPO objective with every term on (clip, dual clip, k3 KL, an NLL term).
        old_logprobs: f32([-5.1, -5.6, -5.3, -5.0], [2, 2]),
        on_policy: new ort.Tensor('bool', Uint8Array.of(0), []),
        ref_logprobs: f32([-5.4, -5.2, -5.5, -5.3], [2, 2]),
        advantages: f32([1.1, -0.6, 0.5, 0], [2, 2]),
        pg_weights: f32([0.3, 0.3, 0.4, 0], [2, 2]),
        // Importance weights (token_mask): e^0.9 > 2 leaves the loss, e^−0.4 weighs it.
        sampler_logprobs: f32([-6.0, -5.2, 0, 0], [2, 2]),
        is_weighted: new ort.Tensor('bool', Uint8Array.of(1, 1, 0, 0), [2, 2]),
        is_cap: f32([2], []),
        is_mask: new ort.Tensor('bool', Uint8Array.of(1), []),
        nll_weights: f32([0.1, 0, 0.1, 0], [2, 2]),
        stat_weights: f32([1 / 3, 1 / 3, 1 / 3, 0], [2, 2]),
        epsilon_low: f32([0.2], []),
        epsilon_high: f32([0.28], []),
        clip_ratio_c: f32([3], []),
        beta: f32([0.04], []),
        kl_coeffs: f32([0, 0, 1], [3]),
      };
      for (const s of loraParamSpecs(config, lora))
        feeds[`acc.${s.name}`] = f32(new Array(s.shape[0] * s.shape[1]).fill(0), s.shape);
      const want = (await cpu.run(feeds)).outputs;
      for (const session of [gpu, gpuRecomputed]) {
        const got = (await session.run(feeds)).outputs;
        expectClose(got.loss!, want.loss!, 1e-4, 'loss');
        expectClose(got.logprobs!, want.logprobs!, 1e-4, 'logprobs');
        for (const s of loraParamSpecs(config, lora))
          expectClose(got[`grad.${s.name}`]!, want[`grad.${s.name}`]!, 1e-4, s.name);
      }
      await Promise.all([cpu.release(), gpu.release(), gpuRecomputed.release()]);
    });
  },
);
