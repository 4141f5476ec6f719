import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  LLMAbortError,
  LLMRequestError,
  LLMTimeoutError,
  OpenAIPolicyEngine,
} from '../src/index.js';
import { OpenAITestServer, reply } from '../src/testing/index.js';

// The engines' default transport (engines/capped-fetch.ts: undici's `request` on a keep-alive
// pool, under the `openai` client), through the policy engine, against a real HTTP server on
// 127.0.0.1. A reply or failure must reach the retry loop as it did through the global fetch: the
// same error types, statuses and headers. OpenAIEngine's go through engines.test.ts and
// malformed-replies.test.ts. Expected values are the scripted replies'.

let server: OpenAITestServer;
beforeEach(async () => {
  server = await OpenAITestServer.start({ model: 'base' });
});
afterEach(async () => {
  await server.close();
});

const engine = (extra: Partial<ConstructorParameters<typeof OpenAIPolicyEngine>[0]> = {}) =>
  new OpenAIPolicyEngine({
    model: 'base',
    baseURLs: server.baseURL,
    apiKey: 'k',
    retry: { initialDelayMs: 1, maxDelayMs: 5 },
    timeoutMs: 5_000,
    ...extra,
  });

const prompt = { promptTokens: Int32Array.from([11, 22, 33]), maxTokens: 4 };
const four = () => reply.tokens(' four', { ids: [3040], logprobs: [-0.25] });

describe("the policy engine's transport", () => {
  it('sends requests one after another on kept-alive connections', async () => {
    server.enqueue('completions', ...Array.from({ length: 8 }, four));
    const e = engine();
    for (let i = 0; i < 8; i++) expect((await e.generate(prompt)).text).toBe(' four');
    expect(server.requestsTo('completions')).toHaveLength(8);
    // Connections are reused: 8 requests over 1–2 connections here (the pool may not yet have
    // its first socket back when the second request leaves, the global fetch's too); without
    // keep-alive, 8. Half the requests leaves room for a slow machine.
    expect(server.connections).toBeLessThanOrEqual(4);
    // The client's headers reach the server (the bearer key; a JSON body).
    expect(server.requests[0]!.headers.authorization).toBe('Bearer k');
    expect(server.requests[0]!.body).toMatchObject({ prompt: [11, 22, 33], max_tokens: 4 });
  });

  it('retries 5xx errors, truncated bodies, resets and unparsable bodies', async () => {
    server.enqueue(
      'completions',
      reply.error(500),
      reply.truncate(),
      reply.reset(),
      reply.raw('{"choices": [ not json'),
      four(),
    );
    const r = await engine({ retry: { maxRetries: 4, initialDelayMs: 1, maxDelayMs: 5 } }).generate(
      prompt,
    );
    expect(r.actionTokens).toEqual(Int32Array.from([3040]));
    expect(server.requestsTo('completions')).toHaveLength(5);
  });

  it("a 400 is not retried and carries the server's status and message", async () => {
    server.enqueue('completions', reply.error(400, 'bad request'), four());
    const err = await engine()
      .generate(prompt)
      .catch((x: unknown) => x);
    expect(LLMRequestError.isInstance(err)).toBe(true);
    expect((err as LLMRequestError).status).toBe(400);
    expect((err as LLMRequestError).retryable).toBe(false);
    expect((err as LLMRequestError).body).toMatchObject({ message: 'bad request' });
    expect(server.requestsTo('completions')).toHaveLength(1);
  });

  it("a 429's retry-after header reaches the retry loop", async () => {
    server.enqueue('completions', reply.rateLimit(1), four());
    const waits: number[] = [];
    const sleep = async (ms: number) => {
      waits.push(ms);
    };
    const r = await engine({ retry: { initialDelayMs: 5, maxDelayMs: 20, sleep } }).generate(
      prompt,
    );
    expect(r.text).toBe(' four');
    // retry-after: 1 → one wait of 1000 ms; the backoff alone would have been ≤ 5 ms.
    expect(waits).toEqual([1000]);
  });

  it('a server that never answers ends in LLMTimeoutError', async () => {
    server.enqueue('completions', reply.hang());
    const err = await engine({ timeoutMs: 200, retry: { maxRetries: 0 } })
      .generate(prompt)
      .catch((x: unknown) => x);
    expect(LLMTimeoutError.isInstance(err)).toBe(true);
    expect((err as LLMTimeoutError).timeoutMs).toBe(200);
  });

  it("the caller's abort ends a request the server holds, as LLMAbortError", async () => {
    // With a 10-minute timeout only the abort can end the call.
    const controller = new AbortController();
    server.enqueue(
      'completions',
      reply.dynamic(() => {
        controller.abort(new Error('user stop'));
        return reply.hang();
      }),
    );
    const err = await engine({ timeoutMs: 600_000 })
      .generate({ ...prompt, signal: controller.signal })
      .catch((x: unknown) => x);
    expect(LLMAbortError.isInstance(err)).toBe(true);
    expect(((err as LLMAbortError).reason as Error).message).toBe('user stop');
    expect(server.requestsTo('completions')).toHaveLength(1);
  });
});
