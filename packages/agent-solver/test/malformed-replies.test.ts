import { createServer as createHttpServer } from 'node:http';
import { type AddressInfo, createServer } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  LLMMalformedReplyError,
  LLMRequestError,
  LLMResponseTooLargeError,
  OpenAIEngine,
  OpenAIPolicyEngine,
  PolicyResponseError,
} from '../src/index.js';
import { type Behaviour, OpenAITestServer, reply } from '../src/testing/index.js';

// A server that answers 200 with a body that is not what OpenAI's API returns — valid JSON of
// another shape, a field of the wrong type, a proxy's HTML page — against a real HTTP server on
// 127.0.0.1. Each must be retried like a garbled body and, when every attempt gets one, end as
// LLMMalformedReplyError naming what was wrong: never a raw TypeError, an empty answer, or token
// ids silently turned into 0. The engine then goes on answering the next request.

let server: OpenAITestServer;
beforeEach(async () => {
  server = await OpenAITestServer.start({ model: 'base' });
});
afterEach(async () => {
  await server.close();
});

const retry = { maxRetries: 2, initialDelayMs: 1, maxDelayMs: 5 };
const hello = [{ role: 'user' as const, content: 'Say hello' }];

const chatCompletion = (choice: Record<string, unknown>) => ({
  id: 'c',
  object: 'chat.completion',
  created: 0,
  model: 'base',
  choices: [{ index: 0, finish_reason: 'stop', ...choice }],
});

/** Bodies that are not an OpenAI reply at all, and what the error says about each. */
const notAReply: Array<[string, Behaviour, RegExp]> = [
  ['the body null', reply.raw('null'), /the body is null, not a JSON object/],
  ['an empty array', reply.raw('[]'), /the body is an array/],
  ['a JSON string', reply.raw('"x"'), /the body is a string/],
  ['a JSON number', reply.raw('42'), /the body is a number/],
  [
    "a proxy's HTML page",
    reply.raw('<html><body>Gateway login</body></html>', 'text/html'),
    /the body is a string/,
  ],
  ['an object without choices', reply.json({ id: 'c', object: 'x' }), /`choices` is missing/],
  ['choices: null', reply.json({ choices: null }), /`choices` is null/],
  ['choices: []', reply.json({ choices: [] }), /`choices` is empty/],
  ['choices: [null]', reply.json({ choices: [null] }), /`choices\[0\]` is null/],
];

/** First choices whose chat message is unusable. */
const badMessages: Array<[string, Record<string, unknown>, RegExp]> = [
  ['message: null', { message: null }, /`choices\[0\]\.message` is null/],
  ['message missing', {}, /`choices\[0\]\.message` is missing/],
  ['message: "hi"', { message: 'hi' }, /`choices\[0\]\.message` is a string/],
  [
    'content: 42',
    { message: { role: 'assistant', content: 42 } },
    /`message\.content` is a number/,
  ],
  [
    'content: an object',
    { message: { role: 'assistant', content: { text: 'hi' } } },
    /`message\.content` is an object/,
  ],
  [
    'refusal: 7',
    { message: { role: 'assistant', content: null, refusal: 7 } },
    /`message\.refusal` is a number/,
  ],
];

describe('OpenAIEngine: 200 replies of the wrong shape', () => {
  const engine = () =>
    new OpenAIEngine({ model: 'base', baseURL: server.baseURL, retry, timeoutMs: 5_000 });

  async function expectMalformed(
    call: (e: OpenAIEngine) => Promise<unknown>,
    message: RegExp,
  ): Promise<void> {
    const e = engine();
    const before = server.requestsTo('chat').length;
    const err = await call(e).catch((x: unknown) => x);
    expect(LLMMalformedReplyError.isInstance(err), String(err)).toBe(true);
    const malformed = err as LLMMalformedReplyError;
    expect(malformed.code).toBe('LLM_MALFORMED_REPLY');
    expect(malformed.message).toMatch(message);
    expect(malformed.message).toContain(server.baseURL);
    expect(malformed.hint).toMatch(/OpenAI-compatible/);
    expect(malformed.attempts).toBe(3);
    expect(server.requestsTo('chat').length - before).toBe(3);
    // The run goes on: the same engine answers the next request.
    server.setFallback('chat', reply.text('still here'));
    expect((await e.generateText(hello)).text).toBe('still here');
  }

  for (const [name, behaviour, message] of notAReply) {
    it(`${name}: retried, then LLMMalformedReplyError`, async () => {
      server.setFallback('chat', behaviour);
      await expectMalformed((e) => e.generateText(hello), message);
    });
  }

  for (const [name, choice, message] of badMessages) {
    it(`${name}: retried, then LLMMalformedReplyError`, async () => {
      server.setFallback('chat', reply.json(chatCompletion(choice)));
      await expectMalformed((e) => e.generateText(hello), message);
    });
  }

  it('structured output sees the same typed error', async () => {
    server.setFallback('chat', reply.raw('null'));
    await expectMalformed(
      (e) => e.generateObject(hello, z.object({ a: z.string() })),
      /the body is null/,
    );
  });

  it('one malformed reply, then a good one: the answer arrives', async () => {
    server.enqueue('chat', reply.raw('[]'), reply.text('whole'));
    expect((await engine().generateText(hello)).text).toBe('whole');
    expect(server.requestsTo('chat')).toHaveLength(2);
  });

  it('usage counts of the wrong type count as absent, never as strings in the totals', async () => {
    server.enqueue(
      'chat',
      reply.json({
        ...chatCompletion({ message: { role: 'assistant', content: 'hi' } }),
        model: 42,
        usage: { prompt_tokens: '5', completion_tokens: -1, total_tokens: 2.5 },
      }),
      reply.json({
        ...chatCompletion({ message: { role: 'assistant', content: 'again' } }),
        usage: 'lots',
      }),
    );
    const e = engine();
    const first = await e.generateText(hello);
    expect(first).toMatchObject({ text: 'hi', model: 'base' });
    expect(first.usage).toEqual({ promptTokens: 0, completionTokens: 0, totalTokens: 0 });
    expect((await e.generateText(hello)).text).toBe('again');
    expect(e.usage).toEqual({ promptTokens: 0, completionTokens: 0, totalTokens: 0 });
  });
});

describe('OpenAIPolicyEngine: 200 replies of the wrong shape', () => {
  const policy = () =>
    new OpenAIPolicyEngine({ model: 'base', baseURLs: server.baseURL, retry, timeoutMs: 5_000 });
  const good = reply.tokens(' four', { ids: [3040, 7], logprobs: [-0.25, -0.5], promptIds: [1] });

  async function expectMalformed(
    route: 'completions' | 'chat',
    behaviour: Behaviour,
    message: RegExp,
  ): Promise<void> {
    server.setFallback(route, behaviour);
    const p = policy();
    const request =
      route === 'chat' ? { messages: hello, maxTokens: 4 } : { promptTokens: [1], maxTokens: 4 };
    const err = await p.generate(request).catch((x: unknown) => x);
    expect(LLMMalformedReplyError.isInstance(err), String(err)).toBe(true);
    expect((err as Error).message).toMatch(message);
    expect((err as LLMMalformedReplyError).attempts).toBe(3);
    expect(server.requestsTo(route)).toHaveLength(3);
    // The engine answers the next request (the server's cooldown does not lock out a lone one).
    server.setFallback(route, good);
    const ok = await p.generate(request);
    expect(Array.from(ok.actionTokens)).toEqual([3040, 7]);
  }

  for (const [name, behaviour, message] of notAReply) {
    it(`/completions, ${name}: retried, then LLMMalformedReplyError`, async () => {
      await expectMalformed('completions', behaviour, message);
    });
  }

  it('/chat/completions, the body null: retried, then LLMMalformedReplyError', async () => {
    await expectMalformed('chat', reply.raw('null'), /the body is null/);
  });

  const completionChoice = (choice: Record<string, unknown>) =>
    reply.json({ model: 'base', choices: [{ text: 'x', finish_reason: 'stop', ...choice }] });
  const badCompletions: Array<[string, Record<string, unknown>, RegExp]> = [
    ['logprobs: "x"', { logprobs: 'x' }, /`choices\[0\]\.logprobs` is a string/],
    [
      'logprobs.tokens: a string',
      { logprobs: { tokens: 'token_id:1', token_logprobs: [-1] } },
      /`choices\[0\]\.logprobs\.tokens` is a string/,
    ],
    [
      'logprobs.token_logprobs: strings',
      { logprobs: { tokens: ['token_id:1'], token_logprobs: ['-1'] } },
      /`choices\[0\]\.logprobs\.token_logprobs` is an array, not an array of numbers/,
    ],
    [
      'token_ids: strings',
      { logprobs: { tokens: ['a'], token_logprobs: [-1] }, token_ids: ['5'] },
      /`choices\[0\]\.token_ids` is an array, not an array of token ids/,
    ],
    [
      'token_ids: a negative id',
      { logprobs: { tokens: ['a'], token_logprobs: [-1] }, token_ids: [-3] },
      /`choices\[0\]\.token_ids`/,
    ],
    [
      'prompt_token_ids: an id past int32',
      { logprobs: { tokens: ['token_id:1'], token_logprobs: [-1] }, prompt_token_ids: [2 ** 40] },
      /`choices\[0\]\.prompt_token_ids`/,
    ],
    ['text: 5', { text: 5 }, /`choices\[0\]\.text` is a number/],
  ];
  for (const [name, choice, message] of badCompletions) {
    it(`/completions, ${name}: retried, then LLMMalformedReplyError`, async () => {
      await expectMalformed('completions', completionChoice(choice), message);
    });
  }

  const chatChoice = (choice: Record<string, unknown>) =>
    reply.json({
      model: 'base',
      prompt_token_ids: [1],
      choices: [{ finish_reason: 'stop', ...choice }],
    });
  const badChats: Array<[string, Record<string, unknown>, RegExp]> = [
    ['message: 3', { message: 3 }, /`choices\[0\]\.message` is a number/],
    [
      'content: 3',
      { message: { content: 3 }, logprobs: { content: [] } },
      /`choices\[0\]\.message\.content` is a number/,
    ],
    [
      'logprobs.content: an object',
      { message: { content: 'x' }, logprobs: { content: { token: 'x' } } },
      /`choices\[0\]\.logprobs\.content` is an object/,
    ],
    [
      'logprobs.content entries without a token',
      { message: { content: 'x' }, logprobs: { content: [{ logprob: -1 }] } },
      /`choices\[0\]\.logprobs\.content` is an array, not an array of \{token/,
    ],
  ];
  for (const [name, choice, message] of badChats) {
    it(`/chat/completions, ${name}: retried, then LLMMalformedReplyError`, async () => {
      await expectMalformed('chat', chatChoice(choice), message);
    });
  }

  it('a token_id past int32 is not wrapped into another id: the sample is refused', async () => {
    server.enqueue(
      'completions',
      completionChoice({ logprobs: { tokens: ['token_id:4294967297'], token_logprobs: [-1] } }),
    );
    const err = await policy()
      .generate({ promptTokens: [1], maxTokens: 1 })
      .catch((x: unknown) => x);
    expect(PolicyResponseError.isInstance(err), String(err)).toBe(true);
    expect((err as Error).message).toMatch(/cannot tell the sampled token ids/);
  });

  it('with two servers, a malformed reply sends the retry to the other one', async () => {
    const other = await OpenAITestServer.start({ model: 'base' });
    try {
      server.setFallback('completions', reply.raw('null'));
      other.setFallback('completions', good);
      const p = new OpenAIPolicyEngine({
        model: 'base',
        baseURLs: [server.baseURL, other.baseURL],
        balance: 'round-robin',
        retry,
        timeoutMs: 5_000,
      });
      for (let i = 0; i < 3; i++) {
        const r = await p.generate({ promptTokens: [1], maxTokens: 4 });
        expect(Array.from(r.actionTokens)).toEqual([3040, 7]);
      }
      // The garbling server was tried once, then skipped for its cooldown.
      expect(server.requestsTo('completions')).toHaveLength(1);
      expect(other.requestsTo('completions')).toHaveLength(3);
    } finally {
      await other.close();
    }
  });
});

// Below the JSON: replies that break HTTP itself or arrive in another framing, from a raw TCP
// server that writes exactly the bytes given. Each ends as a typed LLM error after its retries.
describe('replies broken below the JSON', () => {
  const head = (extra: string) =>
    `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n${extra}\r\n`;
  const cases: Array<[string, string, RegExp]> = [
    ['an empty body', head('content-length: 0\r\n'), /LLM_MALFORMED_REPLY: .*the body is empty/],
    [
      'a server-sent event stream where JSON was asked for',
      'HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\ndata: {"choices":[{"delta":{"content":"h"}}]}\n\n',
      /LLM_MALFORMED_REPLY: .*the body is a string/,
    ],
    [
      'a gzip body that does not decompress',
      `${head('content-encoding: gzip\r\ncontent-length: 10\r\n')}0123456789`,
      /LLM_REQUEST_ERROR: /,
    ],
    [
      'a broken chunked encoding',
      `${head('transfer-encoding: chunked\r\n')}ZZ\r\nabc\r\n0\r\n\r\n`,
      /LLM_REQUEST_ERROR: /,
    ],
    ['a reply that is not HTTP', 'hello there\r\n\r\n', /LLM_REQUEST_ERROR: /],
    [
      '100,000 nested arrays',
      `${head('content-length: 200000\r\n')}${'['.repeat(100_000)}${']'.repeat(100_000)}`,
      /LLM_MALFORMED_REPLY: .*the body is an array/,
    ],
  ];
  for (const [name, bytes, expected] of cases) {
    it(`${name}: a typed error for both engines`, async () => {
      let connections = 0;
      const raw = createServer((socket) => {
        connections++;
        socket.on('error', () => {});
        socket.once('data', () => socket.end(bytes));
      });
      await new Promise<void>((r) => raw.listen(0, '127.0.0.1', r));
      const baseURL = `http://127.0.0.1:${(raw.address() as AddressInfo).port}/v1`;
      try {
        const chat = new OpenAIEngine({ model: 'm', baseURL, retry, timeoutMs: 5_000 });
        const policy = new OpenAIPolicyEngine({
          model: 'm',
          baseURLs: baseURL,
          retry,
          timeoutMs: 5_000,
        });
        for (const call of [
          () => chat.generateText(hello),
          () => policy.generate({ promptTokens: [1], maxTokens: 2 }),
        ]) {
          const err = await call().catch((x: unknown) => x);
          expect(LLMRequestError.isInstance(err), String(err)).toBe(true);
          expect(`${(err as LLMRequestError).code}: ${(err as Error).message}`).toMatch(expected);
          expect((err as LLMRequestError).attempts).toBe(3);
        }
        expect(connections).toBeGreaterThanOrEqual(6);
      } finally {
        await new Promise<void>((r) => raw.close(() => r()));
      }
    });
  }
});

describe('a reply without end', () => {
  it('is cut at maxResponseBytes: LLM_RESPONSE_TOO_LARGE at once, not retried', async () => {
    // A 200 whose JSON string never closes: the server writes 64 KiB chunks until the client
    // hangs up, and counts what it managed to send.
    let sent = 0;
    let requests = 0;
    const endless = createHttpServer((req, res) => {
      requests++;
      req.resume();
      res.writeHead(200, { 'content-type': 'application/json' });
      const chunk = Buffer.alloc(64 * 1024, 'a');
      res.write('{"choices": [{"message": {"content": "');
      const pump = () => {
        let more = true;
        while (!res.destroyed && more) {
          more = res.write(chunk);
          sent += chunk.length;
        }
        if (!res.destroyed) res.once('drain', pump);
      };
      res.on('close', () => res.removeAllListeners('drain'));
      pump();
    });
    await new Promise<void>((r) => endless.listen(0, '127.0.0.1', r));
    const baseURL = `http://127.0.0.1:${(endless.address() as AddressInfo).port}/v1`;
    try {
      const maxResponseBytes = 1024 * 1024;
      const chat = new OpenAIEngine({
        model: 'm',
        baseURL,
        retry,
        timeoutMs: 20_000,
        maxResponseBytes,
      });
      const policy = new OpenAIPolicyEngine({
        model: 'm',
        baseURLs: baseURL,
        retry,
        timeoutMs: 20_000,
        maxResponseBytes,
      });
      for (const call of [
        () => chat.generateText(hello),
        () => policy.generate({ promptTokens: [1], maxTokens: 2 }),
      ]) {
        const err = await call().catch((x: unknown) => x);
        expect(LLMResponseTooLargeError.isInstance(err), String(err)).toBe(true);
        expect((err as LLMResponseTooLargeError).code).toBe('LLM_RESPONSE_TOO_LARGE');
        expect((err as Error).message).toMatch(/larger than 1048576 bytes/);
      }
      // One request per engine: a reply that is too large is not asked for again.
      expect(requests).toBe(2);
    } finally {
      endless.closeAllConnections();
      await new Promise<void>((r) => endless.close(() => r()));
    }
    // The client hung up after about its limit: the server did not stream on to the timeout.
    expect(sent).toBeGreaterThan(1024 * 1024);
    expect(sent).toBeLessThan(256 * 1024 * 1024);
  });
});
