import { createServer } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  LLMMalformedReplyError,
  LLMRefusalError,
  LLMRequestError,
  LLMTimeoutError,
  OpenAIEngine,
  StructuredOutputError,
} from '../src/index.js';
import { OpenAITestServer, reply } from '../src/testing/index.js';

// The fault matrix of the LLM edge (@flowgrpo/agent's OpenAIEngine) against a real
// OpenAI-compatible server on 127.0.0.1 (src/testing/openai-server.ts, also
// `@flowgrpo/agent/testing`): each case scripts one failure, states what the engine must do (retry
// or not, which typed error), and then checks that the run continued — the same engine answers the
// next request — and that nothing leaked: the API key travels only in the Authorization header,
// never in a request body.

const KEY = 'sk-fault-matrix-key';
let server: OpenAITestServer;
beforeEach(async () => {
  server = await OpenAITestServer.start();
});
afterEach(async () => {
  await server.close();
});

const engine = (extra: Partial<ConstructorParameters<typeof OpenAIEngine>[0]> = {}) =>
  new OpenAIEngine({
    model: 'test-model',
    baseURL: server.baseURL,
    apiKey: KEY,
    retry: { maxRetries: 2, initialDelayMs: 1, maxDelayMs: 5 },
    timeoutMs: 5_000,
    ...extra,
  });
const hello = [{ role: 'user' as const, content: 'Say hello' }];
const chatCount = () => server.requestsTo('chat').length;

/** The run continues: the engine's next call answers, and no body ever carried the key. */
async function expectRunContinues(e: OpenAIEngine): Promise<void> {
  server.enqueue('chat', reply.text('still here'));
  expect((await e.generateText(hello)).text).toBe('still here');
  for (const r of server.requests) {
    expect(r.rawBody).not.toContain(KEY);
    if (r.route === 'chat') expect(r.headers.authorization).toBe(`Bearer ${KEY}`);
  }
}

const completion = (message: Record<string, unknown>) => ({
  id: 'c',
  object: 'chat.completion',
  created: 0,
  model: 'test-model',
  choices: [{ index: 0, message: { role: 'assistant', ...message }, finish_reason: 'stop' }],
});

describe('LLM faults', () => {
  it('HTTP 500 then success: retried, the answer arrives', async () => {
    server.enqueue('chat', reply.error(500, 'boom'), reply.text('ok'));
    const e = engine();
    expect((await e.generateText(hello)).text).toBe('ok');
    expect(chatCount()).toBe(2);
    await expectRunContinues(e);
  });

  it('HTTP 500 on every attempt: LLMRequestError with the status and the attempts', async () => {
    server.setFallback('chat', reply.error(503, 'down'));
    const e = engine();
    const err = await e.generateText(hello).catch((x: unknown) => x);
    expect(LLMRequestError.isInstance(err)).toBe(true);
    expect(err).toMatchObject({ status: 503, attempts: 3 });
    server.setFallback('chat', reply.text('unused'));
    await expectRunContinues(e);
  });

  it('HTTP 429 with retry-after: waits as told (0 s here), then succeeds', async () => {
    server.enqueue('chat', reply.rateLimit(0), reply.text('after the limit'));
    const e = engine();
    expect((await e.generateText(hello)).text).toBe('after the limit');
    expect(chatCount()).toBe(2);
    await expectRunContinues(e);
  });

  it('no answer within the timeout: LLMTimeoutError, every attempt counted', async () => {
    server.enqueue('chat', reply.hang(), reply.hang());
    // The 150 ms limit is this call's: the engine's own (5 s) serves the call after it, whose
    // reply must not race a short timer on a loaded machine.
    const e = engine({ retry: { maxRetries: 1, initialDelayMs: 1 } });
    const err = await e.generateText(hello, { timeoutMs: 150 }).catch((x: unknown) => x);
    expect(LLMTimeoutError.isInstance(err)).toBe(true);
    expect(err).toMatchObject({ attempts: 2, timeoutMs: 150 });
    await expectRunContinues(e);
  });

  it('malformed JSON body: retried like a cut body; on every attempt an LLMRequestError', async () => {
    server.enqueue('chat', reply.raw('{"choices": [ {"mess'), reply.text('whole'));
    const e = engine();
    expect((await e.generateText(hello)).text).toBe('whole');
    server.enqueue('chat', reply.raw('nope'), reply.raw('nope'), reply.raw('nope'));
    const err = await e.generateText(hello).catch((x: unknown) => x);
    expect(LLMRequestError.isInstance(err)).toBe(true);
    expect((err as LLMRequestError).attempts).toBe(3);
    await expectRunContinues(e);
  });

  it('a body cut mid-stream: retried', async () => {
    server.enqueue('chat', reply.truncate(), reply.text('complete'));
    const e = engine();
    expect((await e.generateText(hello)).text).toBe('complete');
    await expectRunContinues(e);
  });

  it('schema violation: one corrective call, then StructuredOutputError with the reply', async () => {
    const Verdict = z.object({ correct: z.boolean() });
    server.enqueue('chat', reply.text('{"correct": "maybe"}'), reply.text('{"correct": true}'));
    const e = engine();
    expect((await e.generateObject(hello, Verdict)).object).toEqual({ correct: true });
    server.enqueue('chat', reply.text('{"correct": 1}'), reply.text('not json at all'));
    const err = await e.generateObject(hello, Verdict).catch((x: unknown) => x);
    expect(StructuredOutputError.isInstance(err)).toBe(true);
    expect((err as StructuredOutputError).rawText).toBe('not json at all');
    await expectRunContinues(e);
  });

  it('refusal: LLMRefusalError at once, not retried', async () => {
    server.enqueue('chat', reply.refusal('I will not.'));
    const e = engine();
    const err = await e.generateText(hello).catch((x: unknown) => x);
    expect(LLMRefusalError.isInstance(err)).toBe(true);
    expect(chatCount()).toBe(1);
    await expectRunContinues(e);
  });

  it('content: null without a refusal: retried as malformed, never an empty answer', async () => {
    server.setFallback('chat', reply.json(completion({ content: null })));
    const e = engine();
    const err = await e.generateText(hello).catch((x: unknown) => x);
    expect(LLMMalformedReplyError.isInstance(err)).toBe(true);
    expect((err as LLMMalformedReplyError).attempts).toBe(3);
    // The structured path sees the same error, not '' parsed as JSON.
    const obj = await e.generateObject(hello, z.object({ a: z.string() })).catch((x) => x);
    expect(LLMMalformedReplyError.isInstance(obj)).toBe(true);
    server.setFallback('chat', reply.text('unused'));
    await expectRunContinues(e);
  });

  it('empty choices: retried as malformed, never an empty answer', async () => {
    server.setFallback('chat', reply.json({ ...completion({}), choices: [] }));
    const e = engine();
    const err = await e.generateText(hello).catch((x: unknown) => x);
    expect(LLMMalformedReplyError.isInstance(err)).toBe(true);
    expect((err as Error).message).toMatch(/`choices` is empty/);
    expect(chatCount()).toBe(3);
    server.setFallback('chat', reply.text('unused'));
    await expectRunContinues(e);
  });

  it('connection refused: a typed LLMRequestError with no HTTP status', async () => {
    // A port that was just listening and is closed now: nothing accepts there.
    const probe = createServer();
    await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
    const port = (probe.address() as { port: number }).port;
    await new Promise<void>((r) => probe.close(() => r()));
    const dead = new OpenAIEngine({
      model: 'm',
      baseURL: `http://127.0.0.1:${port}/v1`,
      apiKey: KEY,
      retry: { maxRetries: 1, initialDelayMs: 1, maxDelayMs: 5 },
      timeoutMs: 5_000,
    });
    const err = await dead.generateText(hello).catch((x: unknown) => x);
    expect(LLMRequestError.isInstance(err)).toBe(true);
    expect((err as LLMRequestError).status).toBeUndefined();
    // The engine of the live server is unaffected.
    await expectRunContinues(engine());
  });
});
