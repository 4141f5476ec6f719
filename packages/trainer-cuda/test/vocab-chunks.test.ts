// The LM head in vocabulary chunks (@flowgrpo/models' vocab-chunks.ts: chunked log-probs and
// entropy, a hand-written backward that recomputes each chunk's logits) against the unchunked
// head. The same tiny models' train_step, logprobs and full-fine-tuning graphs are built with one
// chunk (the plain graphs: logits, one-hot pick, autodiff) and with several (an uneven last chunk
// included). Expected values are the unchunked graphs' own, in float64 through @flowgrpo/graph's
// evaluator: the chunked graphs are the same function (equal to 1e-10 there), and in float32 on
// ORT's CPU EP no farther from those exact values than 1e-6 relative or twice the unchunked
// graphs' own float32 error (the two sum in different orders; each is ~1e-7–1e-6 off). The memory
// bound is one [tokens × vocabulary] float tensor, N·V·4 bytes, which the chunked step must never
// hold.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError } from '@flowgrpo/core';
import { evaluate, type Graph, type HostTensor, tensor, WeightsFileWriter } from '@flowgrpo/graph';
import {
  buildDecoderGraph,
  createSession,
  type DecoderConfig,
  deviceAvailability,
  initTinyWeights,
  type LoraConfig,
  loraParamSpecs,
  type ModelWeights,
  ROPE_COS,
  ROPE_SIN,
  readArtifactsManifest,
  ropeTables,
  tinyQwen2Config,
  weightAsFloat32,
  writeBaseWeights,
} from '@flowgrpo/models';
import * as ort from 'onnxruntime-node';
import { afterAll, describe, expect, it } from 'vitest';
import { buildFullTrainingGraphs } from '../src/graphs/full-graphs.js';
import { buildTrainStepGraph } from '../src/graphs/train-step-graph.js';
import { buildTrainingArtifacts } from '../src/index.js';
import { measureTrainStepPeak } from './support/measure-train-step-peak.js';

const tmp = mkdtempSync(join(tmpdir(), 'flowgrpo-vocab-chunks-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const webgpu = await deviceAvailability('webgpu');
if (!webgpu.available) console.info(`[vocab chunks] WebGPU strict test skipped: ${webgpu.reason}`);

// 301 tokens in chunks of at most 100: 4 chunks of 76 columns, the last 73. Weights 10× the
// default init scale, so that the softmax is far from uniform.
const V = 301;
const CHUNK = 100;
const tied = tinyQwen2Config({
  seed: 0,
  vocabSize: V,
  hiddenSize: 16,
  layers: 2,
  heads: 4,
  kvHeads: 2,
  initializerRange: 0.2,
});
const untied: DecoderConfig = { ...tied, tieWordEmbeddings: false, numHiddenLayers: 1 };
const lora: LoraConfig = {
  r: 2,
  alpha: 4,
  targetModules: ['q_proj', 'v_proj', 'o_proj', 'down_proj'],
};
const B = 2;
const T = 6;

const f32 = (dims: number[], values: readonly number[]) => tensor('float32', dims, values);
/** A GRPO batch with every term of the objective on (clip, dual clip, k3 KL, an NLL term). */
function dataFeeds(config: DecoderConfig, withLora: boolean): Record<string, HostTensor> {
  const ids = Array.from({ length: B * T }, (_, i) => (i * 37 + 5) % V);
  const feeds: Record<string, HostTensor> = {
    input_ids: tensor('int64', [B, T], ids),
    attention_mask: tensor('int64', [B, T], [0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]),
    position_ids: tensor('int64', [B, T], [0, 0, 0, 1, 2, 3, 0, 1, 2, 0, 1, 2]),
    // The second row packs two examples of three tokens.
    segment_ids: tensor('int64', [B, T], [0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1]),
    target_positions: tensor('int64', [B, 3], [2, 3, 4, 0, 1, 4]),
    target_ids: tensor('int64', [B, 3], [ids[3]!, ids[4]!, V - 1, ids[1]!, 0, ids[11]!]),
    temperature: f32([], [0.7]),
    old_logprobs: f32([B, 3], [-5.1, -5.6, -5.3, -5.0, -6.2, -4.9]),
    on_policy: tensor('bool', [], [0]),
    ref_logprobs: f32([B, 3], [-5.4, -5.2, -5.5, -5.3, -5.9, -5.1]),
    advantages: f32([B, 3], [1.1, -0.6, 0.5, 0, -1.2, 0.8]),
    pg_weights: f32([B, 3], [0.2, 0.2, 0.2, 0, 0.2, 0.2]),
    // Two tokens from another sampler, one ratio above the cap (e^0.9 > 2, token_truncate).
    sampler_logprobs: f32([B, 3], [-6.0, -5.2, 0, 0, 0, 0]),
    is_weighted: tensor('bool', [B, 3], [1, 1, 0, 0, 0, 0]),
    is_cap: f32([], [2]),
    is_mask: tensor('bool', [], [0]),
    nll_weights: f32([B, 3], [0.1, 0, 0.1, 0, 0, 0.1]),
    stat_weights: f32([B, 3], [0.2, 0.2, 0.2, 0, 0.2, 0.2]),
    epsilon_low: f32([], [0.2]),
    epsilon_high: f32([], [0.28]),
    clip_ratio_c: f32([], [3]),
    beta: f32([], [0.04]),
    kl_coeffs: f32([3], [0, 0, 1]),
  };
  if (!withLora) return feeds;
  feeds.lora_scale = f32([], [1]);
  for (const s of loraParamSpecs(config, lora)) {
    const n = s.shape[0]! * s.shape[1]!;
    const values = Array.from({ length: n }, (_, i) => 0.3 * Math.sin(i * 1.7 + s.name.length));
    feeds[s.name] = f32([...s.shape], values);
    feeds[`acc.${s.name}`] = f32([...s.shape], new Array(n).fill(0));
  }
  return feeds;
}

/** A graph's feeds for the float64 evaluator: data, every weight, the RoPE tables, accumulators. */
function evaluatorFeeds(
  graph: Graph,
  weights: ModelWeights,
  maxPositions: number,
  data: Record<string, HostTensor>,
): Record<string, HostTensor> {
  const rope = ropeTables(weights.config, maxPositions);
  const half = weights.config.headDim / 2;
  const feeds: Record<string, HostTensor> = {
    [ROPE_COS]: f32([maxPositions, half], Array.from(rope.cos)),
    [ROPE_SIN]: f32([maxPositions, half], Array.from(rope.sin)),
  };
  for (const v of [...graph.inputs, ...graph.initializers]) {
    if (data[v.name]) feeds[v.name] = data[v.name]!;
    else if (weights.tensors.has(v.name))
      feeds[v.name] = f32(v.shape as number[], Array.from(weightAsFloat32(weights, v.name)));
    else if (v.name.startsWith('acc.'))
      feeds[v.name] = f32(
        v.shape as number[],
        new Array((v.shape as number[]).reduce((a, b) => a * b, 1)).fill(0),
      );
  }
  return feeds;
}

const toOrt = (t: HostTensor): ort.Tensor =>
  t.dtype === 'int64'
    ? new ort.Tensor(
        'int64',
        BigInt64Array.from(t.data, (v) => BigInt(v)),
        [...t.shape],
      )
    : t.dtype === 'bool'
      ? new ort.Tensor('bool', Uint8Array.from(t.data), [...t.shape])
      : new ort.Tensor('float32', Float32Array.from(t.data), [...t.shape]);

/** ‖got − want‖ / ‖want‖ (absolute when want is all zeros). */
function relative(got: ArrayLike<number>, want: ArrayLike<number>): number {
  let num = 0;
  let den = 0;
  for (let i = 0; i < want.length; i++) {
    num += (got[i]! - want[i]!) ** 2;
    den += want[i]! ** 2;
  }
  return den > 0 ? Math.sqrt(num / den) : Math.sqrt(num);
}

async function runOrt(
  file: string,
  feeds: Record<string, HostTensor>,
  device: 'cpu' | 'webgpu' = 'cpu',
) {
  const s = await createSession(file, { device, disableCpuFallback: device === 'webgpu' });
  const names = new Set(s.inputNames);
  const run = await s.run(
    Object.fromEntries(
      Object.entries(feeds)
        .filter(([k]) => names.has(k))
        .map(([k, v]) => [k, toOrt(v)]),
    ),
  );
  await s.release();
  return Object.fromEntries(
    Object.entries(run.outputs).map(([k, v]) => [k, v.data as Float32Array]),
  );
}

describe.each([
  ['tied head, 2 layers', tied],
  ['untied lm_head, 1 layer', untied],
])('the LM head in vocabulary chunks: %s', (label, config) => {
  const weights = initTinyWeights(config, 11);
  const dirOf = (chunk: number) => join(tmp, `${label.replace(/\W+/g, '-')}-${chunk}`);
  const writer = new WeightsFileWriter(join(tmp, `${label.length}-base.data`));
  const base = writeBaseWeights(weights, writer, { maxPositions: 16 });
  writer.close();
  /** The graph of `kind` with chunks of `chunk`, run in float64 by the evaluator. */
  const exactly = (
    kind: 'train_step' | 'logprobs',
    chunk: number,
    data: Record<string, HostTensor>,
  ) => {
    const g =
      kind === 'train_step'
        ? buildTrainStepGraph(base, lora, { vocabChunkSize: chunk }).graph
        : buildDecoderGraph(base, { kind, lora, vocabChunkSize: chunk }).graph;
    return evaluate(g, evaluatorFeeds(g, weights, 16, data));
  };
  for (const chunk of [V, CHUNK])
    buildTrainingArtifacts(weights, dirOf(chunk), {
      lora,
      graphs: ['logprobs', 'train_step'],
      maxPositions: 16,
      vocabChunkSize: chunk,
    });

  it('records the chunks in artifacts.json; the LoRA graphs hold no value with a vocabulary-wide dim', () => {
    expect(readArtifactsManifest(dirOf(V)).vocabChunks).toEqual({ count: 1, size: V });
    expect(readArtifactsManifest(dirOf(CHUNK)).vocabChunks).toEqual({ count: 4, size: 76 });
    const chunked = buildTrainStepGraph(base, lora, { vocabChunkSize: CHUNK }).graph;
    const plain = buildTrainStepGraph(base, lora, { vocabChunkSize: V }).graph;
    const wide = (g: Graph) =>
      g.nodes.flatMap((n) => n.outputs).filter((v) => v.shape?.includes(V));
    expect(wide(plain).length).toBeGreaterThan(0); // the plain graph's [B·K, V] logits and more
    expect(wide(chunked)).toEqual([]);
    // int64 only as Gather indices and Shape's output, as the WebGPU EP needs.
    for (const n of chunked.nodes) {
      if (n.outputs.some((o) => o.dtype === 'int64')) expect(n.op, n.name).toBe('Shape');
      expect(n.inputs[0]?.dtype, n.name).not.toBe('int64');
    }
  });

  it('float64: chunked and unchunked train_step and logprobs are the same function (1e-10)', () => {
    const data = dataFeeds(config, true);
    for (const kind of ['train_step', 'logprobs'] as const) {
      const [want, got] = [V, CHUNK].map((chunk) => exactly(kind, chunk, data));
      expect(Object.keys(got!).sort()).toEqual(Object.keys(want!).sort());
      for (const [name, t] of Object.entries(want!)) {
        expect(relative(got![name]!.data, t.data), `${kind} ${name}`).toBeLessThan(1e-10);
        if (name.startsWith('grad.'))
          expect(
            t.data.some((x) => Math.abs(x) > 1e-4),
            name,
          ).toBe(true);
      }
      if (kind === 'logprobs') continue;
      // Every objective term is on: the statistics the chunked head computes are not trivial.
      expect(want!.entropy_sum!.data[0]).toBeGreaterThan(1);
      expect(want!.kl_loss!.data[0]).toBeGreaterThan(0);
    }
  });

  it('float32 on the CPU EP: chunked as close to the float64 values as unchunked (loss, statistics, logprobs, LoRA gradients)', async () => {
    // Both heads round; the chunked one sums in another order. Its distance to the exact
    // (float64) values stays within 1e-6 relative, or within twice the unchunked head's own.
    const data = dataFeeds(config, true);
    for (const kind of ['train_step', 'logprobs'] as const) {
      const exact = exactly(kind, V, data);
      const plain = await runOrt(join(dirOf(V), `${kind}.onnx`), data);
      const chunked = await runOrt(join(dirOf(CHUNK), `${kind}.onnx`), data);
      for (const [name, p] of Object.entries(plain)) {
        const want = exact[name]!.data;
        const err = relative(chunked[name]!, want);
        const what = `${kind} ${name}: chunked ${err}, unchunked ${relative(p, want)}`;
        expect(err, what).toBeLessThan(Math.max(1e-6, 2 * relative(p, want)));
      }
    }
  });
});

describe('full fine-tuning graphs in vocabulary chunks', () => {
  it('give the unchunked gradient of every weight, the tied embedding included (float64: 1e-10; float32 on ORT: as close to it as unchunked)', async () => {
    const weights = initTinyWeights(tied, 5);
    const writer = new WeightsFileWriter(join(tmp, 'full-f64.data'));
    const base = writeBaseWeights(weights, writer, { maxPositions: 16 });
    writer.close();
    const data = dataFeeds(tied, false);
    const full = (chunk: number) =>
      buildTrainStepGraph(base, 'full', { vocabChunkSize: chunk }).graph;
    // Every weight is an input of these graphs: the same feeds serve both, and ORT.
    const feeds = evaluatorFeeds(full(V), weights, 16, data);
    const f64 = [V, CHUNK].map((chunk) => evaluate(full(chunk), feeds));
    const grads = Object.keys(f64[0]!).filter((k) => k.startsWith('grad.'));
    expect(grads).toContain('grad.model.embed_tokens.weight');
    for (const name of [...grads, 'loss'])
      expect(relative(f64[1]![name]!.data, f64[0]![name]!.data), name).toBeLessThan(1e-10);

    const files = [V, CHUNK].map(
      (chunk) =>
        buildFullTrainingGraphs(weights, join(tmp, `full-${chunk}`), {
          maxPositions: 16,
          vocabChunkSize: chunk,
        }).trainStep,
    );
    const [plain, chunked] = await Promise.all(files.map((f) => runOrt(f, feeds)));
    for (const name of [...grads, 'loss']) {
      const want = f64[0]![name]!.data;
      const err = relative(chunked![name]!, want);
      const what = `${name}: chunked ${err}, unchunked ${relative(plain![name]!, want)}`;
      expect(err, what).toBeLessThan(Math.max(1e-6, 2 * relative(plain![name]!, want)));
    }
  });
});

describe('bad chunk sizes', () => {
  it('a vocabChunkSize that is not a positive integer is a ConfigError and nothing is written', () => {
    for (const size of [0, 2.5, -3]) {
      const dir = join(tmp, `bad-${size}`);
      let err: unknown;
      try {
        buildTrainingArtifacts(initTinyWeights(tied, 1), dir, { lora, vocabChunkSize: size });
      } catch (e) {
        err = e;
      }
      expect(ConfigError.isInstance(err), String(err)).toBe(true);
      expect((err as ConfigError).key).toBe('vocabChunkSize');
      expect((err as ConfigError).hint).toMatch(/whole number of vocabulary columns/);
      expect(existsSync(dir)).toBe(false);
    }
  });
});

describe.skipIf(!webgpu.available)(
  `chunked graphs on WebGPU with CPU fallback disabled${webgpu.available ? '' : ` (skipped: ${webgpu.reason})`}`,
  () => {
    it('train_step and logprobs load strictly and give the CPU EP’s numbers (1e-4)', async () => {
      const dir = join(tmp, `webgpu-${CHUNK}`);
      buildTrainingArtifacts(initTinyWeights(tied, 11), dir, {
        lora,
        graphs: ['logprobs', 'train_step'],
        maxPositions: 16,
        vocabChunkSize: CHUNK,
      });
      const data = dataFeeds(tied, true);
      for (const graph of ['train_step', 'logprobs']) {
        const file = join(dir, `${graph}.onnx`);
        const want = await runOrt(file, data, 'cpu');
        const got = await runOrt(file, data, 'webgpu');
        for (const [name, w] of Object.entries(want)) {
          let worst = 0;
          for (let i = 0; i < w.length; i++)
            worst = Math.max(worst, Math.abs(got[name]![i]! - w[i]!));
          expect(worst, `${graph} ${name}`).toBeLessThan(1e-4);
        }
      }
    });
  },
);

describe('peak memory of a chunked train step', () => {
  it('stays below one [tokens × vocabulary] float tensor over what the session holds before the step', async () => {
    // 8 rows × 256 tokens (2,040 targets) over 65,536 tokens of vocabulary: one [N, V] float
    // tensor is 535 MB; the chunked step's tensors are [4,096 × N] (33 MB) and the rest of this
    // one-layer, 64-wide model is small. The unchunked step holds several [N, V] tensors.
    const config = tinyQwen2Config({
      seed: 0,
      vocabSize: 65536,
      hiddenSize: 64,
      layers: 1,
      heads: 4,
      kvHeads: 2,
      maxPositionEmbeddings: 256,
    });
    const dir = join(tmp, 'peak');
    buildTrainingArtifacts(initTinyWeights(config, 2), dir, {
      lora,
      graphs: ['train_step'],
      maxPositions: 256,
      vocabChunkSize: 4096,
    });
    const { beforeMiB, peakMiB, targets, loss } = await measureTrainStepPeak(
      join(dir, 'train_step.onnx'),
      8,
      256,
      config.vocabSize,
    );
    expect(targets).toBe(8 * 255);
    expect(Number.isFinite(loss)).toBe(true);
    const oneTensorMiB = (targets * config.vocabSize * 4) / 2 ** 20;
    expect(peakMiB - beforeMiB).toBeLessThan(oneTensorMiB);
  }, 300_000);
});
