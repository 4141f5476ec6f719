// The policy gateway over a real tiny model on the CPU EP, through real HTTP on 127.0.0.1: the
// OpenAI wire format (JSON and SSE), the errors and limits, LoRA adapters by model name, the
// recording of calls (token ids, logprobs, chains), rewards, and the upstream (vLLM) mode with
// another gateway playing vLLM.
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { OpenAIPolicyEngine } from '@flowgrpo/agent';
import type { TinyModel } from '@flowgrpo/models';
import { afterAll, beforeAll, describe, expect, it, onTestFinished, vi } from 'vitest';
import {
  chainCalls,
  createPolicyGateway,
  EnginePolicyHost,
  LocalPolicyHost,
  type PolicyGateway,
  ROLLOUT_HEADER,
  rolloutTrajectory,
  UpstreamPolicyHost,
} from '../src/index.js';
import {
  randomAdapter,
  ScriptedEngine,
  tinyGatewayModel,
  writeAdapter,
} from './support/gateway-fixtures.js';

const root = mkdtempSync(join(tmpdir(), 'flowgrpo-gateway-'));
let model: TinyModel;
let host: LocalPolicyHost;
let gw: PolicyGateway;
let adapterDir: string;

beforeAll(async () => {
  const t = await tinyGatewayModel(root);
  model = t.model;
  adapterDir = await writeAdapter(join(root, 'adapter-a'), model, randomAdapter(model, 'a'));
  host = await LocalPolicyHost.open({
    artifacts: t.artifacts,
    tokenizer: model.tokenizer,
    baseModel: 'tiny',
    adapters: { planner: adapterDir },
  });
  gw = await createPolicyGateway({ host, defaultMaxTokens: 16 });
}, 120_000);

afterAll(async () => {
  await gw?.close();
  await host?.close();
  rmSync(root, { recursive: true, force: true });
});

async function post(path: string, body: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${gw.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json: Json;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, json };
}

// biome-ignore lint/suspicious/noExplicitAny: response bodies are read field by field by the assertions
type Json = any;

const user = (content: string) => ({ role: 'user', content });

describe('the gateway over local artifacts', () => {
  it('listens on 127.0.0.1 by default and lists the base model and its adapters', async () => {
    expect(gw.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const res = await fetch(`${gw.baseURL}/models`);
    const body = (await res.json()) as { data: { id: string; parent: string | null }[] };
    expect(body.data.map((m) => [m.id, m.parent])).toEqual([
      ['tiny', null],
      ['planner', 'tiny'],
    ]);
  });

  it('serves chat completions and records the prompt ids, sampled ids and logprobs it returned', async () => {
    const messages = [user('What is 2+3?')];
    const r = await post(
      '/v1/chat/completions',
      { model: 'tiny', messages, max_tokens: 12, seed: 5, logprobs: true, return_token_ids: true },
      { [ROLLOUT_HEADER]: 'r-chat' },
    );
    expect(r.status).toBe(200);
    expect(r.headers.get(ROLLOUT_HEADER)).toBe('r-chat');
    expect(r.json.object).toBe('chat.completion');
    const choice = r.json.choices[0];
    expect(choice.message.role).toBe('assistant');
    const rollout = gw.recorder.get('r-chat')!;
    expect(rollout.calls).toHaveLength(1);
    const call = rollout.calls[0]!;
    // The prompt is the chat template's rendering, encoded (what the tokenizer says it is).
    const expected = model.tokenizer.encode(
      model.tokenizer.applyChatTemplate(messages as never, { addGenerationPrompt: true }),
    );
    expect(Array.from(call.promptTokens)).toEqual(Array.from(expected));
    expect(r.json.prompt_token_ids).toEqual(Array.from(expected));
    expect(choice.token_ids).toEqual(Array.from(call.completionTokens));
    expect(choice.logprobs.content.map((c: { logprob: number }) => c.logprob)).toEqual(
      Array.from(call.logprobs),
    );
    expect(r.json.usage.completion_tokens).toBe(call.completionTokens.length);
    expect(call.model).toBe('tiny');
  });

  it('samples the same tokens for the same seed, and other tokens through an adapter', async () => {
    const body = { messages: [user('hello')], max_tokens: 12, seed: 11, return_token_ids: true };
    const a = await post('/v1/chat/completions', { ...body, model: 'tiny' });
    const b = await post('/v1/chat/completions', { ...body, model: 'tiny' });
    const c = await post('/v1/chat/completions', { ...body, model: 'planner' });
    expect(a.json.choices[0].token_ids).toEqual(b.json.choices[0].token_ids);
    expect(c.json.choices[0].token_ids).not.toEqual(a.json.choices[0].token_ids);
  });

  it('streams SSE chunks whose deltas add up to the non-streamed reply', async () => {
    const body = { model: 'tiny', messages: [user('stream me')], max_tokens: 12, seed: 3 };
    const whole = await post('/v1/chat/completions', body);
    const res = await fetch(`${gw.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ...body, stream: true, stream_options: { include_usage: true } }),
    });
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const events = (await res.text())
      .split('\n\n')
      .filter((e) => e.startsWith('data: '))
      .map((e) => e.slice(6));
    expect(events.at(-1)).toBe('[DONE]');
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e));
    expect(chunks.every((c) => c.object === 'chat.completion.chunk')).toBe(true);
    const text = chunks.map((c) => c.choices[0]?.delta?.content ?? '').join('');
    expect(text).toBe(whole.json.choices[0].message.content);
    expect(chunks.at(-2).choices[0].finish_reason).toBe(whole.json.choices[0].finish_reason);
    expect(chunks.at(-1).usage).toEqual(whole.json.usage);
  });

  it('serves /v1/completions from text or token ids', async () => {
    const ids = Array.from(model.tokenizer.encode('Once upon'));
    const r = await post('/v1/completions', {
      model: 'tiny',
      prompt: ids,
      max_tokens: 8,
      seed: 1,
      logprobs: 1,
      return_token_ids: true,
    });
    expect(r.status).toBe(200);
    expect(r.json.object).toBe('text_completion');
    expect(r.json.choices[0].prompt_token_ids).toEqual(ids);
    expect(r.json.choices[0].logprobs.token_logprobs).toHaveLength(
      r.json.choices[0].token_ids.length,
    );
    const t = await post('/v1/completions', {
      model: 'tiny',
      prompt: 'Once upon',
      max_tokens: 8,
      seed: 1,
    });
    expect(t.json.choices[0].text).toBe(r.json.choices[0].text);
  });

  it('loads and unloads LoRA adapters with vLLM routes', async () => {
    const dir = await writeAdapter(join(root, 'adapter-b'), model, randomAdapter(model, 'b'));
    const load = await post('/v1/load_lora_adapter', { lora_name: 'coder', lora_path: dir });
    expect(load.status).toBe(200);
    expect(load.text).toContain("'coder'");
    const again = await post('/v1/load_lora_adapter', { lora_name: 'coder', lora_path: dir });
    expect(again.status).toBe(400);
    expect(again.json.error.code).toBe('adapter_exists');
    const gen = await post('/v1/chat/completions', {
      model: 'coder',
      messages: [user('x')],
      max_tokens: 4,
    });
    expect(gen.status).toBe(200);
    expect((await post('/v1/unload_lora_adapter', { lora_name: 'coder' })).status).toBe(200);
    const gone = await post('/v1/chat/completions', { model: 'coder', messages: [user('x')] });
    expect(gone.status).toBe(404);
    const bad = await post('/v1/load_lora_adapter', {
      lora_name: 'x',
      lora_path: join(root, 'nope'),
    });
    expect(bad.status).toBe(400);
    expect(bad.json.error.param).toBe('lora_path');
  });
});

describe('malformed requests get OpenAI-style errors', () => {
  const cases: [string, string, unknown, number, string | null, string | null][] = [
    ['bad JSON', '/v1/chat/completions', '{"model": ', 400, null, 'invalid_json'],
    [
      'no messages',
      '/v1/chat/completions',
      { model: 'tiny' },
      400,
      'messages',
      'missing_required_parameter',
    ],
    [
      'a message without content',
      '/v1/chat/completions',
      { model: 'tiny', messages: [{ role: 'user' }] },
      400,
      'messages.0.content',
      'missing_required_parameter',
    ],
    [
      'empty messages',
      '/v1/chat/completions',
      { model: 'tiny', messages: [] },
      400,
      'messages',
      'invalid_value',
    ],
    [
      'bad role',
      '/v1/chat/completions',
      { model: 'tiny', messages: [{ role: 'robot', content: 'x' }] },
      400,
      'messages.0.role',
      'invalid_value',
    ],
    [
      'unknown model',
      '/v1/chat/completions',
      { model: 'gpt-9', messages: [user('x')] },
      404,
      'model',
      'model_not_found',
    ],
    [
      'n = 2',
      '/v1/chat/completions',
      { model: 'tiny', messages: [user('x')], n: 2 },
      400,
      'n',
      'invalid_value',
    ],
    [
      'a penalty',
      '/v1/chat/completions',
      { model: 'tiny', messages: [user('x')], presence_penalty: 0.5 },
      400,
      'presence_penalty',
      'invalid_value',
    ],
    [
      'temperature 3',
      '/v1/chat/completions',
      { model: 'tiny', messages: [user('x')], temperature: 3 },
      400,
      'temperature',
      'invalid_value',
    ],
    [
      'named tool not given',
      '/v1/chat/completions',
      {
        model: 'tiny',
        messages: [user('x')],
        tool_choice: { type: 'function', function: { name: 'f' } },
      },
      400,
      'tool_choice',
      'invalid_value',
    ],
    [
      'prompt too long',
      '/v1/completions',
      { model: 'tiny', prompt: 'y'.repeat(1100) },
      400,
      'messages',
      'context_length_exceeded',
    ],
    [
      'token id out of range',
      '/v1/completions',
      { model: 'tiny', prompt: [1, 99999] },
      400,
      null,
      'invalid_request',
    ],
    ['unknown route', '/v1/embeddings', { model: 'tiny', input: 'x' }, 404, null, 'unknown_url'],
    [
      'reward for no rollout',
      '/v1/rollouts/none/reward',
      { reward: 1 },
      404,
      'rollout_id',
      'rollout_not_found',
    ],
  ];
  it.each(cases)('%s', async (_name, path, body, status, param, code) => {
    const r = await post(path, body);
    expect(r.status).toBe(status);
    expect(Object.keys(r.json.error).sort()).toEqual(['code', 'message', 'param', 'type']);
    expect(r.json.error.param).toBe(param);
    expect(r.json.error.code).toBe(code);
    expect(typeof r.json.error.message).toBe('string');
    expect(r.json.error.type).toBe(
      status === 404 && code !== 'model_not_found' ? 'not_found_error' : 'invalid_request_error',
    );
  });

  it('GET on a POST route is 405', async () => {
    const res = await fetch(`${gw.baseURL}/chat/completions`);
    expect(res.status).toBe(405);
  });

  it("a malformed %-escape in the path is the client's 400, not a 500", async () => {
    // decodeURIComponent throws on these (a cut UTF-8 sequence, a non-hex escape, a bare %).
    for (const path of ['/v1/rollouts/%E0%A4%A', '/rollouts/%ZZ/v1/models', '/v1/models/%']) {
      const res = await fetch(`${gw.url}${path}`);
      expect(res.status, path).toBe(400);
      expect(((await res.json()) as Json).error).toMatchObject({
        type: 'invalid_request_error',
        code: 'invalid_url',
      });
    }
  });
});

describe('limits and the API key', () => {
  it('refuses a body over the size limit (413) and a wrong or missing key (401)', async () => {
    const engine = new ScriptedEngine(model.tokenizer, ['ok']);
    const small = await createPolicyGateway({
      host: new EnginePolicyHost({ tokenizer: model.tokenizer, engines: { policy: engine } }),
      apiKey: 'sk-test',
      maxBodyBytes: 1024,
    });
    try {
      const call = (headers: Record<string, string>, content = 'hi') =>
        fetch(`${small.baseURL}/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...headers },
          body: JSON.stringify({ model: 'policy', messages: [user(content)] }),
        });
      const none = await call({});
      expect(none.status).toBe(401);
      expect(((await none.json()) as Json).error.code).toBe('invalid_api_key');
      expect((await call({ authorization: 'Bearer sk-wrong' })).status).toBe(401);
      expect((await call({ authorization: 'Bearer sk-test' })).status).toBe(200);
      const big = await call({ authorization: 'Bearer sk-test' }, 'x'.repeat(2000));
      expect(big.status).toBe(413);
      expect(((await big.json()) as Json).error.code).toBe('request_too_large');
      expect((await fetch(`${small.url}/health`)).status).toBe(200);
    } finally {
      await small.close();
    }
  });

  // A client that declares or streams a body over the limit must read the 413 (OpenAI's error
  // body, code request_too_large) and then see the connection end, not a reset: the server keeps
  // reading and dropping the body after answering (refuseBody).
  describe('a body over the limit', () => {
    let g: PolicyGateway;
    beforeAll(async () => {
      const engine = new ScriptedEngine(model.tokenizer, ['ok']);
      g = await createPolicyGateway({
        host: new EnginePolicyHost({ tokenizer: model.tokenizer, engines: { policy: engine } }),
        maxBodyBytes: 1024,
      });
    });
    afterAll(() => g.close());

    const head = (length: number, extra = '') =>
      `POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n${extra}\r\n`;
    /** The status line and the JSON body of a raw HTTP/1.1 answer. */
    const parse = (raw: string) => ({
      status: raw.slice(0, raw.indexOf('\r\n')),
      headers: raw.slice(0, raw.indexOf('\r\n\r\n')).toLowerCase(),
      body: JSON.parse(raw.slice(raw.indexOf('\r\n\r\n') + 4)) as Json,
    });

    it('declared in Content-Length (50 MB): 413, then the whole body is read and the connection ends', async () => {
      const declared = 50 * 2 ** 20;
      const sock = connect(g.port, '127.0.0.1');
      // Nothing is read until the whole body is sent: a server that closes with the body unread
      // resets the connection, and the reset discards the unread answer (what it did before).
      sock.pause();
      const errors: Error[] = [];
      sock.on('error', (e) => errors.push(e));
      await once(sock, 'connect');
      sock.write(head(declared));
      const chunk = Buffer.alloc(2 ** 20, 'x');
      for (let sent = 0; sent < declared && !sock.destroyed; sent += chunk.length)
        await new Promise<void>((resolve) => sock.write(chunk, () => resolve()));
      const raw: Buffer[] = [];
      sock.on('data', (d: Buffer) => raw.push(d));
      let ended = false;
      sock.on('end', () => {
        ended = true;
      });
      const closed = once(sock, 'close');
      sock.resume();
      await closed;
      expect(errors).toEqual([]);
      expect(ended).toBe(true);
      const answer = parse(Buffer.concat(raw).toString('utf8'));
      expect(answer.status).toBe('HTTP/1.1 413 Payload Too Large');
      expect(answer.headers).toContain('connection: close');
      expect(answer.body.error).toMatchObject({
        type: 'invalid_request_error',
        code: 'request_too_large',
        param: null,
      });
      expect(answer.body.error.message).toContain('larger than 1024 bytes');
    });

    it('declared with Expect: 100-continue: 413 without a 100 Continue, so no body is sent', async () => {
      const sock = connect(g.port, '127.0.0.1');
      await once(sock, 'connect');
      sock.write(head(50 * 2 ** 20, 'Expect: 100-continue\r\n'));
      const raw: Buffer[] = [];
      sock.on('data', (d: Buffer) => raw.push(d));
      // The answer is complete when its Content-Length bytes are in (the server then waits for
      // the body this client will not send; the client closes).
      const full = () => {
        const text = Buffer.concat(raw).toString('utf8');
        const at = text.indexOf('\r\n\r\n');
        const length = Number(/content-length: (\d+)/i.exec(text)?.[1]);
        return at >= 0 && Buffer.byteLength(text) - at - 4 >= length;
      };
      while (!full()) await once(sock, 'data');
      const answer = parse(Buffer.concat(raw).toString('utf8'));
      expect(answer.status).toBe('HTTP/1.1 413 Payload Too Large');
      expect(answer.body.error.code).toBe('request_too_large');
      sock.destroy();
    });

    it('streamed (chunked) past the limit: 413 while the client is still sending', async () => {
      const answer = await new Promise<{ status: number; text: string }>((resolve, reject) => {
        const req = request(`${g.baseURL}/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
        });
        let answered = false;
        req.on('error', reject);
        req.on('response', (res) => {
          answered = true;
          const parts: Buffer[] = [];
          res.on('data', (d: Buffer) => parts.push(d));
          res.on('end', () => {
            resolve({ status: res.statusCode!, text: Buffer.concat(parts).toString('utf8') });
            req.destroy();
          });
        });
        // No Content-Length: Node sends the body chunked, 64 KiB at a time, until the answer.
        const chunk = Buffer.alloc(64 * 1024, 'x');
        const pump = () => {
          while (!answered && req.write(chunk));
          if (!answered) req.once('drain', pump);
        };
        pump();
      });
      expect(answer.status).toBe(413);
      expect((JSON.parse(answer.text) as Json).error.code).toBe('request_too_large');
    });

    it('closing the gateway ends a connection still sending a refused body', async () => {
      // The client stops sending part-way through a declared 50 MB body and holds the connection
      // open: the gateway would read (and drop) the rest for up to 30 s, but close() ends it.
      // The 30 s timer is faked and never fires: only close() can end the connection here.
      const own = await createPolicyGateway({
        host: new EnginePolicyHost({ tokenizer: model.tokenizer, engines: {} }),
        maxBodyBytes: 1024,
      });
      vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
      onTestFinished(() => {
        vi.useRealTimers();
      });
      const sock = connect(own.port, '127.0.0.1');
      await once(sock, 'connect');
      sock.write(head(50 * 2 ** 20));
      sock.write(Buffer.alloc(64 * 1024, 'x'));
      const raw: Buffer[] = [];
      sock.on('data', (d: Buffer) => raw.push(d));
      const ended = once(sock, 'end');
      while (!Buffer.concat(raw).toString('utf8').includes('request_too_large'))
        await once(sock, 'data');
      await own.close();
      await ended;
      expect(parse(Buffer.concat(raw).toString('utf8')).status).toBe(
        'HTTP/1.1 413 Payload Too Large',
      );
      sock.destroy();
    });

    it('a body within the limit after Expect: 100-continue is read and answered', async () => {
      const body = JSON.stringify({ model: 'policy', messages: [user('hi')] });
      const sock = connect(g.port, '127.0.0.1');
      await once(sock, 'connect');
      sock.write(head(Buffer.byteLength(body), 'Expect: 100-continue\r\n'));
      const [first] = (await once(sock, 'data')) as [Buffer];
      expect(first.toString('utf8')).toMatch(/^HTTP\/1\.1 100 Continue\r\n/);
      const raw: Buffer[] = [];
      sock.on('data', (d: Buffer) => raw.push(d));
      sock.write(body);
      while (!Buffer.concat(raw).toString('utf8').includes('"finish_reason"'))
        await once(sock, 'data');
      expect(Buffer.concat(raw).toString('utf8')).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
      sock.destroy();
    });
  });

  it('answers 429 when every generation slot and the queue are taken', async () => {
    const engine = new ScriptedEngine(model.tokenizer, ['ok']);
    let open!: () => void;
    engine.gate = new Promise((r) => {
      open = r;
    });
    const g = await createPolicyGateway({
      host: new EnginePolicyHost({ tokenizer: model.tokenizer, engines: { policy: engine } }),
      maxConcurrency: 1,
      maxQueue: 0,
    });
    try {
      const body = JSON.stringify({ model: 'policy', messages: [user('x')] });
      const init = { method: 'POST', headers: { 'content-type': 'application/json' }, body };
      const first = fetch(`${g.baseURL}/chat/completions`, init);
      // The first request holds the only slot once the engine has seen it.
      while (engine.seen.length === 0) await new Promise((r) => setTimeout(r, 5));
      const second = await fetch(`${g.baseURL}/chat/completions`, init);
      expect(second.status).toBe(429);
      expect(((await second.json()) as Json).error.type).toBe('rate_limit_error');
      open();
      expect((await first).status).toBe(200);
    } finally {
      await g.close();
    }
  });
});

describe('recording rollouts', () => {
  it('does not record a call whose client went away before the reply', async () => {
    const engine = new ScriptedEngine(model.tokenizer, ['late']);
    let open!: () => void;
    engine.gate = new Promise((r) => {
      open = r;
    });
    const g = await createPolicyGateway({
      host: new EnginePolicyHost({ tokenizer: model.tokenizer, engines: { policy: engine } }),
    });
    try {
      const abort = new AbortController();
      const request = fetch(`${g.rolloutBaseURL('gone')}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'policy', messages: [user('x')] }),
        signal: abort.signal,
      }).catch((e: Error) => e);
      while (engine.seen.length === 0) await new Promise((r) => setTimeout(r, 5));
      abort.abort();
      expect(await request).toBeInstanceOf(Error);
      // The server has seen the closed socket (it aborts the request's signal); then the
      // generation ends.
      while (!engine.seen[0]!.signal?.aborted) await new Promise((r) => setTimeout(r, 5));
      open();
      while ((g.recorder.get('gone')?.inFlight ?? 0) > 0)
        await new Promise((r) => setTimeout(r, 5));
      expect(g.recorder.get('gone')!.calls).toEqual([]);
    } finally {
      await g.close();
    }
  });

  it('groups calls by header, /rollouts/<id>/v1 base URL or metadata, and attaches rewards', async () => {
    const body = { model: 'tiny', messages: [user('q')], max_tokens: 3 };
    await post('/v1/chat/completions', body, { [ROLLOUT_HEADER]: 'g1' });
    await post('/rollouts/g1/v1/chat/completions', body);
    await post('/v1/chat/completions', { ...body, metadata: { rollout_id: 'g1' } });
    expect(gw.recorder.get('g1')!.calls.map((c) => c.index)).toEqual([0, 1, 2]);
    const rew = await post('/v1/rollouts/g1/reward', { reward: 0.75, final_answer: '5' });
    expect(rew.status).toBe(200);
    const got = (await (await fetch(`${gw.baseURL}/rollouts/g1`)).json()) as Json;
    expect(got.reward).toBe(0.75);
    expect(got.calls).toHaveLength(3);
    expect(got.calls[0].prompt_token_ids.length).toBeGreaterThan(0);
    const bad = await post('/v1/chat/completions', body, { [ROLLOUT_HEADER]: 'bad id!' });
    expect(bad.status).toBe(400);
  });

  it('merges a call that extends the previous prompt + completion into one chain (segments)', async () => {
    // Scripted replies: ids are exactly what the tokenizer gives, so the template's rendering of
    // the conversation continues the previous prompt + completion token for token.
    const engine = new ScriptedEngine(model.tokenizer, ['first answer', 'second answer']);
    const g = await createPolicyGateway({
      host: new EnginePolicyHost({ tokenizer: model.tokenizer, engines: { policy: engine } }),
    });
    try {
      const url = `${g.rolloutBaseURL('conv')}/chat/completions`;
      const send = (messages: unknown[]) =>
        fetch(url, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'policy', messages }),
        }).then((r) => r.json() as Promise<Json>);
      const m1 = [user('hi')];
      const r1 = await send(m1);
      const m2 = [...m1, r1.choices[0].message, user('and then?')];
      await send(m2);
      // An unrelated conversation in the same rollout starts its own chain.
      await send([user('something else')]);
      const rollout = g.recorder.get('conv')!;
      const chains = chainCalls(rollout.calls);
      expect(chains.map((c) => c.calls.map((x) => x.index))).toEqual([[0, 1], [2]]);
      const t = rolloutTrajectory(
        { ...rollout, calls: rollout.calls.slice(0, 2) },
        { queryId: 'q', groupId: 'g', finalAnswer: 'x' },
      );
      expect(t.segments!.map((s) => s.kind)).toEqual(['prompt', 'action', 'observation', 'action']);
      const tok = model.tokenizer;
      // The observation is the markup and the user turn between the two assistant replies.
      expect(tok.decode(t.segments![2]!.tokens)).toBe(
        '\n<|im_start|>user\nand then?<|im_end|>\n<|im_start|>assistant\n',
      );
      const all = rolloutTrajectory(rollout, { queryId: 'q', groupId: 'g' });
      expect(all.turns).toHaveLength(3);
      expect(all.segments).toBeUndefined();
    } finally {
      await g.close();
    }
  });
});

describe('tools in the Hermes <tool_call> format on a template without tools (ChatML)', () => {
  const tools = [
    {
      type: 'function',
      function: {
        name: 'lookup',
        description: 'Looks a fact up',
        parameters: {
          type: 'object',
          properties: { query: { type: 'string' } },
          required: ['query'],
        },
      },
    },
  ];
  const callText =
    '<tool_call>\n{"name": "lookup", "arguments": {"query":  "year of X"}}\n</tool_call>';

  it('renders tools into the prompt, parses tool calls back, keeps continuity through the tool result', async () => {
    const engine = new ScriptedEngine(model.tokenizer, [
      `Let me look.\n${callText}`,
      'It was 1850.',
    ]);
    const g = await createPolicyGateway({
      host: new EnginePolicyHost({ tokenizer: model.tokenizer, engines: { policy: engine } }),
    });
    try {
      const url = `${g.rolloutBaseURL('tools')}/chat/completions`;
      const send = (messages: unknown[], extra: object = {}) =>
        fetch(url, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'policy', messages, tools, ...extra }),
        }).then((r) => r.json() as Promise<Json>);
      const m1 = [{ role: 'system', content: 'Be brief.' }, user('When was X built?')];
      const r1 = await send(m1);
      const msg = r1.choices[0].message;
      expect(r1.choices[0].finish_reason).toBe('tool_calls');
      expect(msg.content).toBe('Let me look.');
      // The arguments are the model's own text, spacing included.
      expect(msg.tool_calls).toEqual([
        {
          id: expect.stringMatching(/^call_/),
          type: 'function',
          function: { name: 'lookup', arguments: '{"query":  "year of X"}' },
        },
      ]);
      const prompt1 = model.tokenizer.decode(engine.seen[0]!.promptTokens as Int32Array);
      expect(prompt1).toContain('Be brief.\n\n# Tools');
      expect(prompt1).toContain('"name":"lookup"');
      const m2 = [
        ...m1,
        msg,
        { role: 'tool', tool_call_id: msg.tool_calls[0].id, content: '1850' },
      ];
      const r2 = await send(m2);
      expect(r2.choices[0].message.content).toBe('It was 1850.');
      const prompt2 = model.tokenizer.decode(engine.seen[1]!.promptTokens as Int32Array);
      expect(prompt2).toContain(
        '<|im_start|>user\n<tool_response>\n1850\n</tool_response><|im_end|>',
      );
      const rollout = g.recorder.get('tools')!;
      expect(chainCalls(rollout.calls)).toHaveLength(1);
      expect(rollout.calls[0]!.toolCalls![0]!.function.name).toBe('lookup');
    } finally {
      await g.close();
    }
  });

  it("puts back the model's own argument text when an SDK re-serialises it (continuity kept)", async () => {
    const engine = new ScriptedEngine(model.tokenizer, [callText, 'done']);
    const g = await createPolicyGateway({
      host: new EnginePolicyHost({ tokenizer: model.tokenizer, engines: { policy: engine } }),
    });
    try {
      const url = `${g.rolloutBaseURL('reser')}/chat/completions`;
      const send = (messages: unknown[]) =>
        fetch(url, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'policy', messages, tools }),
        }).then((r) => r.json() as Promise<Json>);
      const m1 = [user('When?')];
      const msg = (await send(m1)).choices[0].message;
      const tc = msg.tool_calls[0];
      // What the Vercel AI SDK sends back: JSON.stringify of the parsed arguments.
      const compact = {
        ...tc,
        function: { ...tc.function, arguments: JSON.stringify(JSON.parse(tc.function.arguments)) },
      };
      expect(compact.function.arguments).not.toBe(tc.function.arguments);
      await send([
        ...m1,
        { ...msg, tool_calls: [compact] },
        { role: 'tool', tool_call_id: tc.id, content: '1850' },
      ]);
      expect(chainCalls(g.recorder.get('reser')!.calls)).toHaveLength(1);
      // Different arguments under the same id are the agent's own: rendered as sent.
      const other = { ...tc, function: { ...tc.function, arguments: '{"query":"other"}' } };
      await send([
        ...m1,
        { ...msg, tool_calls: [other] },
        { role: 'tool', tool_call_id: tc.id, content: '1850' },
      ]);
      expect(model.tokenizer.decode(engine.seen[2]!.promptTokens as Int32Array)).toContain(
        '{"query":"other"}',
      );
    } finally {
      await g.close();
    }
  });

  it("tool_choice names a function: the assistant turn starts with the call's opening", async () => {
    const engine = new ScriptedEngine(model.tokenizer, ['{"query": "q"}}\n</tool_call>']);
    const g = await createPolicyGateway({
      host: new EnginePolicyHost({ tokenizer: model.tokenizer, engines: { policy: engine } }),
    });
    try {
      const r = (await (
        await fetch(`${g.baseURL}/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({
            model: 'policy',
            messages: [user('x')],
            tools,
            tool_choice: { type: 'function', function: { name: 'lookup' } },
          }),
        })
      ).json()) as Json;
      expect(r.choices[0].message.tool_calls[0].function).toEqual({
        name: 'lookup',
        arguments: '{"query": "q"}',
      });
      const prompt = model.tokenizer.decode(engine.seen[0]!.promptTokens as Int32Array);
      expect(
        prompt.endsWith('<|im_start|>assistant\n<tool_call>\n{"name": "lookup", "arguments": '),
      ).toBe(true);
    } finally {
      await g.close();
    }
  });
});

describe('upstream mode: the gateway in front of a vLLM-compatible server', () => {
  it('sends token-id prompts upstream and records the ids and logprobs upstream sampled', async () => {
    // `gw` plays vLLM (it answers return_token_ids / return_tokens_as_token_ids as vLLM does).
    const front = await createPolicyGateway({
      host: new UpstreamPolicyHost({
        baseURLs: gw.baseURL,
        model: 'tiny',
        tokenizer: model.tokenizer,
      }),
    });
    try {
      const body = { model: 'tiny', messages: [user('proxied')], max_tokens: 10, seed: 9 };
      const r = await fetch(`${front.baseURL}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', [ROLLOUT_HEADER]: 'up' },
        body: JSON.stringify(body),
      }).then((x) => x.json() as Promise<Json>);
      const direct = await post('/v1/chat/completions', body, { [ROLLOUT_HEADER]: 'direct' });
      expect(r.choices[0].message.content).toBe(direct.json.choices[0].message.content);
      const a = front.recorder.get('up')!.calls[0]!;
      const b = gw.recorder.get('direct')!.calls[0]!;
      expect(Array.from(a.promptTokens)).toEqual(Array.from(b.promptTokens));
      expect(Array.from(a.completionTokens)).toEqual(Array.from(b.completionTokens));
      expect(Array.from(a.logprobs)).toEqual(Array.from(b.logprobs));
      // LoRA routes are forwarded to every upstream server.
      const dir = await writeAdapter(join(root, 'adapter-up'), model, randomAdapter(model, 'up'));
      const load = await fetch(`${front.baseURL}/load_lora_adapter`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ lora_name: 'remote', lora_path: dir }),
      });
      expect(load.status).toBe(200);
      expect(host.models().map((m) => m.id)).toContain('remote');
      // And our own vLLM client reads the gateway like vLLM.
      const client = new OpenAIPolicyEngine({ model: 'remote', baseURLs: front.baseURL });
      const s = await client.generate({
        promptTokens: [...model.tokenizer.encode('abc')],
        maxTokens: 5,
        seed: 2,
      });
      expect(s.actionTokens.length).toBe(s.actionLogprobs.length);
      await fetch(`${front.baseURL}/unload_lora_adapter`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ lora_name: 'remote' }),
      });
      expect(host.models().map((m) => m.id)).not.toContain('remote');
    } finally {
      await front.close();
    }
  });
});

describe('the Responses API (/v1/responses)', () => {
  const tools = [
    {
      type: 'function',
      name: 'lookup',
      parameters: { type: 'object', properties: { query: { type: 'string' } } },
    },
  ];
  it('answers with output items, takes the conversation back as input items, streams events', async () => {
    const engine = new ScriptedEngine(model.tokenizer, [
      '<tool_call>\n{"name": "lookup", "arguments": {"query": "x"}}\n</tool_call>',
      'It is 7.',
    ]);
    const g = await createPolicyGateway({
      host: new EnginePolicyHost({ tokenizer: model.tokenizer, engines: { policy: engine } }),
    });
    try {
      const send = (body: object) =>
        fetch(`${g.rolloutBaseURL('resp')}/responses`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'policy', tools, ...body }),
        });
      const input = [{ role: 'user', content: 'What is x?' }];
      const r1 = (await (await send({ instructions: 'Be brief.', input })).json()) as Json;
      expect(r1.object).toBe('response');
      expect(r1.status).toBe('completed');
      expect(r1.output).toEqual([
        {
          type: 'function_call',
          id: expect.stringMatching(/^fc_/),
          call_id: expect.stringMatching(/^call_/),
          name: 'lookup',
          arguments: '{"query": "x"}',
          status: 'completed',
        },
      ]);
      const call = r1.output[0];
      const input2 = [
        ...input,
        { type: 'function_call', call_id: call.call_id, name: 'lookup', arguments: call.arguments },
        { type: 'function_call_output', call_id: call.call_id, output: '7' },
      ];
      const s = await send({ instructions: 'Be brief.', input: input2, stream: true });
      const events = (await s.text())
        .split('\n\n')
        .filter((e) => e.includes('data: '))
        .map((e) => JSON.parse(e.slice(e.indexOf('data: ') + 6)));
      expect(events.map((e) => e.type)).toEqual([
        'response.created',
        'response.in_progress',
        'response.output_item.added',
        'response.content_part.added',
        'response.output_text.delta',
        'response.output_text.done',
        'response.content_part.done',
        'response.output_item.done',
        'response.completed',
      ]);
      expect(events.at(-1).response.output[0].content[0].text).toBe('It is 7.');
      expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
      // The tool loop is one continuous chain, recorded under the rollout.
      const rollout = g.recorder.get('resp')!;
      expect(rollout.calls.map((c) => c.endpoint)).toEqual(['responses', 'responses']);
      expect(chainCalls(rollout.calls)).toHaveLength(1);
      const bad = await send({ input, previous_response_id: r1.id });
      expect(bad.status).toBe(400);
      expect(((await bad.json()) as Json).error.param).toBe('previous_response_id');
    } finally {
      await g.close();
    }
  });
});
