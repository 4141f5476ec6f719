// LocalPolicyEngine (the agent's PolicyEngine over the local graphs) on a generated tiny Qwen2
// with its byte-level tokenizer and ChatML template: prompt ids are the tokenizer's own rendering,
// action logprobs are what the logprobs graph computes for the same tokens, stop strings cut the
// text where the unstopped sample shows them, seeds reproduce, and a PEFT adapter changes the
// policy (B ≠ 0) or not (B = 0, PEFT's init).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as ort from 'onnxruntime-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  buildDecoderArtifacts,
  ContextLengthExceededError,
  createTinyQwen2,
  DecoderArtifacts,
  DecoderGenerator,
  initLoraParams,
  LocalPolicyEngine,
  type LoraConfig,
  type LoraParams,
  saveLoraAdapter,
  type TinyModel,
} from '../src/index.js';

const int64 = (values: readonly number[], dims: number[]) =>
  new ort.Tensor(
    'int64',
    BigInt64Array.from(values, (v) => BigInt(v)),
    dims,
  );

describe('LocalPolicyEngine', () => {
  const tmp = mkdtempSync(join(tmpdir(), 'flowgrpo-policy-'));
  const lora: LoraConfig = { r: 4, alpha: 8, targetModules: ['q_proj', 'v_proj', 'up_proj'] };
  let tiny: TinyModel;
  let art: DecoderArtifacts;
  let engine: LocalPolicyEngine;

  beforeAll(async () => {
    tiny = await createTinyQwen2(join(tmp, 'model'), {
      seed: 2,
      hiddenSize: 32,
      layers: 2,
      heads: 4,
      kvHeads: 2,
    });
    buildDecoderArtifacts(tiny.weights, join(tmp, 'art'), {
      lora,
      graphs: ['prefill', 'decode', 'logprobs'],
    });
    art = await DecoderArtifacts.open(join(tmp, 'art'), { intraOpThreads: 1 });
    engine = new LocalPolicyEngine({ artifacts: art, tokenizer: tiny.tokenizer, model: 'tiny' });
  });
  afterAll(async () => {
    await art?.release();
    rmSync(tmp, { recursive: true, force: true });
  });

  /** Logprobs graph over prompt + action (one row), at temperature t. */
  async function graphLogprobs(
    prompt: ArrayLike<number>,
    action: ArrayLike<number>,
    t: number,
    params?: LoraParams,
  ) {
    const seq = [...Array.from(prompt), ...Array.from(action)];
    const T = seq.length;
    const K = action.length;
    const feeds: Record<string, ort.Tensor> = {
      input_ids: int64(seq, [1, T]),
      attention_mask: int64(
        seq.map(() => 1),
        [1, T],
      ),
      position_ids: int64(
        seq.map((_, i) => i),
        [1, T],
      ),
      target_positions: int64(
        Array.from({ length: K }, (_, k) => prompt.length - 1 + k),
        [1, K],
      ),
      target_ids: int64(Array.from(action), [1, K]),
      temperature: new ort.Tensor('float32', new Float32Array([t]), []),
      lora_scale: new ort.Tensor('float32', new Float32Array([params ? 1 : 0]), []),
    };
    for (const s of art.session('logprobs').inputs)
      if (s.name.includes('.lora_')) {
        const dims = s.shape as number[];
        feeds[s.name] = new ort.Tensor(
          'float32',
          params?.get(s.name) ?? new Float32Array(dims[0]! * dims[1]!),
          dims,
        );
      }
    const out = await art.session('logprobs').run(feeds);
    return out.outputs.logprobs!.data as Float32Array;
  }

  it('chat messages go through the chat template; action logprobs match the logprobs graph', async () => {
    const messages = [
      { role: 'system' as const, content: 'You add numbers.' },
      { role: 'user' as const, content: 'What is 2+3?' },
    ];
    const r = await engine.generate({
      messages,
      maxTokens: 16,
      temperature: 0.9,
      topP: 0.95,
      seed: 11,
    });
    const rendered = tiny.tokenizer.applyChatTemplate(messages, { addGenerationPrompt: true });
    expect(rendered).toContain('<|im_start|>assistant\n');
    expect(Array.from(r.promptTokens)).toEqual(Array.from(tiny.tokenizer.encode(rendered)));
    expect(r.actionTokens.length).toBe(r.actionLogprobs.length);
    expect(r.actionTokens.length).toBeGreaterThan(0);
    const lp = await graphLogprobs(r.promptTokens, r.actionTokens, 0.9);
    for (let i = 0; i < lp.length; i++)
      expect(Math.abs(lp[i]! - r.actionLogprobs[i]!)).toBeLessThan(1e-4);
    expect(r.usage).toEqual({
      promptTokens: r.promptTokens.length,
      completionTokens: r.actionTokens.length,
      totalTokens: r.promptTokens.length + r.actionTokens.length,
    });
    expect(r.model).toBe('tiny');
    // Same seed, same sample.
    const again = await engine.generate({
      messages,
      maxTokens: 16,
      temperature: 0.9,
      topP: 0.95,
      seed: 11,
    });
    expect(Array.from(again.actionTokens)).toEqual(Array.from(r.actionTokens));
  });

  it('a stop string ends the sample where the unstopped sample first shows it', async () => {
    const base = await engine.generate({ prompt: 'abc', maxTokens: 24, temperature: 1, seed: 5 });
    expect(base.finishReason).toBe('length');
    const full = base.text;
    expect(full.length).toBeGreaterThan(6);
    const stop = full.slice(4, 6);
    const cut = full.indexOf(stop);
    const r = await engine.generate({
      prompt: 'abc',
      maxTokens: 24,
      temperature: 1,
      seed: 5,
      stop: [stop],
    });
    expect(r.finishReason).toBe('stop');
    expect(r.text).toBe(full.slice(0, cut));
    // Tokens are a prefix of the unstopped ones, ending with the token that completed the stop.
    expect(Array.from(r.actionTokens)).toEqual(
      Array.from(base.actionTokens.subarray(0, r.actionTokens.length)),
    );
    expect(tiny.tokenizer.decode(r.actionTokens)).toContain(stop);
    expect(tiny.tokenizer.decode(r.actionTokens.subarray(0, -1))).not.toContain(stop);
  });

  it('in a worker thread (KV cache carried there): the same samples, and the event loop runs meanwhile', async () => {
    const gen = await DecoderGenerator.inWorker(join(tmp, 'art'), { intraOpThreads: 1 });
    try {
      const worker = new LocalPolicyEngine({ generator: gen, tokenizer: tiny.tokenizer });
      const req = { prompt: 'count: 1 2 3', maxTokens: 20, temperature: 0.8, seed: 4 };
      const [a, b] = await Promise.all([
        worker.generate(req),
        worker.generate({ ...req, seed: 5 }),
      ]);
      const here = await engine.generate(req);
      expect(Array.from(a.actionTokens)).toEqual(Array.from(here.actionTokens));
      for (let i = 0; i < a.actionLogprobs.length; i++)
        expect(Math.abs(a.actionLogprobs[i]! - here.actionLogprobs[i]!)).toBeLessThan(1e-5);
      expect(Array.from(b.actionTokens)).toEqual(
        Array.from((await engine.generate({ ...req, seed: 5 })).actionTokens),
      );
      // Timers fire while the worker generates.
      let ticks = 0;
      const timer = setInterval(() => ticks++, 1);
      await worker.generate({ ...req, maxTokens: 40 });
      clearInterval(timer);
      expect(ticks).toBeGreaterThan(0);
    } finally {
      await gen.release();
    }
  });

  it('token-id prompts and greedy decoding: logprobs at T = 1', async () => {
    const promptTokens = Array.from(tiny.tokenizer.encode('hi there'));
    const r = await engine.generate({ promptTokens, maxTokens: 10, temperature: 0 });
    const lp = await graphLogprobs(promptTokens, r.actionTokens, 1);
    for (let i = 0; i < lp.length; i++)
      expect(Math.abs(lp[i]! - r.actionLogprobs[i]!)).toBeLessThan(1e-4);
  });

  it('a prompt that does not fit the positions is CONTEXT_LENGTH_EXCEEDED, with the fix', async () => {
    const P = art.manifest.maxPositions;
    const e = await engine
      .generate({ promptTokens: new Array(P - 3).fill(5), maxTokens: 4, temperature: 0 })
      .catch((x: unknown) => x);
    expect(ContextLengthExceededError.isInstance(e)).toBe(true);
    const err = e as ContextLengthExceededError;
    expect(err.code).toBe('CONTEXT_LENGTH_EXCEEDED');
    expect([err.promptTokens, err.newTokens, err.maxPositions]).toEqual([P - 3, 4, P]);
    expect(err.message).toContain(`(${P - 3} tokens) + 4 new tokens exceeds the ${P} positions`);
    expect(err.hint).toMatch(/max_positions.*shorten the prompt.*max_completion_length/);
    // One token fewer fits.
    const ok = await engine.generate({ promptTokens: new Array(P - 4).fill(5), maxTokens: 4 });
    expect(ok.promptTokens.length + ok.actionTokens.length).toBeLessThanOrEqual(P);
  });

  it('updateAdapter loads a PEFT folder: B = 0 keeps the policy, B ≠ 0 changes it', async () => {
    const promptTokens = Array.from(tiny.tokenizer.encode('The answer'));
    const before = await engine.generate({ promptTokens, maxTokens: 12, temperature: 0 });
    const zero = initLoraParams(tiny.weights.config, lora, 1);
    await saveLoraAdapter(join(tmp, 'a0'), tiny.weights.config, lora, zero);
    await engine.updateAdapter({ name: 'a0', path: join(tmp, 'a0') });
    const same = await engine.generate({ promptTokens, maxTokens: 12, temperature: 0 });
    expect(Array.from(same.actionTokens)).toEqual(Array.from(before.actionTokens));
    expect(same.model).toBe('a0');

    const moved = initLoraParams(tiny.weights.config, lora, 1);
    for (const [k, v] of moved)
      if (k.includes('lora_B'))
        for (let i = 0; i < v.length; i++) v[i] = 0.5 * Math.sin(7 * i + k.length);
    await saveLoraAdapter(join(tmp, 'a1'), tiny.weights.config, lora, moved);
    await engine.updateAdapter({ name: 'a1', path: join(tmp, 'a1') });
    const after = await engine.generate({ promptTokens, maxTokens: 12, temperature: 0 });
    const lp = await graphLogprobs(promptTokens, after.actionTokens, 1, moved);
    for (let i = 0; i < lp.length; i++)
      expect(Math.abs(lp[i]! - after.actionLogprobs[i]!)).toBeLessThan(1e-4);
    const lpBase = await graphLogprobs(promptTokens, after.actionTokens, 1);
    expect(Math.max(...lp.map((x, i) => Math.abs(x - lpBase[i]!)))).toBeGreaterThan(1e-3);

    // An adapter of another rank or scaling than the graphs were built for is refused.
    const other: LoraConfig = { ...lora, alpha: 16 };
    await saveLoraAdapter(
      join(tmp, 'a2'),
      tiny.weights.config,
      other,
      initLoraParams(tiny.weights.config, other, 1),
    );
    await expect(engine.updateAdapter({ name: 'a2', path: join(tmp, 'a2') })).rejects.toThrow(
      /does not match/,
    );
    expect(engine.adapter?.name).toBe('a1');
  });
});
