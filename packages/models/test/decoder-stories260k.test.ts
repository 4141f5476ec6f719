// The decoder graphs on the real stories260K model (llama2.c) in real onnxruntime-node sessions,
// against llama2.c's own run.c outputs (logits-once-upon-a-time.json, greedy.json in ../shared),
// and against themselves: prefill + decode vs one full-sequence forward, left-padded batches vs
// single rows, the generator's logprobs vs the logprobs graph, seeds, lora_scale = 0.
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { toOnnxModel, WeightsFileWriter, writeModel } from '@flowgrpo/graph';
import * as ort from 'onnxruntime-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sharedPath, skipWithoutShared } from '../../../test-utils/shared.js';
import {
  buildDecoderArtifacts,
  buildDecoderGraph,
  DecoderArtifacts,
  DecoderGenerator,
  initLoraParams,
  Llama2cTokenizer,
  type LoraConfig,
  loadLlama2cCheckpoint,
  type ModelWeights,
} from '../src/index.js';
import { writeBaseWeights } from '../src/models/graph/base-weights.js';
import {
  pastKeyName,
  pastValueName,
  presentKeyName,
  presentValueName,
} from '../src/models/graph/decoder-graph.js';

const int64 = (values: readonly number[], dims: number[]) =>
  new ort.Tensor(
    'int64',
    BigInt64Array.from(values, (v) => BigInt(v)),
    dims,
  );
const ones = (n: number) => Array.from({ length: n }, () => 1);
const iota = (n: number) => Array.from({ length: n }, (_, i) => i);

function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  expect(a.length).toBe(b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!));
  return m;
}

describe.skipIf(skipWithoutShared('stories260K decoder graphs'))(
  'stories260K through the ONNX graphs',
  () => {
    const modelDir = () => sharedPath('models', 'stories260K');
    let tmp: string;
    let weights: ModelWeights;
    let art: DecoderArtifacts;
    let artLora: DecoderArtifacts;
    let tok: Llama2cTokenizer;
    let fullForward: ort.InferenceSession;
    const lora: LoraConfig = { r: 4, alpha: 8, targetModules: ['q_proj', 'v_proj', 'down_proj'] };

    beforeAll(async () => {
      tmp = mkdtempSync(join(tmpdir(), 'flowgrpo-decoder-'));
      weights = await loadLlama2cCheckpoint(join(modelDir(), 'stories260K.bin'));
      tok = await Llama2cTokenizer.load(join(modelDir(), 'tok512.bin'), 512);
      buildDecoderArtifacts(weights, join(tmp, 'base'), {
        graphs: ['prefill', 'decode', 'logprobs'],
      });
      buildDecoderArtifacts(weights, join(tmp, 'lora'), { lora });
      art = await DecoderArtifacts.open(join(tmp, 'base'), { intraOpThreads: 1 });
      artLora = await DecoderArtifacts.open(join(tmp, 'lora'), { intraOpThreads: 1 });
      // A prefill variant with the logits of every position: the full-sequence forward.
      const dir = join(tmp, 'all');
      mkdirSync(dir);
      const writer = new WeightsFileWriter(join(dir, 'weights.data'));
      const base = writeBaseWeights(weights, writer);
      const g = buildDecoderGraph(base, { kind: 'prefill', logits: 'all' });
      writeModel(toOnnxModel(g.graph), { dir, fileName: 'full.onnx', weights: writer });
      writer.close();
      fullForward = await ort.InferenceSession.create(join(dir, 'full.onnx'), {
        intraOpNumThreads: 1,
      });
    });

    afterAll(async () => {
      await art?.release();
      await artLora?.release();
      await fullForward?.release();
      if (tmp) rmSync(tmp, { recursive: true, force: true });
    });

    const refLogits = () =>
      JSON.parse(readFileSync(join(modelDir(), 'logits-once-upon-a-time.json'), 'utf8')) as {
        prompt: string;
        tokens: number[];
        logits: number[][];
      };

    async function full(tokens: number[]): Promise<Float32Array> {
      const T = tokens.length;
      const out = await fullForward.run({
        input_ids: int64(tokens, [1, T]),
        attention_mask: int64(ones(T), [1, T]),
        position_ids: int64(iota(T), [1, T]),
      });
      return out.logits!.data as Float32Array;
    }

    it('full-sequence forward reproduces run.c teacher-forced logits (max abs error ≤ 1e-4)', async () => {
      const ref = refLogits();
      const logits = await full(ref.tokens);
      for (let p = 0; p < ref.tokens.length; p++) {
        expect(
          maxAbsDiff(logits.subarray(p * 512, (p + 1) * 512), ref.logits[p]!),
          `pos ${p}`,
        ).toBeLessThanOrEqual(1e-4);
      }
    });

    it('prefill of the first token then one decode step per token gives the same logits (run.c and full forward)', async () => {
      const ref = refLogits();
      const prefill = art.session('prefill');
      const decode = art.session('decode');
      const fullLogits = await full(ref.tokens);
      let r = await prefill.run({
        input_ids: int64([ref.tokens[0]!], [1, 1]),
        attention_mask: int64([1], [1, 1]),
        position_ids: int64([0], [1, 1]),
      });
      for (let p = 0; p < ref.tokens.length; p++) {
        const lg = r.outputs.logits!.data as Float32Array;
        expect(maxAbsDiff(lg, ref.logits[p]!), `run.c pos ${p}`).toBeLessThanOrEqual(1e-4);
        expect(
          maxAbsDiff(lg, fullLogits.subarray(p * 512, (p + 1) * 512)),
          `full pos ${p}`,
        ).toBeLessThanOrEqual(1e-5);
        if (p + 1 === ref.tokens.length) break;
        const feeds: Record<string, ort.Tensor> = {
          input_ids: int64([ref.tokens[p + 1]!], [1, 1]),
          attention_mask: int64(ones(p + 2), [1, p + 2]),
          position_ids: int64([p + 1], [1, 1]),
        };
        for (let l = 0; l < 5; l++) {
          feeds[pastKeyName(l)] = r.outputs[presentKeyName(l)]!;
          feeds[pastValueName(l)] = r.outputs[presentValueName(l)]!;
        }
        r = await decode.run(feeds);
      }
    });

    it('greedy generation reproduces run.c -t 0 token ids exactly, and its text', async () => {
      const entries = JSON.parse(readFileSync(join(modelDir(), 'greedy.json'), 'utf8')) as {
        prompt: string;
        steps: number;
        text: string;
        ids: number[];
      }[];
      const gen = new DecoderGenerator(art);
      for (const e of entries) {
        const prompt = Array.from(tok.encode(e.prompt, { addBos: true }));
        // run.c runs `steps` positions and stops when it samples BOS (id 1).
        const [out] = await gen.generate([prompt], {
          temperature: 0,
          maxNewTokens: e.steps - (prompt.length - 1),
          stopTokenIds: [1],
        });
        const generated = Array.from(out!.tokens);
        if (out!.stopTokenId !== undefined) generated.pop();
        expect([...prompt, ...generated]).toEqual(e.ids);
        expect(tok.decode([...prompt, ...generated])).toBe(e.text);
      }
    });

    const prompts = () => [
      Array.from(tok.encode('Once upon a time', { addBos: true })),
      Array.from(tok.encode('The cat', { addBos: true })),
      Array.from(tok.encode('Lily and Ben went to the big park to play', { addBos: true })),
    ];

    it('a left-padded batch gives the logits of each row run alone', async () => {
      const ps = prompts();
      const T = Math.max(...ps.map((p) => p.length));
      const ids: number[] = [];
      const mask: number[] = [];
      const pos: number[] = [];
      for (const p of ps) {
        const n = T - p.length;
        for (let j = 0; j < T; j++) {
          ids.push(j < n ? 0 : p[j - n]!);
          mask.push(j < n ? 0 : 1);
          pos.push(j < n ? 0 : j - n);
        }
      }
      const prefill = art.session('prefill');
      const batch = await prefill.run({
        input_ids: int64(ids, [3, T]),
        attention_mask: int64(mask, [3, T]),
        position_ids: int64(pos, [3, T]),
      });
      const bl = batch.outputs.logits!.data as Float32Array;
      for (const [i, p] of ps.entries()) {
        const single = await full(p);
        const last = single.subarray((p.length - 1) * 512, p.length * 512);
        // Float32 sums over a padded row run in another order than over the short row: ~1e-5.
        expect(
          maxAbsDiff(bl.subarray(i * 512, (i + 1) * 512), last),
          `row ${i}`,
        ).toBeLessThanOrEqual(1e-4);
      }
      // A generator over the decode graph alone (prefill from an empty cache) gives the same.
      const decodeOnly = await DecoderArtifacts.open(join(tmp, 'base'), {
        graphs: ['decode'],
        intraOpThreads: 1,
      });
      try {
        const a = await new DecoderGenerator(decodeOnly).generate(ps, {
          temperature: 0,
          maxNewTokens: 12,
        });
        const b = await new DecoderGenerator(art).generate(ps, {
          temperature: 0,
          maxNewTokens: 12,
        });
        expect(a.map((o) => Array.from(o.tokens))).toEqual(b.map((o) => Array.from(o.tokens)));
        for (const [i, o] of a.entries())
          expect(maxAbsDiff(o.logprobs, b[i]!.logprobs)).toBeLessThanOrEqual(1e-5);
      } finally {
        await decodeOnly.release();
      }
      // And through decode: greedy continuations of the batch equal those of each row alone.
      const gen = new DecoderGenerator(art);
      const together = await gen.generate(ps, { temperature: 0, maxNewTokens: 12 });
      for (const [i, p] of ps.entries()) {
        const [alone] = await gen.generate([p], { temperature: 0, maxNewTokens: 12 });
        expect(Array.from(together[i]!.tokens)).toEqual(Array.from(alone!.tokens));
        expect(maxAbsDiff(together[i]!.logprobs, alone!.logprobs)).toBeLessThanOrEqual(1e-4);
      }
    });

    async function graphLogprobs(
      a: DecoderArtifacts,
      rows: { prompt: number[]; tokens: number[] }[],
      temperature: number,
      extra: Record<string, ort.Tensor> = {},
    ): Promise<Float32Array> {
      // Left-pad prompt+tokens; the logprob of token k of a row is read at the position before it.
      const seqs = rows.map((r) => [...r.prompt, ...r.tokens]);
      const T = Math.max(...seqs.map((s) => s.length));
      const K = Math.max(...rows.map((r) => r.tokens.length));
      const ids: number[] = [];
      const mask: number[] = [];
      const pos: number[] = [];
      const tpos: number[] = [];
      const tids: number[] = [];
      for (const [i, s] of seqs.entries()) {
        const n = T - s.length;
        for (let j = 0; j < T; j++) {
          ids.push(j < n ? 0 : s[j - n]!);
          mask.push(j < n ? 0 : 1);
          pos.push(j < n ? 0 : j - n);
        }
        const r = rows[i]!;
        for (let k = 0; k < K; k++) {
          const ok = k < r.tokens.length;
          tpos.push(ok ? n + r.prompt.length - 1 + k : 0);
          tids.push(ok ? r.tokens[k]! : 0);
        }
      }
      const out = await a.session('logprobs').run({
        input_ids: int64(ids, [rows.length, T]),
        attention_mask: int64(mask, [rows.length, T]),
        position_ids: int64(pos, [rows.length, T]),
        target_positions: int64(tpos, [rows.length, K]),
        target_ids: int64(tids, [rows.length, K]),
        temperature: new ort.Tensor('float32', new Float32Array([temperature]), []),
        ...extra,
      });
      return out.outputs.logprobs!.data as Float32Array;
    }

    it('sampled tokens carry the logprobs the logprobs graph computes for them (T = 0.7, top-k, top-p)', async () => {
      const gen = new DecoderGenerator(art);
      const ps = prompts();
      const outs = await gen.generate(ps, {
        temperature: 0.7,
        topK: 40,
        topP: 0.9,
        maxNewTokens: 20,
        seed: 7,
      });
      const rows = outs.map((o, i) => ({ prompt: ps[i]!, tokens: Array.from(o.tokens) }));
      const K = Math.max(...rows.map((r) => r.tokens.length));
      const lp = await graphLogprobs(art, rows, 0.7);
      for (const [i, o] of outs.entries()) {
        expect(o.tokens.length).toBe(20);
        expect(
          maxAbsDiff(o.logprobs, lp.subarray(i * K, i * K + o.tokens.length)),
          `row ${i}`,
        ).toBeLessThanOrEqual(1e-4);
      }
      // Greedy reports logprobs at T = 1.
      const [g] = await gen.generate([ps[0]!], { temperature: 0, maxNewTokens: 10 });
      const lpg = await graphLogprobs(art, [{ prompt: ps[0]!, tokens: Array.from(g!.tokens) }], 1);
      expect(maxAbsDiff(g!.logprobs, lpg)).toBeLessThanOrEqual(1e-4);
    });

    it('the same seed gives the same tokens; another seed gives others', async () => {
      const gen = new DecoderGenerator(art);
      const ps = prompts();
      const a = await gen.generate(ps, { temperature: 1, maxNewTokens: 30, seed: 123 });
      const b = await gen.generate(ps, { temperature: 1, maxNewTokens: 30, seed: 123 });
      const c = await gen.generate(ps, { temperature: 1, maxNewTokens: 30, seed: 124 });
      expect(a.map((o) => Array.from(o.tokens))).toEqual(b.map((o) => Array.from(o.tokens)));
      expect(a.map((o) => Array.from(o.tokens))).not.toEqual(c.map((o) => Array.from(o.tokens)));
    });

    it('lora_scale = 0 is the base model from the same graph; scale 1 with B ≠ 0 is not', async () => {
      const params = initLoraParams(weights.config, lora, 'test');
      for (const [name, v] of params)
        if (name.includes('lora_B'))
          for (let i = 0; i < v.length; i++) v[i] = 0.05 * Math.sin(i + 1);
      const loraFeeds = (scale: number) => {
        const feeds: Record<string, ort.Tensor> = {
          lora_scale: new ort.Tensor('float32', new Float32Array([scale]), []),
        };
        for (const spec of artLora.session('logprobs').inputs)
          if (params.has(spec.name))
            feeds[spec.name] = new ort.Tensor(
              'float32',
              params.get(spec.name)!,
              spec.shape as number[],
            );
        return feeds;
      };
      const rows = [{ prompt: prompts()[0]!, tokens: prompts()[2]!.slice(1) }];
      const base = await graphLogprobs(art, rows, 1);
      const ref = await graphLogprobs(artLora, rows, 1, loraFeeds(0));
      const adapted = await graphLogprobs(artLora, rows, 1, loraFeeds(1));
      expect(maxAbsDiff(ref, base)).toBe(0);
      expect(maxAbsDiff(adapted, base)).toBeGreaterThan(1e-3);
      // The generator feeds the adapter too: greedy tokens with scale 0 are the base model's.
      const gen = new DecoderGenerator(artLora);
      gen.setLora(params);
      gen.loraScale = 0;
      const [g0] = await gen.generate([rows[0]!.prompt], { temperature: 0, maxNewTokens: 15 });
      const [gb] = await new DecoderGenerator(art).generate([rows[0]!.prompt], {
        temperature: 0,
        maxNewTokens: 15,
      });
      expect(Array.from(g0!.tokens)).toEqual(Array.from(gb!.tokens));
    });
  },
);
