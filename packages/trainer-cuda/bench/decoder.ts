// Decoder benchmarks: prefill and decode tokens/s through the generated ONNX graphs (CPU EP), at
// batch 1 and 32, for stories260K (../shared) and for a Qwen2.5-0.5B-shaped model with random
// weights, beside the plain-TS reference forward (one stream, llama2.c style) in the same process.
// FLOWGRPO_BENCH_QWEN_LAYERS picks how many of the 24 layers the 0.5B-shaped model gets
// (default 24); per-layer figures are printed too.

import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { LoraConfig, ModelWeights } from '@flowgrpo/models';
import {
  DecoderArtifacts,
  loadLlama2cCheckpoint,
  pastKeyName,
  pastValueName,
  presentKeyName,
  presentValueName,
} from '@flowgrpo/models';
import { ReferenceDecoder } from '@flowgrpo/models/testing';
import * as ort from 'onnxruntime-node';
import { buildTrainingArtifacts } from '../src/index.js';
import { qwen05, randomWeights, trainStepFeeds } from './models.js';
import type { BenchSection } from './table.js';

const int64 = (values: readonly number[], dims: number[]) =>
  new ort.Tensor(
    'int64',
    BigInt64Array.from(values, (v) => BigInt(v)),
    dims,
  );
const mib = (b: number) => `${(b / 2 ** 20).toFixed(0)} MiB`;

/** The plain-TS reference forward (one stream, llama2.c style): ms per token after the first. */
function referenceMsPerToken(weights: ModelWeights, n: number): number {
  const ref = new ReferenceDecoder(weights);
  const cache = ref.newCache(n + 1);
  ref.forward(1, 0, cache);
  const start = performance.now();
  for (let p = 1; p <= n; p++) ref.forward((p * 31) % weights.config.vocabSize, p, cache);
  return (performance.now() - start) / n;
}

const LORA: LoraConfig = {
  r: 16,
  alpha: 32,
  targetModules: ['q_proj', 'k_proj', 'v_proj', 'o_proj'],
};

interface Row {
  model: string;
  what: string;
  tokPerS: number;
  msPer: number;
  rss: number;
}

async function benchModel(
  name: string,
  holder: { weights?: ModelWeights },
  rows: Row[],
  notes: string[],
) {
  const c = holder.weights!.config;
  const big = c.hiddenSize >= 512;
  const rss = () => process.memoryUsage().rss;
  const dir = mkdtempSync(join(tmpdir(), 'flowgrpo-bench-decoder-'));
  try {
    const t0 = performance.now();
    buildTrainingArtifacts(holder.weights!, dir, {
      graphs: ['decode', 'train_step'],
      maxPositions: 1024,
      lora: LORA,
    });
    notes.push(`${name}: artifacts built in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    const ms = referenceMsPerToken(holder.weights!, big ? 3 : 48);
    rows.push({ model: name, what: 'TS reference B=1', tokPerS: 1000 / ms, msPer: ms, rss: rss() });
    // Only ORT holds the weights from here on (lower peak memory).
    delete holder.weights;
    (globalThis as { gc?: () => void }).gc?.();
    const art = await DecoderArtifacts.open(dir, { graphs: ['decode'] });
    // One session (the decode graph prefills from an empty cache): one copy of the weights.
    const decode = art.session('decode');
    // The policy's adapter (LoRA r=16 on q/k/v/o) is part of every run, as during rollouts.
    const adapter = (session: typeof decode) => {
      const feeds: Record<string, ort.Tensor> = {
        lora_scale: new ort.Tensor('float32', new Float32Array([1]), []),
      };
      for (const spec of session.inputs)
        if (spec.name.includes('.lora_')) {
          const d = spec.shape as number[];
          feeds[spec.name] = new ort.Tensor(
            'float32',
            new Float32Array(d[0]! * d[1]!).fill(0.01),
            d,
          );
        }
      return feeds;
    };
    const emptyPast = (B: number) => {
      const feeds: Record<string, ort.Tensor> = {};
      const dims = [B, c.numKeyValueHeads, 0, c.headDim];
      for (let l = 0; l < c.numHiddenLayers; l++) {
        feeds[pastKeyName(l)] = new ort.Tensor('float32', new Float32Array(0), dims);
        feeds[pastValueName(l)] = new ort.Tensor('float32', new Float32Array(0), dims);
      }
      return feeds;
    };
    const tok = (b: number, t: number) =>
      Array.from({ length: b * t }, (_, i) => (i * 7919 + 13) % c.vocabSize);

    const runPrefill = (B: number, T: number) =>
      decode.run({
        ...emptyPast(B),
        ...adapter(decode),
        input_ids: int64(tok(B, T), [B, T]),
        attention_mask: int64(new Array(B * T).fill(1), [B, T]),
        position_ids: int64(
          Array.from({ length: B * T }, (_, i) => i % T),
          [B, T],
        ),
      });

    // Prefill: one 128-token prompt.
    const T = 128;
    await runPrefill(1, T);
    const pt: number[] = [];
    for (let i = 0; i < (big ? 1 : 3); i++) {
      const s = performance.now();
      await runPrefill(1, T);
      pt.push(performance.now() - s);
    }
    const pMs = Math.min(...pt);
    rows.push({
      model: name,
      what: `prefill B=1 T=${T}`,
      tokPerS: (T / pMs) * 1000,
      msPer: pMs,
      rss: rss(),
    });

    // Decode: after a 16-token prompt, n steps, KV cache carried.
    for (const B of [1, 32]) {
      const P = 16;
      let r = await runPrefill(B, P);
      const steps = big ? (B === 1 ? 10 : 5) : B === 1 ? 32 : 16;
      let S = P;
      const times: number[] = [];
      for (let step = 0; step < steps; step++) {
        const feeds: Record<string, ort.Tensor> = {
          input_ids: int64(tok(B, 1), [B, 1]),
          attention_mask: int64(new Array(B * (S + 1)).fill(1), [B, S + 1]),
          position_ids: int64(new Array(B).fill(S), [B, 1]),
          ...adapter(decode),
        };
        for (let l = 0; l < c.numHiddenLayers; l++) {
          feeds[pastKeyName(l)] = r.outputs[presentKeyName(l)]!;
          feeds[pastValueName(l)] = r.outputs[presentValueName(l)]!;
        }
        const s = performance.now();
        r = await decode.run(feeds);
        times.push(performance.now() - s);
        S++;
      }
      const ms = times.slice(1).reduce((a, b) => a + b, 0) / (times.length - 1);
      rows.push({
        model: name,
        what: `decode B=${B}`,
        tokPerS: (B / ms) * 1000,
        msPer: ms,
        rss: rss(),
      });
    }
    await art.release();

    // train_step (forward + LoRA backward + loss), every position a target.
    const train = await DecoderArtifacts.open(dir, { graphs: ['train_step'] });
    const ts = train.session('train_step');
    const [TB, TT] = big ? [1, 64] : [8, 128];
    const tfeeds = trainStepFeeds(ts.inputs, TB, TT, c.vocabSize);
    await ts.run(tfeeds);
    const tt: number[] = [];
    for (let i = 0; i < (big ? 1 : 3); i++) {
      const s0 = performance.now();
      await ts.run(tfeeds);
      tt.push(performance.now() - s0);
    }
    const tms = Math.min(...tt);
    rows.push({
      model: name,
      what: `train_step B=${TB} T=${TT} (LoRA r=${LORA.r} q/k/v/o)`,
      tokPerS: ((TB * TT) / tms) * 1000,
      msPer: tms,
      rss: rss(),
    });
    await train.release();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function benchDecoder(): Promise<BenchSection> {
  const rows: Row[] = [];
  const notes: string[] = [];
  const shared = process.env.FLOWGRPO_SHARED ?? join(import.meta.dirname, '../../../../shared');
  const stories = join(shared, 'models', 'stories260K', 'stories260K.bin');
  if (existsSync(stories))
    await benchModel('stories260K', { weights: await loadLlama2cCheckpoint(stories) }, rows, notes);
  else notes.push(`stories260K skipped: ${stories} absent`);

  const layers = Number(process.env.FLOWGRPO_BENCH_QWEN_LAYERS ?? 24);
  const name = `qwen2.5-0.5B-shape L=${layers}`;
  const t0 = performance.now();
  const holder: { weights?: ModelWeights } = { weights: randomWeights(qwen05(layers)) };
  notes.push(`${name}: random weights in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  await benchModel(name, holder, rows, notes);
  if (layers < 24)
    notes.push(
      `${name}: only ${layers} of 24 layers; the embedding / LM head (151936 × 896) is full size, so totals are not per-layer multiples`,
    );
  notes.push(
    'RSS is the whole process after the row: the TS reference row holds the float32 weights in JS; the ORT rows one decode session (prefill = decode from an empty cache), the JS copy dropped; train_step opens a second session after the decode one is released (freed memory is not always returned to the OS)',
  );
  return {
    title: 'decoder: prefill / decode / train_step tokens per second (CPU EP, default threads)',
    header: ['model', 'run', 'tokens/s', 'ms per call/token', 'RSS'],
    rows: rows.map((r) => [r.model, r.what, r.tokPerS.toFixed(1), r.msPer.toFixed(2), mib(r.rss)]),
    notes,
  };
}
