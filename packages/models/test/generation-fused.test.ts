// The fused `generate` graph (com.microsoft ops, the decode loop inside the graph) and the
// continuous batcher over it. What must hold, and where each expected value comes from:
// - token-exactness: the logprob returned for every sampled token equals what the standard
//   `logprobs` graph (the training graph's forward) computes for the same tokens, to 1e-4;
// - the same tokens as the standard prefill/decode path with host sampling (sampling.ts) for the
//   same seeds — greedy, temperature, top-p (sampled on the host from the fused graph's logits),
//   stop tokens, stop strings — and logprobs within 1e-4 of it;
// - a request's tokens do not depend on its batch-mates or on when it joined the batch: requests
//   joining a running batch (continuous batching) get what they get alone;
// - the split-cache and concat decode loops, and a Qwen3-like config (q/k norm, biases, untied
//   head, MHA), agree with the standard path.
// Speed is measured in `pnpm bench`, never here.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRng } from '@flowgrpo/core';
import * as ort from 'onnxruntime-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BatcherPool } from '../src/generation/batcher-pool.js';
import { TokenOutOfVocabularyError } from '../src/generation/errors.js';
import { type BatchRow, FusedBatcher, type RowResult } from '../src/generation/fused-batcher.js';
import {
  type GenerateRunner,
  localRunner,
  workerRunner,
} from '../src/generation/generate-runner.js';
import {
  buildDecoderArtifacts,
  createTinyQwen2,
  DecoderArtifacts,
  type DecoderConfig,
  DecoderGenerator,
  type GenerationOutput,
  initLoraParams,
  LocalPolicyEngine,
  type LoraConfig,
  type LoraParams,
  type TinyModel,
  tinyQwen2Config,
} from '../src/index.js';
import { initTinyWeights } from '../src/models/tiny-factory.js';
import { SessionWorkerError } from '../src/runtime/errors.js';
import { SessionWorker } from '../src/runtime/session-worker.js';
import { qwen3StyleConfig } from '../src/testing/index.js';

const int64 = (values: readonly number[], dims: number[]) =>
  new ort.Tensor(
    'int64',
    BigInt64Array.from(values, (v) => BigInt(v)),
    dims,
  );

/** The logprobs graph over prompt + action of one row, at temperature t (the training forward). */
async function graphLogprobs(
  art: DecoderArtifacts,
  prompt: ArrayLike<number>,
  action: ArrayLike<number>,
  t: number,
  params?: LoraParams,
): Promise<Float32Array> {
  const seq = [...Array.from(prompt), ...Array.from(action)];
  const K = action.length;
  const feeds: Record<string, ort.Tensor> = {
    input_ids: int64(seq, [1, seq.length]),
    attention_mask: int64(
      seq.map(() => 1),
      [1, seq.length],
    ),
    position_ids: int64(
      seq.map((_, i) => i),
      [1, seq.length],
    ),
    target_positions: int64(
      Array.from({ length: K }, (_, k) => prompt.length - 1 + k),
      [1, K],
    ),
    target_ids: int64(Array.from(action), [1, K]),
    temperature: new ort.Tensor('float32', new Float32Array([t]), []),
  };
  const session = art.session('logprobs');
  for (const s of session.inputs) {
    if (s.name === 'lora_scale')
      feeds[s.name] = new ort.Tensor('float32', new Float32Array([params ? 1 : 0]), []);
    else if (s.name.includes('.lora_')) {
      const dims = s.shape as number[];
      feeds[s.name] = new ort.Tensor(
        'float32',
        params?.get(s.name) ?? new Float32Array(dims[0]! * dims[1]!),
        dims,
      );
    }
  }
  return (await session.run(feeds)).outputs.logprobs!.data as Float32Array;
}

function expectSameSamples(a: GenerationOutput[], b: GenerationOutput[], what: string) {
  expect(b.length, what).toBe(a.length);
  a.forEach((x, i) => {
    const y = b[i]!;
    expect(Array.from(y.tokens), `${what} row ${i}`).toEqual(Array.from(x.tokens));
    expect(y.finishReason, `${what} row ${i}`).toBe(x.finishReason);
    expect(y.stopTokenId, `${what} row ${i}`).toBe(x.stopTokenId);
    expect(y.stopString, `${what} row ${i}`).toBe(x.stopString);
    expect(y.text, `${what} row ${i}`).toBe(x.text);
    for (let j = 0; j < x.logprobs.length; j++)
      expect(Math.abs(y.logprobs[j]! - x.logprobs[j]!), `${what} row ${i} token ${j}`).toBeLessThan(
        1e-4,
      );
  });
}

/** A greedy row for the batcher and pool tests: its own seeded stream, no stop, no decode. */
function greedyRow(
  prompt: number[],
  i: number,
  maxNewTokens: number,
  done: BatchRow['done'],
  fail: BatchRow['fail'],
  lora: BatchRow['lora'] = { version: 0, feeds: {} },
): BatchRow {
  return {
    prompt,
    maxNewTokens,
    temperature: 0,
    stopIds: new Set(),
    stopStrings: [],
    rng: createRng(i),
    decode: undefined,
    lora,
    done,
    fail,
  };
}

describe('fused generate graph on a tiny Qwen2 with LoRA', () => {
  const tmp = mkdtempSync(join(tmpdir(), 'flowgrpo-fused-'));
  // LoRA on a packed group member (q, v) and on the MLP (up), as the GRPO demo trains it.
  const lora: LoraConfig = { r: 4, alpha: 8, targetModules: ['q_proj', 'v_proj', 'up_proj'] };
  let tiny: TinyModel;
  let art: DecoderArtifacts;
  let fused: DecoderGenerator;
  let standard: DecoderGenerator;
  let params: LoraParams;
  const decode = (ids: ArrayLike<number>) => tiny.tokenizer.decode(ids);

  beforeAll(async () => {
    // GQA 4:2, head_dim 8 (RoPE via the rotate-half rows; GroupQueryAttention's rotary needs 16).
    tiny = await createTinyQwen2(join(tmp, 'model'), {
      seed: 2,
      hiddenSize: 32,
      layers: 2,
      heads: 4,
      kvHeads: 2,
      embeddingInitRange: 0.2,
    });
    buildDecoderArtifacts(tiny.weights, join(tmp, 'art'), {
      lora,
      graphs: ['decode', 'logprobs', 'generate'],
    });
    art = await DecoderArtifacts.open(join(tmp, 'art'), { intraOpThreads: 1 });
    // Small chunks, so rows leave and join between several runs of one generation.
    fused = new DecoderGenerator(art, { chunkTokens: 3 });
    standard = new DecoderGenerator(art, { useGenerateGraph: false });
    expect(await fused.usesFusedGraph()).toBe(true);
    expect(await standard.usesFusedGraph()).toBe(false);
    // A non-zero adapter (PEFT's init has B = 0): the LoRA path takes part in every token.
    params = initLoraParams(tiny.weights.config, lora, 1);
    for (const [k, v] of params)
      if (k.includes('lora_B'))
        for (let i = 0; i < v.length; i++) v[i] = 0.3 * Math.sin(3 * i + k.length);
    fused.setLora(params);
    standard.setLora(params);
  });
  afterAll(async () => {
    await art?.release();
    rmSync(tmp, { recursive: true, force: true });
  });

  const prompts = () =>
    ['The answer is', 'count: 1 2 3', 'hi', 'a much longer prompt than the others, with words'].map(
      (p) => Array.from(tiny.tokenizer.encode(p)),
    );

  it('sampled logprobs equal the logprobs graph’s for the same tokens (greedy, T = 0.7)', async () => {
    for (const temperature of [0, 0.7]) {
      const out = await fused.generate(prompts(), { maxNewTokens: 12, temperature, seed: 3 });
      for (const [i, r] of out.entries()) {
        expect(r.tokens.length).toBe(12);
        const want = await graphLogprobs(art, prompts()[i]!, r.tokens, temperature || 1, params);
        for (let j = 0; j < want.length; j++)
          expect(Math.abs(r.logprobs[j]! - want[j]!), `T=${temperature} row ${i}`).toBeLessThan(
            1e-4,
          );
      }
    }
  });

  it('gives the standard path’s tokens: greedy, temperature, top-p, stop token, stop string', async () => {
    const options = [
      { temperature: 0 },
      { temperature: 1, seed: 5 },
      { temperature: 0.8, topP: 0.9, seed: 6 },
      { temperature: 1, topK: 5, seed: 7 },
    ];
    for (const o of options) {
      const a = await standard.generate(prompts(), { ...o, maxNewTokens: 10, decode });
      const b = await fused.generate(prompts(), { ...o, maxNewTokens: 10, decode });
      expectSameSamples(a, b, JSON.stringify(o));
    }
    // Stops taken from the unstopped samples, so they are certain to occur.
    const base = await standard.generate(prompts(), {
      temperature: 1,
      seed: 8,
      maxNewTokens: 10,
      decode,
    });
    const stopTokenIds = [base[0]!.tokens[4]!, base[1]!.tokens[2]!];
    const stopStrings = [decode(base[3]!.tokens.subarray(3, 5))].filter((x) => x.length > 0);
    const stopped = {
      temperature: 1,
      seed: 8,
      maxNewTokens: 10,
      decode,
      stopTokenIds,
      stopStrings,
    };
    const a = await standard.generate(prompts(), stopped);
    const b = await fused.generate(prompts(), stopped);
    expect(a.some((r) => r.finishReason === 'stop')).toBe(true);
    expectSameSamples(a, b, 'stops');
  });

  it('a request gets the same tokens alone, in a batch, and when it joins a running batch', async () => {
    const requests = prompts().map((prompt, i) => ({
      prompt,
      maxNewTokens: 6 + 3 * i,
      temperature: i === 1 ? 0 : 0.9,
      seed: 100 + i,
    }));
    const alone: GenerationOutput[] = [];
    for (const r of requests) alone.push((await fused.generateEach([r], { decode }))[0]!);
    const together = await fused.generateEach(requests, { decode });
    expectSameSamples(alone, together, 'batched');
    // Staggered: the first two start a batch, the others arrive while it runs (they join
    // between chunks), and one more arrives after the first finished.
    const late = (ms: number, r: (typeof requests)[number]) =>
      new Promise<GenerationOutput>((resolve, reject) => {
        setTimeout(() => {
          fused.generateEach([r], { decode }).then((o) => resolve(o[0]!), reject);
        }, ms);
      });
    const staggered = await Promise.all([
      fused.generateEach([requests[0]!], { decode }).then((o) => o[0]!),
      fused.generateEach([requests[1]!], { decode }).then((o) => o[0]!),
      late(1, requests[2]!),
      late(5, requests[3]!),
    ]);
    expectSameSamples(alone, staggered, 'staggered');
    // Deterministic joins: two rows at a time, so the third and fourth requests wait and join
    // the running batch when rows finish (the rows ask for different lengths).
    const narrow = new DecoderGenerator(art, { chunkTokens: 2, maxBatchSize: 2 });
    narrow.setLora(params);
    const joined = await narrow.generateEach(requests, { decode });
    expectSameSamples(alone, joined, 'joined');
    const stats = (await narrow.batchStats())!;
    expect(stats.admitted).toBe(4);
    expect(stats.joins).toBeGreaterThanOrEqual(1);
  });

  it('worker batchers give the tokens this thread gives, with the adapter, and close', async () => {
    // 12 requests (three seeds per prompt): from 3 rows in flight the pool opens two workers,
    // each with a continuous batch of its own; where a row runs must not change its samples.
    const requests = [0, 1, 2].flatMap((k) =>
      prompts().map((prompt, i) => ({
        prompt,
        maxNewTokens: 5 + 2 * i + k,
        temperature: k === 0 ? 0 : 0.9,
        seed: 200 + 10 * k + i,
      })),
    );
    const here = await fused.generateEach(requests, { decode });
    const workers = new DecoderGenerator(art, {
      chunkTokens: 3,
      generateWorkers: 2,
      workersFrom: 3,
    });
    try {
      workers.setLora(params);
      expect((await workers.batchWorkers()).open).toBe(0);
      // Taken before any row runs: the counters are a live view (as a single batcher's are).
      const stats = (await workers.batchStats())!;
      expect(stats.admitted).toBe(0);
      const there = await workers.generateEach(requests, { decode });
      expect(await workers.batchWorkers()).toEqual({ open: 2 });
      expectSameSamples(here, there, 'workers');
      expect(stats.admitted).toBe(requests.length);
      expect(stats.rowSteps).toBeGreaterThan(0);
      // A new adapter reaches the workers: the base model's samples, as this thread gives them.
      fused.setLora(undefined);
      workers.setLora(undefined);
      expectSameSamples(
        await fused.generateEach(requests, { decode }),
        await workers.generateEach(requests, { decode }),
        'workers, base model',
      );
    } finally {
      fused.setLora(params);
      await workers.release();
    }
    expect((await workers.batchWorkers()).open).toBe(0);
    // Released artifacts end the workers of the generators over them, released or not.
    const dir = join(tmp, 'own');
    buildDecoderArtifacts(tiny.weights, dir, { graphs: ['generate'] });
    const own = await DecoderArtifacts.open(dir, { intraOpThreads: 1 });
    const gen = new DecoderGenerator(own, { generateWorkers: 2, workersFrom: 2 });
    await gen.generate(prompts(), { maxNewTokens: 3, temperature: 0 });
    expect((await gen.batchWorkers()).open).toBe(2);
    await own.release();
    expect((await gen.batchWorkers()).open).toBe(0);
  });

  it('a worker batcher that ends fails its own rows only; later rows go to the rest, then here', async () => {
    // The pool over real worker threads, as DecoderGenerator builds it, with the workers in reach
    // of the test: ending one while its rows run stands for a worker thread that dies. Expected
    // tokens: greedy generation on this thread, without workers.
    const dir = join(tmp, 'lost');
    buildDecoderArtifacts(tiny.weights, dir, { graphs: ['generate'] });
    const own = await DecoderArtifacts.open(dir, { intraOpThreads: 1 });
    const warnings: Error[] = [];
    const onWarning = (w: Error) => warnings.push(w);
    process.on('warning', onWarning);
    const threads: SessionWorker[] = [];
    const batcher = (runner: GenerateRunner) =>
      new FusedBatcher({
        runner,
        config: own.manifest.config,
        maxPositions: own.manifest.maxPositions,
        chunkTokens: 2,
      });
    // Two worker batchers from the first row on; the threads they open go to `threads`.
    const workerPool = async (threads: SessionWorker[]) =>
      new BatcherPool(batcher(localRunner(await own.openSession('generate'))), {
        count: 2,
        from: 1,
        open: async () => {
          const w = new SessionWorker();
          threads.push(w);
          const file = join(dir, own.manifest.graphs.generate!.file);
          const ws = await w.load(file, { device: 'cpu', intraOpThreads: 1 });
          return { batcher: batcher(workerRunner(ws)), close: () => w.terminate(), ended: w.ended };
        },
      });
    const pool = await workerPool(threads);
    try {
      const want = await new DecoderGenerator(own, { generateWorkers: 0 }).generate(prompts(), {
        maxNewTokens: 8,
        temperature: 0,
      });
      const expected = want.map((o) => Array.from(o.tokens));
      const submit = () =>
        Promise.allSettled(
          prompts().map(
            (prompt, i) =>
              new Promise<RowResult>((done, fail) =>
                pool.submit([greedyRow(prompt, i, 8, done, fail)]),
              ),
          ),
        );
      const tokensOf = (r: PromiseSettledResult<RowResult>[]) =>
        r.map((x) => (x.status === 'fulfilled' ? x.value.tokens : x.reason));

      expect(tokensOf(await submit())).toEqual(expected);
      expect(pool.workerCount).toBe(2);

      // Worker 0 ends while its rows run: those rows fail with the worker's error, worker 1's
      // rows finish with the right tokens.
      const pending = submit();
      void threads[0]!.terminate();
      const mixed = await pending;
      const failed = mixed.flatMap((x) => (x.status === 'rejected' ? [x.reason] : []));
      expect(failed.length).toBeGreaterThanOrEqual(1);
      for (const e of failed) expect(e).toBeInstanceOf(SessionWorkerError);
      mixed.forEach((x, i) => {
        if (x.status === 'fulfilled') expect(x.value.tokens).toEqual(expected[i]);
      });
      await threads[0]!.ended;
      await new Promise((r) => setImmediate(r));
      expect(pool.workerCount).toBe(1);
      expect(tokensOf(await submit())).toEqual(expected);

      // The last worker ends: the rows run on this thread.
      await threads[1]!.terminate();
      await new Promise((r) => setImmediate(r));
      expect(pool.workerCount).toBe(0);
      expect(pool.openError).toBeInstanceOf(SessionWorkerError);
      expect(tokensOf(await submit())).toEqual(expected);
      expect(
        warnings.filter((w) => (w as { code?: string }).code === 'FLOWGRPO_GENERATE_WORKERS'),
      ).toHaveLength(2);

      // A pool closed while its workers open runs the rows it held here, not in workers that
      // are ending.
      const closing = await workerPool([]);
      const held = prompts().map(
        (prompt, i) =>
          new Promise<number[]>((done, fail) =>
            closing.submit([greedyRow(prompt, i, 8, (r) => done(r.tokens), fail)]),
          ),
      );
      await closing.close();
      expect(await Promise.all(held)).toEqual(expected);
    } finally {
      process.off('warning', onWarning);
      await pool.close();
      await own.release();
    }
  });

  it("the pool's counters are a live view that never goes back when a worker batcher leaves", async () => {
    // Two "worker" batchers on this thread whose end the test controls; every row is admitted
    // once, so `admitted` counts the rows submitted (by hand: 2 × prompts).
    const dir = join(tmp, 'stats');
    buildDecoderArtifacts(tiny.weights, dir, { graphs: ['generate'] });
    const own = await DecoderArtifacts.open(dir, { intraOpThreads: 1 });
    const batcher = async () =>
      new FusedBatcher({
        runner: localRunner(await own.openSession('generate')),
        config: own.manifest.config,
        maxPositions: own.manifest.maxPositions,
        chunkTokens: 2,
      });
    const ends: ((reason: unknown) => void)[] = [];
    const pool = new BatcherPool(await batcher(), {
      count: 2,
      from: 1,
      open: async () => ({
        batcher: await batcher(),
        close: async () => {},
        ended: new Promise((resolve) => ends.push(resolve)),
      }),
    });
    const onWarning = () => {};
    process.on('warning', onWarning);
    try {
      const stats = pool.stats;
      const run = () =>
        Promise.all(
          prompts().map(
            (prompt, i) =>
              new Promise((done, fail) => pool.submit([greedyRow(prompt, i, 4, done, fail)])),
          ),
        );
      await run();
      expect(pool.workerCount).toBe(2);
      expect(stats.admitted).toBe(prompts().length);
      ends[0]!(new Error('gone'));
      await new Promise((r) => setImmediate(r));
      expect(pool.workerCount).toBe(1);
      expect(stats.admitted).toBe(prompts().length);
      await run();
      expect(stats.admitted).toBe(2 * prompts().length);
      await pool.close();
      expect(stats.admitted).toBe(2 * prompts().length);
    } finally {
      process.off('warning', onWarning);
      await own.release();
    }
  });

  it('stays on this thread, with a warning, when a worker batcher cannot open', async () => {
    // The generate graph is loaded here, then its file disappears: the workers cannot load it.
    const dir = join(tmp, 'gone');
    buildDecoderArtifacts(tiny.weights, dir, { lora, graphs: ['generate'] });
    const own = await DecoderArtifacts.open(dir, { intraOpThreads: 1 });
    const warnings: Error[] = [];
    const onWarning = (w: Error) => warnings.push(w);
    process.on('warning', onWarning);
    try {
      const gen = new DecoderGenerator(own, { generateWorkers: 2, workersFrom: 2 });
      gen.setLora(params);
      expect(await gen.usesFusedGraph()).toBe(true);
      rmSync(join(dir, own.manifest.graphs.generate!.file));
      const out = await gen.generate(prompts(), { maxNewTokens: 6, temperature: 0.9, seed: 4 });
      const want = await fused.generate(prompts(), { maxNewTokens: 6, temperature: 0.9, seed: 4 });
      expectSameSamples(want, out, 'fallback');
      const status = await gen.batchWorkers();
      expect(status.open).toBe(0);
      expect(String(status.openError)).toMatch(/generate/);
      await new Promise((r) => setImmediate(r));
      expect(
        warnings.some((w) =>
          /FLOWGRPO_GENERATE_WORKERS/.test(String((w as { code?: string }).code)),
        ),
      ).toBe(true);
      await gen.release();
    } finally {
      process.off('warning', onWarning);
      await own.release();
    }
  });

  it('LocalPolicyEngine over the fused graph: the engine test’s contract holds', async () => {
    const engine = new LocalPolicyEngine({
      generator: fused,
      tokenizer: tiny.tokenizer,
      model: 'tiny',
      maxBatchSize: 3,
    });
    const req = { prompt: 'count: 1 2 3', maxTokens: 14, temperature: 0.8, seed: 4 };
    const rs = await Promise.all([0, 1, 2, 3, 4].map((i) => engine.generate({ ...req, seed: i })));
    for (const [i, r] of rs.entries()) {
      const lp = await graphLogprobs(art, r.promptTokens, r.actionTokens, 0.8, params);
      for (let j = 0; j < lp.length; j++)
        expect(Math.abs(lp[j]! - r.actionLogprobs[j]!), `request ${i}`).toBeLessThan(1e-4);
      const solo = await standard.generate([r.promptTokens], {
        maxNewTokens: 14,
        temperature: 0.8,
        seed: i,
        stopTokenIds: engine.stopTokenIds(),
      });
      expect(Array.from(r.actionTokens), `request ${i}`).toEqual(Array.from(solo[0]!.tokens));
    }
    expect(fused.maxBatchSize).toBe(3);
  });

  it('rejects bad requests as the standard path does', async () => {
    await expect(fused.generate([[]], { maxNewTokens: 2 })).rejects.toThrow(/empty/);
    await expect(fused.generate([[1]], { maxNewTokens: 2, temperature: -1 })).rejects.toThrow(
      /temperature/,
    );
    // A stop id the model cannot sample (the tokenizer and the model disagree) is refused up
    // front on both paths; the generate graph would otherwise fail on it mid-batch.
    const V = tiny.weights.config.vocabSize;
    for (const g of [fused, standard]) {
      await expect(g.generate([[1]], { maxNewTokens: 2, stopTokenIds: [V] })).rejects.toThrow(
        `request 0's stop tokens has token id ${V} outside [0, ${V})`,
      );
      const e = await g
        .generateEach([{ prompt: [1], maxNewTokens: 2, stopTokenIds: [-1] }])
        .catch((x: unknown) => x);
      expect(TokenOutOfVocabularyError.isInstance(e)).toBe(true);
      expect((e as TokenOutOfVocabularyError).hint).toContain("the model's own tokenizer");
      await expect(g.generate([[V + 3]], { maxNewTokens: 2 })).rejects.toThrow(
        `prompt 0 has token id ${V + 3} outside [0, ${V})`,
      );
    }
    const none = await fused.generate([[1, 2]], { maxNewTokens: 0 });
    expect(none[0]!.tokens.length).toBe(0);
    // A batch size that would admit nothing (and spin) is refused where it is given.
    expect(() => new DecoderGenerator(art, { maxBatchSize: Number.NaN })).toThrow(RangeError);
    expect(() => {
      fused.maxBatchSize = 0;
    }).toThrow(/maxBatchSize must be a positive integer/);
  });

  it('long prompt batches prefill in pieces and sample what one prefill run samples (both paths)', async () => {
    // prefillWholeScores 0 and prefillChunkTokens 5 over 4 rows: one column per prefill run, so
    // every prompt goes in token by token, each piece extending the cache of the one before.
    // Expected: the same generators' one-run prefill (these prompts are far under the default
    // prefillWholeScores); seeded sampling too, so the pieces must not draw from a row's stream.
    const requests = prompts().map((prompt, i) => ({
      prompt,
      maxNewTokens: 8,
      temperature: i % 2 === 0 ? 0 : 0.9,
      seed: 40 + i,
    }));
    for (const [what, whole, o] of [
      ['fused', fused, { chunkTokens: 3 }],
      ['standard', standard, { useGenerateGraph: false }],
    ] as const) {
      const pieces = new DecoderGenerator(art, {
        ...o,
        prefillChunkTokens: 5,
        prefillWholeScores: 0,
      });
      pieces.setLora(params);
      const want = await whole.generateEach(requests, { decode });
      expectSameSamples(want, await pieces.generateEach(requests, { decode }), what);
      if (what === 'fused') {
        // One run per prompt column (the longest prompt's), the last of which samples.
        const longest = Math.max(...prompts().map((p) => p.length));
        expect((await pieces.batchStats())!.chunks).toBeGreaterThanOrEqual(longest);
      }
    }
    expect(() => new DecoderGenerator(art, { prefillChunkTokens: 0 })).toThrow(
      /prefillChunkTokens must be a positive integer/,
    );
    expect(() => new DecoderGenerator(art, { prefillWholeScores: -1 })).toThrow(
      /prefillWholeScores must be a non-negative integer/,
    );
  });

  it('a row whose stop-string decode throws mid-batch fails alone, on both paths', async () => {
    // The decode (the tokenizer's, for the stop strings) throws once one row's sample reaches
    // its third token: that row fails with its error, and its batch-mates finish with the tokens
    // they get without it (the same generator's greedy samples).
    for (const [what, gen] of [
      ['fused', fused],
      ['standard', standard],
    ] as const) {
      const base = { maxNewTokens: 8, temperature: 0, stopStrings: ['\u0000never'] };
      const want = await gen.generateEach(
        prompts().map((prompt) => ({ prompt, ...base })),
        { decode },
      );
      const poison = Array.from(want[2]!.tokens.subarray(0, 3));
      const starts = (ids: ArrayLike<number>) =>
        ids.length >= 3 && poison.every((t, j) => ids[j] === t);
      // Only row 2's sample starts with those three tokens.
      expect(want.filter((w) => starts(w.tokens)).length, what).toBe(1);
      const throwing = (ids: ArrayLike<number>) => {
        if (starts(ids)) throw new Error('decode failed for this row');
        return decode(ids);
      };
      const settled = await gen.generateSettled(
        prompts().map((prompt) => ({ prompt, ...base })),
        { decode: throwing },
      );
      settled.forEach((x, i) => {
        if (i === 2)
          expect(x, what).toMatchObject({
            status: 'rejected',
            reason: { message: /decode failed/ },
          });
        else {
          expect(x.status, `${what} row ${i}`).toBe('fulfilled');
          const got = (x as PromiseFulfilledResult<GenerationOutput>).value;
          expectSameSamples([want[i]!], [got], `${what} row ${i}`);
        }
      });
      // generateEach stays all-or-nothing: the row's error.
      await expect(
        gen.generateEach(
          prompts().map((prompt) => ({ prompt, ...base })),
          { decode: throwing },
        ),
      ).rejects.toThrow(/decode failed/);
    }
  });

  it('an invalid request fails alone: its batch-mates are generated', async () => {
    for (const gen of [fused, standard]) {
      const ok = { prompt: prompts()[0]!, maxNewTokens: 4, temperature: 0 };
      const settled = await gen.generateSettled([ok, { ...ok, prompt: [] }, ok]);
      expect(settled.map((x) => x.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
      expect((settled[1] as PromiseRejectedResult).reason).toBeInstanceOf(RangeError);
    }
  });

  it("a row whose caller's done() throws fails alone; the batch and the batcher go on", async () => {
    // The rows' own callbacks (DecoderGenerator's decode the text there) throw for one row: at
    // once (maxNewTokens 0) and at the end of a running batch. Expected tokens: this thread's
    // greedy generation of the same prompts.
    const want = (await fused.generate(prompts(), { maxNewTokens: 6, temperature: 0 })).map((o) =>
      Array.from(o.tokens),
    );
    const batcher = new FusedBatcher({
      runner: localRunner(await art.openSession('generate')),
      config: art.manifest.config,
      maxPositions: art.manifest.maxPositions,
      chunkTokens: 2,
    });
    const lora = { version: 0, feeds: fused.loraFeeds(batcher.inputs) };
    const run = (throwFor: number, maxNewTokens: number) =>
      Promise.allSettled(
        prompts().map(
          (prompt, i) =>
            new Promise<number[]>((resolve, reject) =>
              batcher.submit([
                greedyRow(
                  prompt,
                  i,
                  maxNewTokens,
                  (r) => {
                    if (i === throwFor) throw new Error(`row ${i}: the caller's callback threw`);
                    resolve(r.tokens);
                  },
                  reject,
                  lora,
                ),
              ]),
            ),
        ),
      );
    const firstRow = await run(0, 0);
    expect(firstRow[0]).toMatchObject({ status: 'rejected', reason: { message: /row 0/ } });
    const settled = await run(2, 6);
    settled.forEach((x, i) => {
      if (i === 2) expect(x).toMatchObject({ status: 'rejected', reason: { message: /row 2/ } });
      else expect(x).toEqual({ status: 'fulfilled', value: want[i] });
    });
    // The batcher still serves.
    const again = await run(-1, 6);
    expect(again.map((x) => (x.status === 'fulfilled' ? x.value : x.reason))).toEqual(want);
  });
});

describe('fused generate graph variants agree with the standard path', () => {
  const tmp = mkdtempSync(join(tmpdir(), 'flowgrpo-fused-variants-'));
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));
  // Qwen2 with GQA; and a Qwen3/Llama-like one: q/k RMSNorm, o/MLP biases, untied head, MHA.
  const configs: [string, DecoderConfig][] = [
    [
      'qwen2 GQA 4:2',
      tinyQwen2Config({
        seed: 0,
        hiddenSize: 32,
        layers: 2,
        heads: 4,
        kvHeads: 2,
        initializerRange: 0.2,
      }),
    ],
    [
      'q/k norm, biases, untied, MHA',
      qwen3StyleConfig({ seed: 0, hiddenSize: 32, layers: 2, heads: 2, initializerRange: 0.2 }),
    ],
  ];
  for (const [label, config] of configs)
    for (const attention of ['concat', 'split', 'auto'] as const)
      it(`${label}, ${attention} loop`, async () => {
        const dir = join(tmp, `${label.replace(/\W+/g, '-')}-${attention}`);
        buildDecoderArtifacts(initTinyWeights(config, 3), dir, {
          graphs: ['decode', 'generate'],
          maxPositions: 48,
          generate: { attention },
        });
        const art = await DecoderArtifacts.open(dir, { intraOpThreads: 1 });
        try {
          const prompts = [[1, 5, 9, 2], [7], [3, 3, 3, 3, 3, 3, 3, 3, 3]];
          for (const o of [{ temperature: 0 }, { temperature: 1, seed: 11 }]) {
            const a = await new DecoderGenerator(art, { useGenerateGraph: false }).generate(
              prompts,
              {
                ...o,
                maxNewTokens: 9,
              },
            );
            // 'auto' runs its split loop at batch ≥ splitCacheFrom: 2 takes it for this batch.
            const gen = new DecoderGenerator(art, { chunkTokens: 4, splitCacheFrom: 2 });
            expectSameSamples(
              a,
              await gen.generate(prompts, { ...o, maxNewTokens: 9 }),
              `${attention} ${JSON.stringify(o)}`,
            );
          }
        } finally {
          await art.release();
        }
      });
});
