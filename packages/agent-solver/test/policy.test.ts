import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  LLMRequestError,
  OpenAIPolicyEngine,
  PolicyResponseError,
  type PolicyTokenizer,
  ServerPool,
} from '../src/index.js';
import { gate, OpenAITestServer, reply } from '../src/testing/index.js';

// The policy engine against real HTTP servers on 127.0.0.1 that answer like vLLM's OpenAI server
// with return_token_ids / return_tokens_as_token_ids (src/testing/openai-server.ts, also
// `@flowgrpo/agent/testing`). Expected ids and logprobs are the scripted ones; float32 rounding is
// applied to the expectation.

let a: OpenAITestServer;
let b: OpenAITestServer;
beforeEach(async () => {
  a = await OpenAITestServer.start({ model: 'base' });
  b = await OpenAITestServer.start({ model: 'base' });
});
afterEach(async () => {
  await Promise.all([a.close(), b.close()]);
});

const policy = (extra: Partial<ConstructorParameters<typeof OpenAIPolicyEngine>[0]> = {}) =>
  new OpenAIPolicyEngine({
    model: 'base',
    baseURLs: [a.baseURL],
    apiKey: 'k',
    retry: { initialDelayMs: 1, maxDelayMs: 5 },
    timeoutMs: 5_000,
    ...extra,
  });

/** UTF-8 bytes as token ids: a real (if trivial) tokenizer. */
const byteTokenizer: PolicyTokenizer = {
  encode: (text) => Array.from(new TextEncoder().encode(text)),
  decode: (ids) => new TextDecoder().decode(Uint8Array.from(Array.from(ids))),
};

describe('OpenAIPolicyEngine.generate', () => {
  it('token prompt → /v1/completions with vLLM token-id fields; returns ids and logprobs', async () => {
    a.enqueue(
      'completions',
      reply.tokens(
        ' four',
        { ids: [3040, 151645], logprobs: [-0.25, -0.0625] },
        {
          usage: { prompt_tokens: 3, completion_tokens: 2 },
        },
      ),
    );
    const r = await policy().generate({
      promptTokens: Int32Array.from([11, 22, 33]),
      maxTokens: 8,
      temperature: 1,
      topP: 0.9,
      seed: 3,
      stop: ['\n'],
    });
    expect(a.requests[0]!.body).toMatchObject({
      model: 'base',
      prompt: [11, 22, 33],
      max_tokens: 8,
      temperature: 1,
      top_p: 0.9,
      seed: 3,
      stop: ['\n'],
      logprobs: 1,
      return_tokens_as_token_ids: true,
      return_token_ids: true,
    });
    expect(r.text).toBe(' four');
    expect(r.promptTokens).toEqual(Int32Array.from([11, 22, 33]));
    expect(r.actionTokens).toEqual(Int32Array.from([3040, 151645]));
    expect(r.actionLogprobs).toEqual(Float32Array.from([-0.25, -0.0625]));
    expect(r.finishReason).toBe('stop');
    expect(r.usage).toEqual({ promptTokens: 3, completionTokens: 2, totalTokens: 5 });
  });

  it('chat prompt → /v1/chat/completions; prompt ids from the top-level prompt_token_ids', async () => {
    a.enqueue(
      'chat',
      reply.tokens(
        'Plan: search',
        { ids: [5, 6, 7], logprobs: [-1.5, -0.5, -2], promptIds: [100, 101, 102, 103] },
        { finishReason: 'length' },
      ),
    );
    const r = await policy().generate({
      messages: [{ role: 'user', content: 'Plan the next step' }],
      maxTokens: 3,
    });
    const body = a.requestsTo('chat')[0]!.body;
    expect(body.logprobs).toBe(true);
    expect(body.return_token_ids).toBe(true);
    expect(body.messages).toEqual([{ role: 'user', content: 'Plan the next step' }]);
    expect(r.text).toBe('Plan: search');
    expect(r.promptTokens).toEqual(Int32Array.from([100, 101, 102, 103]));
    expect(r.actionTokens).toEqual(Int32Array.from([5, 6, 7]));
    expect(r.actionLogprobs).toEqual(Float32Array.from([-1.5, -0.5, -2]));
    expect(r.finishReason).toBe('length');
  });

  it('falls back to token_ids when logprob tokens are text, and to the tokenizer for the prompt', async () => {
    // A server that ignores return_tokens_as_token_ids and has no prompt_token_ids.
    a.enqueue(
      'completions',
      reply.json({
        model: 'base',
        choices: [
          {
            text: 'hi',
            finish_reason: 'stop',
            logprobs: { tokens: ['h', 'i'], token_logprobs: [-0.5, -0.75] },
            token_ids: [104, 105],
          },
        ],
        usage: { prompt_tokens: 2, completion_tokens: 2 },
      }),
    );
    const r = await policy({ tokenizer: byteTokenizer }).generate({ prompt: 'Yo', maxTokens: 2 });
    expect(a.requests[0]!.body.prompt).toBe('Yo');
    // "Yo" in UTF-8: 0x59 0x6f.
    expect(r.promptTokens).toEqual(Int32Array.from([0x59, 0x6f]));
    expect(r.actionTokens).toEqual(Int32Array.from([104, 105]));
  });

  it('renders chat locally and uses /v1/completions with chatTemplate "local"', async () => {
    const tok: PolicyTokenizer = {
      ...byteTokenizer,
      applyChatTemplate: (messages) =>
        `${messages.map((m) => `<${m.role}>${m.content}`).join('')}<assistant>`,
    };
    a.enqueue('completions', reply.tokens('x', { ids: [120], logprobs: [-0.125] }));
    const r = await policy({ tokenizer: tok, chatTemplate: 'local' }).generate({
      messages: [{ role: 'user', content: 'q' }],
      maxTokens: 1,
    });
    expect(a.requests[0]!.body.prompt).toBe('<user>q<assistant>');
    expect(r.promptTokens).toEqual(Int32Array.from(new TextEncoder().encode('<user>q<assistant>')));
    expect(r.actionTokens).toEqual(Int32Array.from([120]));
  });

  it('fails clearly without logprobs or without a way to know the ids', async () => {
    a.enqueue(
      'completions',
      reply.json({ choices: [{ text: 'x', finish_reason: 'stop', logprobs: null }] }),
    );
    await expect(policy().generate({ promptTokens: [1], maxTokens: 1 })).rejects.toSatisfy(
      (e) => PolicyResponseError.isInstance(e) && /no logprobs/.test((e as Error).message),
    );
    a.enqueue(
      'completions',
      reply.json({
        choices: [
          { text: 'x', finish_reason: 'stop', logprobs: { tokens: ['x'], token_logprobs: [-1] } },
        ],
      }),
    );
    await expect(policy().generate({ promptTokens: [1], maxTokens: 1 })).rejects.toSatisfy(
      (e) => PolicyResponseError.isInstance(e) && /token ids/.test((e as Error).message),
    );
    await expect(
      policy().generate({ prompt: 'a', promptTokens: [1], maxTokens: 1 }),
    ).rejects.toThrow(/exactly one/);
  });
});

describe('LoRA adapters', () => {
  it('updateAdapter unloads the old one and loads the new one on every server; generation uses it', async () => {
    const p = policy({ baseURLs: [a.baseURL, b.baseURL] });
    await p.updateAdapter({ name: 'planner', path: '/ckpt/step-1' });
    for (const s of [a, b]) {
      // First update: the unload finds nothing (404, tolerated), then the load.
      expect(s.requests.map((r) => [r.route, r.body.lora_name, r.body.lora_path])).toEqual([
        ['unload_lora_adapter', 'planner', undefined],
        ['load_lora_adapter', 'planner', '/ckpt/step-1'],
      ]);
      expect(s.adapters.get('planner')).toBe('/ckpt/step-1');
    }
    await p.updateAdapter({ name: 'planner', path: '/ckpt/step-2' });
    expect(a.adapters.get('planner')).toBe('/ckpt/step-2');
    expect(b.adapters.get('planner')).toBe('/ckpt/step-2');

    a.enqueue('completions', reply.tokens('a', { ids: [1], logprobs: [-1] }));
    b.enqueue('completions', reply.tokens('a', { ids: [1], logprobs: [-1] }));
    await p.generate({ promptTokens: [1], maxTokens: 1 });
    const gen = [...a.requestsTo('completions'), ...b.requestsTo('completions')];
    expect(gen[0]!.body.model).toBe('planner');

    await p.unloadAdapter('planner');
    expect(a.adapters.size + b.adapters.size).toBe(0);
    expect(p.servedModel).toBe('base');
  });

  it('a new name per step loads the new adapter before unloading the old one', async () => {
    const p = policy();
    await p.updateAdapter({ name: 'planner-1', path: '/ckpt/1' });
    await p.updateAdapter({ name: 'planner-2', path: '/ckpt/2' });
    expect(a.requests.map((r) => `${r.route} ${r.body.lora_name}`)).toEqual([
      'unload_lora_adapter planner-1',
      'load_lora_adapter planner-1',
      'load_lora_adapter planner-2',
      'unload_lora_adapter planner-1',
    ]);
    expect([...a.adapters]).toEqual([['planner-2', '/ckpt/2']]);
    expect(p.servedModel).toBe('planner-2');
  });

  it("adapterUpdate 'inplace' reloads with vLLM's load_inplace", async () => {
    const p = policy({ adapterUpdate: 'inplace' });
    await p.updateAdapter({ name: 'planner', path: '/ckpt/1' });
    await p.updateAdapter({ name: 'planner', path: '/ckpt/2' });
    expect(a.requests.map((r) => [r.route, r.body.load_inplace])).toEqual([
      ['load_lora_adapter', true],
      ['load_lora_adapter', true],
    ]);
    expect(a.adapters.get('planner')).toBe('/ckpt/2');
  });

  it("loraRoutes 'sglang' posts to the server root", async () => {
    await policy({ loraRoutes: 'sglang' }).loadAdapter({ name: 'p', path: '/c' }, { mode: 'add' });
    expect(a.requests.map((r) => r.path)).toEqual(['/load_lora_adapter']);
    expect(a.adapters.get('p')).toBe('/c');
  });

  it('a failing load is an LLMRequestError', async () => {
    a.enqueue('load_lora_adapter', reply.error(400, 'bad adapter path'));
    const err = await policy()
      .loadAdapter({ name: 'x', path: '/nope' }, { mode: 'add' })
      .catch((e: unknown) => e);
    expect(LLMRequestError.isInstance(err)).toBe(true);
    expect((err as LLMRequestError).status).toBe(400);
  });
});

describe('balancing across servers', () => {
  const sample = reply.tokens('s', { ids: [1], logprobs: [-1] });

  it('round-robin alternates', async () => {
    a.setFallback('completions', sample);
    b.setFallback('completions', sample);
    const p = policy({ baseURLs: [a.baseURL, b.baseURL], balance: 'round-robin' });
    for (let i = 0; i < 4; i++) await p.generate({ promptTokens: [1], maxTokens: 1 });
    expect([a.requests.length, b.requests.length]).toEqual([2, 2]);
  });

  it('least-in-flight spreads concurrent requests', async () => {
    // Every reply is held until all six requests are on the servers, so each server's peak is
    // exactly what the pool sent it.
    const all = gate();
    const held = reply.dynamic(() => {
      if (a.inFlight + b.inFlight >= 6) all.open();
      return reply.tokens('s', { ids: [1], logprobs: [-1] }, { waitFor: all.promise });
    });
    a.setFallback('completions', held);
    b.setFallback('completions', held);
    const p = policy({ baseURLs: [a.baseURL, b.baseURL] });
    await Promise.all(
      Array.from({ length: 6 }, () => p.generate({ promptTokens: [1], maxTokens: 1 })),
    );
    expect([a.maxInFlight, b.maxInFlight]).toEqual([3, 3]);
  });

  it('skips a server that is down and keeps serving from the other', async () => {
    const dead = await OpenAITestServer.start();
    const deadURL = dead.baseURL;
    await dead.close(); // connection refused from now on
    b.setFallback('completions', sample);
    const p = policy({ baseURLs: [deadURL, b.baseURL], serverCooldownMs: 60_000 });
    for (let i = 0; i < 4; i++) await p.generate({ promptTokens: [1], maxTokens: 1 });
    expect(b.requests).toHaveLength(4);
    expect(p.pool.servers[0]!.failures).toBe(1);
    expect(p.pool.servers[0]!.served).toBe(0);
    expect(p.pool.servers[1]!.served).toBe(4);
  });

  it('retries a failed server after its cooldown', async () => {
    a.enqueue('completions', reply.error(503, 'overloaded'));
    a.setFallback('completions', sample);
    b.setFallback('completions', sample);
    // The pool reads a clock the test moves: the cooldown passes without waiting for it.
    let now = 1_000_000;
    const p = policy({
      baseURLs: [a.baseURL, b.baseURL],
      serverCooldownMs: 600,
      now: () => now,
    });
    await p.generate({ promptTokens: [1], maxTokens: 1 }); // a: 503 → b
    now += 599;
    await p.generate({ promptTokens: [1], maxTokens: 1 }); // a cooling down → b
    expect([a.requests.length, b.requests.length]).toEqual([1, 2]);
    now += 1; // 600 ms after the failure
    // a is healthy again and next in turn (both idle), then b.
    await p.generate({ promptTokens: [1], maxTokens: 1 });
    await p.generate({ promptTokens: [1], maxTokens: 1 });
    expect([a.requests.length, b.requests.length]).toEqual([2, 3]);
    expect(p.pool.servers[0]!.failures).toBe(0);
  });
});

describe('ServerPool', () => {
  it('picks the least loaded healthy server, ties in turn; a down server waits out its cooldown', () => {
    let now = 1000;
    const pool = new ServerPool(
      [
        { baseURL: 'a', client: 0 },
        { baseURL: 'b', client: 1 },
        { baseURL: 'c', client: 2 },
      ],
      { cooldownMs: 100, now: () => now },
    );
    expect([
      pool.pick().baseURL,
      pool.pick().baseURL,
      pool.pick().baseURL,
      pool.pick().baseURL,
    ]).toEqual(['a', 'b', 'c', 'a']);
    pool.servers[1]!.inFlight = 0;
    pool.servers[0]!.inFlight = 2;
    pool.servers[2]!.inFlight = 1;
    expect(pool.pick().baseURL).toBe('b');
    pool.markDown(pool.servers[1]!);
    expect(pool.pick().baseURL).toBe('c');
    now += 100;
    expect(pool.pick().baseURL).toBe('b');
    // Consecutive failures double the cooldown: 100, 200.
    pool.markDown(pool.servers[1]!);
    expect(pool.servers[1]!.downUntil).toBe(now + 200);
  });
});
