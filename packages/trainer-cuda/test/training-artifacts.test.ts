// The artifacts directory of a training run (buildTrainingArtifacts: @flowgrpo/models' inference
// graphs plus the trainer's train_step): four standard graphs and the fused `generate` graph over ONE
// weights.data (each base tensor stored once, every graph pointing at the same offsets), standard
// ai.onnx ops only in the four (no LogSoftmax, no Sum, no com.microsoft; `generate` is the
// inference-only exception, tested in generation-fused.test.ts), no [B, T, V] logits in the
// logprobs/train graphs, artifacts.json describing
// what was written, and a loader that opens sessions on the named device. Expected values come
// from the files themselves (decoded ModelProtos, file sizes) and from the tiny model's config.
import { mkdtempSync, readFileSync, rmSync, statSync, truncateSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { decodeModel, WeightsFileWriter } from '@flowgrpo/graph';
import {
  ALL_GRAPHS,
  buildArtifactGraph,
  DEFAULT_GRAPHS,
  DecoderArtifacts,
  expectedTensorShapes,
  initTinyWeights,
  type LoraConfig,
  readArtifactsManifest,
  tinyQwen2Config,
  writeBaseWeights,
} from '@flowgrpo/models';
import * as ort from 'onnxruntime-node';
import { afterAll, describe, expect, it } from 'vitest';
import { TRAINING_GRAPH_BUILDERS } from '../src/graphs/training-artifacts.js';
import { buildTrainingArtifacts } from '../src/index.js';

const tmp = mkdtempSync(join(tmpdir(), 'flowgrpo-artifacts-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const config = tinyQwen2Config({ seed: 0, hiddenSize: 32, layers: 2, heads: 4, kvHeads: 2 });
const weights = initTinyWeights(config, 9);
const lora: LoraConfig = {
  r: 2,
  alpha: 4,
  targetModules: ['q_proj', 'k_proj', 'v_proj', 'o_proj'],
};
const int64 = (values: readonly number[], dims: number[]) =>
  new ort.Tensor(
    'int64',
    BigInt64Array.from(values, (v) => BigInt(v)),
    dims,
  );

describe('decoder artifacts directory', () => {
  const dir = join(tmp, 'art');
  const manifest = buildTrainingArtifacts(weights, dir, { lora, maxPositions: 64 });

  it('writes the graphs, weights.data and artifacts.json', () => {
    for (const f of [
      'generate.onnx',
      'prefill.onnx',
      'decode.onnx',
      'logprobs.onnx',
      'train_step.onnx',
      'weights.data',
      'artifacts.json',
    ])
      expect(statSync(join(dir, f)).size, f).toBeGreaterThan(0);
    const m = readArtifactsManifest(dir);
    expect(m.config).toEqual(config);
    expect(m.lora).toEqual({ ...lora, scaling: 2 });
    expect(m.maxPositions).toBe(64);
    // In DEFAULT_GRAPHS' order: the manifest models writes is the one written before the split.
    expect(Object.keys(m.graphs)).toEqual([...DEFAULT_GRAPHS]);
    expect(m.graphs.decode!.inputs.map((i) => i.name)).toContain('past_key_values.1.value');
    expect(m.graphs.decode!.outputs.map((i) => i.name)).toEqual([
      'logits',
      'present.0.key',
      'present.0.value',
      'present.1.key',
      'present.1.value',
    ]);
    expect(m.graphs.train_step!.outputs.map((o) => o.name)).toContain(
      'grad.base_model.model.model.layers.1.self_attn.o_proj.lora_B.weight',
    );
    expect(m.weights.bytes).toBe(statSync(join(dir, 'weights.data')).size);
    expect(m).toEqual({ ...manifest });
  });

  it('every base tensor is stored once and all graphs point at the same bytes', () => {
    let floats = 0;
    for (const shape of expectedTensorShapes(config).values())
      floats += shape.reduce((a, b) => a * b, 1);
    floats += 2 * 64 * (config.headDim / 2); // RoPE cos/sin tables
    // The vocabulary arange 0 … V−1 of pickLogprobs: a [V] CumSum that the builder folds into a
    // constant at this size (V ≤ its 4,096-element fold limit; a larger vocabulary within one
    // chunk keeps it as a node, and one wider than a chunk (vocab-chunks.ts) has none: it gathers
    // the targets' head rows instead of comparing against the arange).
    expect(config.vocabSize).toBeLessThanOrEqual(4096);
    floats += config.vocabSize;
    const size = statSync(join(dir, 'weights.data')).size;
    // Stored once: the file holds the floats plus < 64 bytes of alignment per tensor.
    expect(size).toBeGreaterThanOrEqual(floats * 4);
    expect(size).toBeLessThan(floats * 4 + 64 * (expectedTensorShapes(config).size + 2));
    const where = new Map<string, string>();
    for (const kind of ALL_GRAPHS) {
      const model = decodeModel(readFileSync(join(dir, `${kind}.onnx`)));
      const names = new Set<string>();
      for (const t of model.graph.initializers) {
        if (!t.external) continue;
        expect(t.external.location).toBe('weights.data');
        names.add(t.name);
        const at = `${t.external.offset}:${t.external.length}`;
        if (where.has(t.name)) expect(at, `${kind} ${t.name}`).toBe(where.get(t.name));
        else where.set(t.name, at);
      }
      // Every base tensor a forward needs is external (the LM head is the tied embedding).
      for (const name of expectedTensorShapes(config).keys())
        expect(names.has(name), `${kind} ${name}`).toBe(true);
      // Standard ops only, none that fall back to the CPU on WebGPU.
      for (const n of model.graph.nodes) {
        expect(n.domain ?? '', `${kind} ${n.opType}`).toBe('');
        expect(['LogSoftmax', 'Sum', 'OneHot'], `${kind}`).not.toContain(n.opType);
      }
      expect(model.opsetImports.map((o) => o.domain)).toEqual(['']);
    }
  });

  it('logprobs and train_step never form a [B, T, vocab] tensor: the LM head runs on gathered rows', () => {
    const writer = new WeightsFileWriter(join(tmp, 'w.data'));
    const base = writeBaseWeights(weights, writer, { maxPositions: 64 });
    writer.close();
    for (const kind of ['logprobs', 'train_step'] as const) {
      const g = buildArtifactGraph(base, kind, lora, TRAINING_GRAPH_BUILDERS);
      const withVocab = g.graph.nodes
        .flatMap((n) => n.outputs)
        .filter((v) => v.shape?.includes(config.vocabSize));
      expect(withVocab.length).toBeGreaterThan(0);
      for (const v of withVocab)
        expect(v.shape!.length, `${kind} ${v.name}`).toBeLessThanOrEqual(2);
      const head = g.graph.nodes.filter(
        (n) => n.op === 'Gemm' && n.outputs[0]!.shape?.[1] === config.vocabSize,
      );
      expect(head).toHaveLength(1);
    }
  });

  it('opens sessions on the CPU by default; the logprobs graph reads only the requested positions', async () => {
    const art = await DecoderArtifacts.open(dir, {
      graphs: ['prefill', 'logprobs'],
      intraOpThreads: 1,
    });
    try {
      expect(art.session('logprobs').device).toBe('cpu');
      expect(() => art.session('decode')).toThrow(/not opened/);
      // Last-position logits of prefill vs the logprobs graph asked for one position only.
      const T = 40;
      const ids = Array.from({ length: T }, (_, i) => (i * 37 + 5) % config.vocabSize);
      const feeds = {
        input_ids: int64(ids, [1, T]),
        attention_mask: int64(
          ids.map(() => 1),
          [1, T],
        ),
        position_ids: int64(
          ids.map((_, i) => i),
          [1, T],
        ),
      };
      const zeros = (n: number) => new Float32Array(n);
      const loraFeeds: Record<string, ort.Tensor> = {
        lora_scale: new ort.Tensor('float32', zeros(1), []),
      };
      for (const s of art.session('logprobs').inputs)
        if (s.name.includes('.lora_')) {
          const d = s.shape as number[];
          loraFeeds[s.name] = new ort.Tensor('float32', zeros(d[0]! * d[1]!), d);
        }
      const pre = await art.session('prefill').run({ ...feeds, ...loraFeeds });
      const logits = pre.outputs.logits!.data as Float32Array;
      let max = -Infinity;
      for (const x of logits) max = Math.max(max, x);
      const lse = max + Math.log(logits.reduce((s, x) => s + Math.exp(x - max), 0));
      const out = await art.session('logprobs').run({
        ...feeds,
        ...loraFeeds,
        target_positions: int64([T - 1, T - 1], [1, 2]),
        target_ids: int64([3, 200], [1, 2]),
        temperature: new ort.Tensor('float32', new Float32Array([1]), []),
      });
      const lp = out.outputs.logprobs!;
      expect(lp.dims).toEqual([1, 2]);
      expect((lp.data as Float32Array)[0]).toBeCloseTo(logits[3]! - lse, 4);
      expect((lp.data as Float32Array)[1]).toBeCloseTo(logits[200]! - lse, 4);
    } finally {
      await art.release();
    }
  });

  it('a weights.data of the wrong size is refused with the file named', () => {
    const bad = join(tmp, 'bad');
    buildTrainingArtifacts(weights, bad, { graphs: ['prefill'], maxPositions: 8 });
    truncateSync(join(bad, 'weights.data'), 100);
    expect(() => readArtifactsManifest(bad)).toThrow(/weights\.data has 100 bytes/);
  });
});
