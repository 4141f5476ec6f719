// The graphs against the independent plain-TS reference forward (ReferenceDecoder, written like
// run.c) on configurations stories260K does not cover: Qwen2 (q/k/v biases, tied head, θ = 1e6,
// GQA 4:2), Qwen3 (per-head q/k RMSNorm, untied head, GQA 8:2), Llama with o/MLP biases — full
// sequences through ORT, and the decode graph fed with the past of an empty (length-0) cache.
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTensor } from '@flowgrpo/core';
import { toOnnxModel, WeightsFileWriter, writeModel } from '@flowgrpo/graph';
import * as ort from 'onnxruntime-node';
import { afterAll, describe, expect, it } from 'vitest';
import { buildDecoderGraph, type DecoderConfig, type ModelWeights } from '../src/index.js';
import { writeBaseWeights } from '../src/models/graph/base-weights.js';
import { ReferenceDecoder } from '../src/models/reference/reference-decoder.js';
import { initTinyWeights } from '../src/models/tiny-factory.js';

const tmp = mkdtempSync(join(tmpdir(), 'flowgrpo-decoder-ref-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const int64 = (values: readonly number[], dims: number[]) =>
  new ort.Tensor(
    'int64',
    BigInt64Array.from(values, (v) => BigInt(v)),
    dims,
  );

const base: DecoderConfig = {
  modelType: 'qwen2',
  vocabSize: 50,
  hiddenSize: 32,
  intermediateSize: 48,
  numHiddenLayers: 2,
  numAttentionHeads: 4,
  numKeyValueHeads: 2,
  headDim: 8,
  ropeTheta: 1e6,
  rmsNormEps: 1e-6,
  tieWordEmbeddings: true,
  qkvBias: true,
  oBias: false,
  mlpBias: false,
  qkNorm: false,
  maxPositionEmbeddings: 64,
  torchDtype: 'float32',
  initializerRange: 0.2,
  bosTokenId: undefined,
  eosTokenId: 1,
};

/** Random weights with non-trivial biases and norm weights (1 + noise). */
function weightsFor(config: DecoderConfig, seed: string): ModelWeights {
  const w = initTinyWeights(config, seed);
  for (const [name, t] of w.tensors) {
    if (name.endsWith('.bias') || name.endsWith('norm.weight')) {
      const v = Float32Array.from(
        t.data as Float32Array,
        (x, i) => x + 0.2 * Math.sin(i * 1.7 + name.length),
      );
      w.tensors.set(name, createTensor('F32', [...t.shape], v));
    }
  }
  return w;
}

async function sessions(weights: ModelWeights, name: string) {
  const dir = join(tmp, name);
  mkdirSync(dir);
  const writer = new WeightsFileWriter(join(dir, 'weights.data'));
  const b = writeBaseWeights(weights, writer);
  for (const [kind, file] of [
    ['prefill', 'full.onnx'],
    ['decode', 'decode.onnx'],
  ] as const) {
    const g = buildDecoderGraph(b, { kind, logits: 'all' });
    writeModel(toOnnxModel(g.graph), { dir, fileName: file, weights: writer });
  }
  writer.close();
  const opts = { intraOpNumThreads: 1 };
  return {
    full: await ort.InferenceSession.create(join(dir, 'full.onnx'), opts),
    decode: await ort.InferenceSession.create(join(dir, 'decode.onnx'), opts),
  };
}

const cases: [string, DecoderConfig][] = [
  ['qwen2 (qkv bias, tied, GQA 4:2)', base],
  [
    'qwen3 (q/k norm, untied, GQA 8:2, head_dim ≠ hidden/heads)',
    {
      ...base,
      modelType: 'qwen3',
      qkvBias: false,
      qkNorm: true,
      tieWordEmbeddings: false,
      numAttentionHeads: 8,
      headDim: 6,
    },
  ],
  [
    'llama (all biases, MHA)',
    {
      ...base,
      modelType: 'llama',
      ropeTheta: 10000,
      qkvBias: true,
      oBias: true,
      mlpBias: true,
      numKeyValueHeads: 4,
      tieWordEmbeddings: false,
    },
  ],
];

describe('decoder graphs vs the TS reference forward', () => {
  for (const [label, config] of cases) {
    it(label, async () => {
      const weights = weightsFor(config, label);
      const ref = new ReferenceDecoder(weights);
      const tokens = [3, 17, 42, 8, 8, 25, 0, 49, 11];
      const T = tokens.length;
      const want = ref.forwardSequence(tokens);
      const s = await sessions(weights, label.split(' ')[0]!);
      const feeds = {
        input_ids: int64(tokens, [1, T]),
        attention_mask: int64(
          tokens.map(() => 1),
          [1, T],
        ),
        position_ids: int64(
          tokens.map((_, i) => i),
          [1, T],
        ),
      };
      const got = (await s.full.run(feeds)).logits!.data as Float32Array;
      let err = 0;
      let scale = 0;
      for (let p = 0; p < T; p++)
        for (let v = 0; v < config.vocabSize; v++) {
          err = Math.max(err, Math.abs(got[p * config.vocabSize + v]! - want[p]![v]!));
          scale = Math.max(scale, Math.abs(want[p]![v]!));
        }
      expect(scale).toBeGreaterThan(0.1);
      expect(err).toBeLessThan(1e-4 * Math.max(1, scale));

      // The decode graph with an empty past is a prefill: same logits.
      const empty: Record<string, ort.Tensor> = {};
      for (let l = 0; l < config.numHiddenLayers; l++)
        for (const kv of ['key', 'value'])
          empty[`past_key_values.${l}.${kv}`] = new ort.Tensor('float32', new Float32Array(0), [
            1,
            config.numKeyValueHeads,
            0,
            config.headDim,
          ]);
      const viaDecode = (await s.decode.run({ ...feeds, ...empty })).logits!.data as Float32Array;
      let d = 0;
      for (let i = 0; i < got.length; i++) d = Math.max(d, Math.abs(viaDecode[i]! - got[i]!));
      expect(d).toBeLessThan(1e-5);
      await s.full.release();
      await s.decode.release();
    });
  }
});
