import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { backoffDelayMs, parseRetryAfterMs, resolveRetryOptions } from '../src/engines/retry.js';
import { Semaphore } from '../src/engines/semaphore.js';
import {
  LLMAbortError,
  LLMMalformedReplyError,
  LLMRefusalError,
  LLMRequestError,
  LLMTimeoutError,
  OpenAIEngine,
} from '../src/index.js';
import { gate, OpenAITestServer, reply } from '../src/testing/index.js';

// Every test talks to a real HTTP server on 127.0.0.1 (src/testing/openai-server.ts, also
// `@flowgrpo/agent/testing`) through the real `openai` client. Expected values are derived by hand
// from the scripted replies.

let server: OpenAITestServer;
beforeEach(async () => {
  server = await OpenAITestServer.start();
});
afterEach(async () => {
  await server.close();
});

function engine(extra: Partial<ConstructorParameters<typeof OpenAIEngine>[0]> = {}): OpenAIEngine {
  return new OpenAIEngine({
    model: 'test-model',
    baseURL: server.baseURL,
    apiKey: 'sk-test',
    retry: { initialDelayMs: 5, maxDelayMs: 20 },
    timeoutMs: 5_000,
    ...extra,
  });
}

const hello = [{ role: 'user' as const, content: 'Say hello' }];

describe('OpenAIEngine.generateText', () => {
  it('sends the request fields and returns text, usage and finish reason', async () => {
    server.enqueue(
      'chat',
      reply.text('Hello there', { usage: { prompt_tokens: 7, completion_tokens: 2 } }),
    );
    const e = engine({ defaultHeaders: { 'x-team': 'flow' }, extraBody: { top_k: 20 } });
    const r = await e.generateText([{ role: 'system', content: 'Be brief.' }, ...hello], {
      temperature: 0.3,
      topP: 0.9,
      maxTokens: 16,
      stop: ['\n'],
      seed: 7,
    });
    expect(r).toEqual({
      text: 'Hello there',
      usage: { promptTokens: 7, completionTokens: 2, totalTokens: 9 },
      finishReason: 'stop',
      model: 'test-model',
    });
    const [req] = server.requestsTo('chat');
    expect(req!.body).toMatchObject({
      model: 'test-model',
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Say hello' },
      ],
      temperature: 0.3,
      top_p: 0.9,
      max_tokens: 16,
      stop: ['\n'],
      seed: 7,
      top_k: 20,
    });
    expect(req!.headers.authorization).toBe('Bearer sk-test');
    expect(req!.headers['x-team']).toBe('flow');
  });

  it('maps finish_reason length and sends max_completion_tokens when asked', async () => {
    server.enqueue('chat', reply.text('cut', { finishReason: 'length' }));
    const r = await engine({ maxTokensParam: 'max_completion_tokens' }).generateText(hello, {
      maxTokens: 3,
    });
    expect(r.finishReason).toBe('length');
    expect(server.requests[0]!.body.max_completion_tokens).toBe(3);
    expect(server.requests[0]!.body.max_tokens).toBeUndefined();
  });

  it('retries a 429 after the retry-after delay, then succeeds', async () => {
    server.enqueue('chat', reply.rateLimit(1), reply.text('after wait'));
    // The retry's wait goes through an injected sleep that records it and returns at once.
    const waits: number[] = [];
    const sleep = async (ms: number) => {
      waits.push(ms);
    };
    const r = await engine({ retry: { initialDelayMs: 5, maxDelayMs: 20, sleep } }).generateText(
      hello,
    );
    expect(r.text).toBe('after wait');
    expect(server.requestsTo('chat')).toHaveLength(2);
    // retry-after: 1 → one wait of 1000 ms; the backoff alone would have been ≤ 5 ms.
    expect(waits).toEqual([1000]);
  });

  it('clamps a long retry-after to maxRetryAfterMs, and backs off exponentially without one', async () => {
    server.enqueue(
      'chat',
      reply.rateLimit(3600),
      reply.error(503),
      reply.error(503),
      reply.text('ok'),
    );
    const waits: number[] = [];
    const sleep = async (ms: number) => {
      waits.push(ms);
    };
    const r = await engine({
      retry: { initialDelayMs: 100, maxDelayMs: 1000, jitter: 0, maxRetryAfterMs: 250, sleep },
    }).generateText(hello);
    expect(r.text).toBe('ok');
    // 3600 s asked → 250 ms (the cap); then the 2nd and 3rd retries back off 100·2¹ and 100·2².
    expect(waits).toEqual([250, 200, 400]);
  });

  it('an abort during the wait before a retry ends the call with LLMAbortError', async () => {
    server.enqueue('chat', reply.error(503), reply.text('never'));
    const controller = new AbortController();
    // The injected sleep is where the caller gives up: deterministic, no timer.
    const sleep = async () => {
      controller.abort(new Error('user stop'));
    };
    const err = await engine({ retry: { sleep } })
      .generateText(hello, { signal: controller.signal })
      .catch((e: unknown) => e);
    expect(LLMAbortError.isInstance(err)).toBe(true);
    expect(((err as LLMAbortError).reason as Error).message).toBe('user stop');
    expect(server.requestsTo('chat')).toHaveLength(1);
  });

  it('retries 5xx errors, truncated bodies, resets and unparsable bodies', async () => {
    server.enqueue(
      'chat',
      reply.error(500),
      reply.error(503),
      reply.truncate(),
      reply.reset(),
      reply.raw('{"choices": [ not json'),
      reply.text('finally'),
    );
    const r = await engine({
      retry: { maxRetries: 5, initialDelayMs: 1, maxDelayMs: 5 },
    }).generateText(hello);
    expect(r.text).toBe('finally');
    expect(server.requestsTo('chat')).toHaveLength(6);
  });

  it('gives up after maxRetries with an LLMRequestError carrying status, body and attempts', async () => {
    server.enqueue(
      'chat',
      reply.error(502, 'bad gateway'),
      reply.error(502, 'bad gateway'),
      reply.error(502, 'bad gateway'),
    );
    const err = await engine({ retry: { maxRetries: 2, initialDelayMs: 1 } })
      .generateText(hello)
      .catch((e: unknown) => e);
    expect(LLMRequestError.isInstance(err)).toBe(true);
    const e = err as LLMRequestError;
    expect(e.status).toBe(502);
    expect(e.attempts).toBe(3);
    expect(e.retryable).toBe(true);
    expect(e.body).toMatchObject({ message: 'bad gateway' });
    expect(server.requestsTo('chat')).toHaveLength(3);
  });

  it('does not retry a 400', async () => {
    server.enqueue('chat', reply.error(400, 'bad request'), reply.text('never'));
    const err = await engine()
      .generateText(hello)
      .catch((e: unknown) => e);
    expect(LLMRequestError.isInstance(err)).toBe(true);
    expect((err as LLMRequestError).retryable).toBe(false);
    expect((err as LLMRequestError).attempts).toBe(1);
    expect(server.requestsTo('chat')).toHaveLength(1);
  });

  it('times out on a hang (LLMTimeoutError), and a retry after a hang succeeds', async () => {
    // The server never answers a hang, so the call can only end through the 200 ms timeout.
    server.enqueue('chat', reply.hang());
    const err = await engine({ timeoutMs: 200, retry: { maxRetries: 0 } })
      .generateText(hello)
      .catch((e: unknown) => e);
    expect(LLMTimeoutError.isInstance(err)).toBe(true);
    expect((err as LLMTimeoutError).timeoutMs).toBe(200);
    expect((err as LLMTimeoutError).attempts).toBe(1);

    // The retry's answer must come back within the same per-attempt limit: 2 s, so that a loaded
    // machine cannot turn the answer into a second timeout.
    server.enqueue('chat', reply.hang(), reply.text('second try'));
    const r = await engine({ retry: { maxRetries: 1, initialDelayMs: 1 } }).generateText(hello, {
      timeoutMs: 2_000,
    });
    expect(r.text).toBe('second try');
  });

  it('stops at once when the caller aborts', async () => {
    // The caller aborts once the server holds the request, which it never answers; with a
    // 10-minute timeout only the abort can end the call (a timeout would be LLMTimeoutError).
    const controller = new AbortController();
    server.enqueue(
      'chat',
      reply.dynamic(() => {
        controller.abort(new Error('user stop'));
        return reply.hang();
      }),
    );
    const err = await engine({ timeoutMs: 600_000 })
      .generateText(hello, { signal: controller.signal })
      .catch((e: unknown) => e);
    expect(LLMAbortError.isInstance(err)).toBe(true);
    expect(((err as LLMAbortError).reason as Error).message).toBe('user stop');
    expect(server.requestsTo('chat')).toHaveLength(1);
  });

  it('counts every timed-out attempt', async () => {
    server.enqueue('chat', reply.hang(), reply.hang());
    const err = await engine({ timeoutMs: 100, retry: { maxRetries: 1, initialDelayMs: 1 } })
      .generateText(hello)
      .catch((e: unknown) => e);
    expect(LLMTimeoutError.isInstance(err)).toBe(true);
    expect((err as LLMTimeoutError).attempts).toBe(2);
    expect(server.requestsTo('chat')).toHaveLength(2);
  });

  it('an abort while waiting for a concurrency slot leaves the queue without a request', async () => {
    // The second call is aborted while the first holds the only slot (its request is on the
    // server, which answers it after the abort).
    const controller = new AbortController();
    server.enqueue(
      'chat',
      reply.dynamic(() => {
        controller.abort(new Error('no longer needed'));
        return reply.text('first');
      }),
    );
    const e = engine({ maxConcurrency: 1 });
    const first = e.generateText(hello);
    const second = e.generateText(hello, { signal: controller.signal }).catch((x: unknown) => x);
    expect(LLMAbortError.isInstance(await second)).toBe(true);
    expect((await first).text).toBe('first');
    expect(server.requestsTo('chat')).toHaveLength(1);
  });

  it('does not send $OPENAI_API_KEY to a custom baseURL', async () => {
    const saved = process.env.OPENAI_API_KEY;
    process.env.OPENAI_API_KEY = 'sk-real-openai-key';
    try {
      await new OpenAIEngine({ model: 'm', baseURL: server.baseURL }).generateText(hello);
    } finally {
      if (saved === undefined) delete process.env.OPENAI_API_KEY;
      else process.env.OPENAI_API_KEY = saved;
    }
    expect(server.requests[0]!.headers.authorization).toBe('Bearer EMPTY');
  });

  it('turns a refusal into LLMRefusalError without retrying', async () => {
    server.enqueue('chat', reply.refusal('I cannot help with that.'));
    const err = await engine()
      .generateText(hello)
      .catch((e: unknown) => e);
    expect(LLMRefusalError.isInstance(err)).toBe(true);
    expect((err as LLMRefusalError).refusal).toBe('I cannot help with that.');
    expect(server.requestsTo('chat')).toHaveLength(1);
  });

  it('content: null without a refusal is a malformed reply: retried, then LLMMalformedReplyError', async () => {
    // A 200 whose message has content null and neither refusal nor tool calls (seen from
    // servers that crashed mid-generation). Expected: retried like a garbled body; never ''.
    const nullReply = {
      id: 'c',
      object: 'chat.completion',
      created: 0,
      model: 'test-model',
      choices: [{ index: 0, message: { role: 'assistant', content: null }, finish_reason: 'stop' }],
    };
    server.enqueue('chat', reply.json(nullReply), reply.text('second try'));
    expect((await engine().generateText(hello)).text).toBe('second try');
    expect(server.requestsTo('chat')).toHaveLength(2);

    server.setFallback('chat', reply.json(nullReply));
    const err = await engine({ retry: { maxRetries: 2, initialDelayMs: 1 } })
      .generateText(hello)
      .catch((e: unknown) => e);
    expect(LLMMalformedReplyError.isInstance(err)).toBe(true);
    // Still an LLMRequestError for callers that handle those.
    expect(LLMRequestError.isInstance(err)).toBe(true);
    expect((err as LLMMalformedReplyError).attempts).toBe(3);
    expect((err as LLMMalformedReplyError).code).toBe('LLM_MALFORMED_REPLY');
    // 2 earlier requests + 3 attempts.
    expect(server.requestsTo('chat')).toHaveLength(5);
  });

  it('holds at most maxConcurrency requests in flight (counted by the server)', async () => {
    // Replies are held until every request the engine has sent is on the server and at least two
    // are, so the cap is reached for certain, and a third request sent past the cap would be
    // waited for (and counted) before anything is answered.
    let sent = 0;
    const countingFetch = (url: string | URL | Request, init?: RequestInit) => {
      sent++;
      return fetch(url, init);
    };
    const held = gate();
    server.setFallback(
      'chat',
      reply.dynamic(() => {
        if (server.inFlight >= 2 && server.inFlight === sent) held.open();
        return reply.text('slow', { waitFor: held.promise });
      }),
    );
    const e = engine({ maxConcurrency: 2, fetch: countingFetch });
    const results = await Promise.all(Array.from({ length: 6 }, () => e.generateText(hello)));
    expect(results.map((r) => r.text)).toEqual(Array(6).fill('slow'));
    expect(server.maxInFlight).toBe(2);
    expect(sent).toBe(6);
    expect(e.inFlight).toBe(0);
  });

  it('sums usage per engine across calls', async () => {
    server.enqueue(
      'chat',
      reply.text('a', { usage: { prompt_tokens: 10, completion_tokens: 1 } }),
      reply.text('b', { usage: { prompt_tokens: 20, completion_tokens: 2, total_tokens: 22 } }),
      reply.text('c', { usage: { prompt_tokens: 30, completion_tokens: 3 } }),
    );
    const e = engine();
    for (let i = 0; i < 3; i++) await e.generateText(hello);
    // 10+20+30 prompt, 1+2+3 completion.
    expect(e.usage).toEqual({ promptTokens: 60, completionTokens: 6, totalTokens: 66 });
    expect(e.completions).toBe(3);
  });

  it('sends tool messages as user messages naming the tool', async () => {
    await engine().generateText([...hello, { role: 'tool', name: 'calculator', content: '42' }]);
    expect(server.requests[0]!.body.messages![1]).toEqual({
      role: 'user',
      content: '[tool calculator output]\n42',
    });
  });
});

describe('the scripted test server', () => {
  it('answers /v1/models and /v1/embeddings as the openai client expects', async () => {
    const client = engine().client;
    const models = await client.models.list();
    expect(models.data.map((m) => m.id)).toEqual(['test-model']);
    const emb = await client.embeddings.create({ model: 'e', input: ['ab', 'c'] });
    // embedText: char codes / 1000 summed into slot i % 8 → "ab" = [0.097, 0.098, 0, …]; the
    // client receives base64 float32, so compare at float32 precision.
    expect(emb.data).toHaveLength(2);
    expect(emb.data[0]!.embedding.slice(0, 3)).toEqual(
      Array.from(Float32Array.from([0.097, 0.098, 0])),
    );
    expect(emb.data[1]!.embedding[0]).toBeCloseTo(0.099, 6);
    const floats = await client.embeddings.create({
      model: 'e',
      input: 'ab',
      encoding_format: 'float',
    });
    expect(floats.data[0]!.embedding.slice(0, 2)).toEqual([0.097, 0.098]);
    expect(server.requests.map((r) => r.route)).toEqual(['models', 'embeddings', 'embeddings']);
  });
});

describe('the scripted test server, dynamic replies', () => {
  it('chooses a behaviour per request', async () => {
    server.setFallback(
      'chat',
      reply.dynamic((req) =>
        req.body.messages?.[0]?.content === 'fail' ? reply.error(400, 'no') : reply.text('yes'),
      ),
    );
    const e = engine();
    expect((await e.generateText([{ role: 'user', content: 'ok' }])).text).toBe('yes');
    const err = await e.generateText([{ role: 'user', content: 'fail' }]).catch((x: unknown) => x);
    expect((err as LLMRequestError).status).toBe(400);
  });
});

describe('retry helpers', () => {
  it('backoff doubles up to the cap, jitter scales it down by at most `jitter`', () => {
    const o = resolveRetryOptions({ initialDelayMs: 100, maxDelayMs: 1000, jitter: 0.5 });
    // random() = 0 → full delay: 100, 200, 400, 800, 1000 (capped).
    expect([0, 1, 2, 3, 4].map((i) => backoffDelayMs(i, o, () => 0))).toEqual([
      100, 200, 400, 800, 1000,
    ]);
    // random() → 1: delay × (1 − 0.5).
    expect(backoffDelayMs(1, o, () => 0.999999)).toBeCloseTo(100, 3);
  });

  it('parses retry-after seconds, HTTP dates and retry-after-ms', () => {
    expect(parseRetryAfterMs(new Headers({ 'retry-after': '3' }))).toBe(3000);
    expect(parseRetryAfterMs(new Headers({ 'retry-after-ms': '250', 'retry-after': '3' }))).toBe(
      250,
    );
    const now = Date.parse('Sun, 22 Nov 2026 10:00:00 GMT');
    expect(
      parseRetryAfterMs(new Headers({ 'retry-after': 'Sun, 22 Nov 2026 10:00:05 GMT' }), now),
    ).toBe(5000);
    expect(parseRetryAfterMs(new Headers({ 'retry-after': 'soon' }))).toBeUndefined();
    expect(parseRetryAfterMs(new Headers())).toBeUndefined();
  });

  it('semaphore serves waiters in order and drops aborted ones', async () => {
    const s = new Semaphore(1);
    const order: number[] = [];
    const r1 = await s.acquire();
    const controller = new AbortController();
    const p2 = s.acquire(controller.signal).then((rel) => {
      order.push(2);
      return rel;
    });
    const p3 = s.acquire().then((rel) => {
      order.push(3);
      return rel;
    });
    controller.abort(new Error('gone'));
    await expect(p2).rejects.toThrow('gone');
    expect(s.waiting).toBe(1);
    r1();
    (await p3)();
    expect(order).toEqual([3]);
    expect(s.active).toBe(0);
  });
});
