import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { LLMRequestError, OpenAIPolicyEngine } from '../src/index.js';
import {
  checkVllmRequest,
  SGLANG_LOAD_LORA,
  SGLANG_UNLOAD_LORA,
  vllmResponseProblems,
} from '../src/testing/vllm-protocol.js';

// Our remote-rollout client (OpenAIPolicyEngine) against servers that speak vLLM's and SGLang's
// wire schema as their source defines it (src/testing/vllm-protocol.ts cites the files and commits
// read), over real HTTP on 127.0.0.1.
//
// The vLLM stand-in does what vLLM does with a body: a field of the wrong type (pydantic v2, lax
// mode) or one its `mode="before"` validators refuse is a 400 ErrorResponse; an unknown field is
// NOT refused — vLLM's OpenAIBaseModel logs it and drops it — so the stand-in records it and the
// tests fail on it (for a client, a dropped field is lost intent). It answers exactly vLLM's
// response models (nulls included, `tool_calls` left out when empty, the LoRA routes' plain-text
// success), which vllmResponseProblems checks too, and 404s a `model` that is neither the base
// model nor a loaded adapter, as vLLM's OpenAIServingModels does.

const BASE = 'Qwen/Qwen2.5-0.5B-Instruct';
type Json = Record<string, unknown>;

interface Seen {
  path: string;
  body: Json;
  ignored: string[];
  status: number;
  /** SGLang stand-in: the adapter that generated (null = the base model). */
  adapter?: string | null;
}

interface Fake {
  url: string;
  seen: Seen[];
  adapters: Map<string, string>;
  close(): Promise<void>;
}

const servers: Fake[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

async function readBody(req: IncomingMessage): Promise<string> {
  let s = '';
  for await (const c of req) s += c;
  return s;
}

function sendJson(res: ServerResponse, status: number, body: unknown) {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}

/** vLLM's ErrorResponse: {"error": {message, type, param, code:int}}. */
const vllmError = (
  res: ServerResponse,
  code: number,
  type: string,
  message: string,
  param: string | null = null,
) => sendJson(res, code, { error: { message, type, param, code } });

const utf8 = (s: string) => Array.from(new TextEncoder().encode(s));

/** A deterministic "generation": three ids that depend on the adapter, each logprob −0.25·(i+1). */
function sample(adapter: string | null) {
  const shift = adapter ? 100 + adapter.length : 0;
  const ids = [65 + shift, 66 + shift, 2];
  return { ids, logprobs: ids.map((_, i) => -0.25 * (i + 1)), text: `out${shift}` };
}

function promptIdsOf(body: Json): number[] {
  const p = body.prompt;
  if (typeof p === 'string') return utf8(p);
  if (Array.isArray(p) && typeof p[0] === 'number') return p as number[];
  if (Array.isArray(p) && typeof p[0] === 'string') return utf8(p[0] as string);
  const msgs = (body.messages ?? []) as Array<{ role: string; content: string }>;
  return utf8(msgs.map((m) => `<${m.role}>${m.content}`).join(''));
}

const usage = (p: number, c: number) => ({
  prompt_tokens: p,
  total_tokens: p + c,
  completion_tokens: c,
  prompt_tokens_details: null,
});

/** CompletionResponse as vLLM's serving code fills it (logprobs = N: the sampled + top-N). */
function completionReply(body: Json, model: string, adapter: string | null) {
  const g = sample(adapter);
  const promptIds = promptIdsOf(body);
  const asIds = body.return_tokens_as_token_ids === true;
  const ids = body.return_token_ids === true;
  const tok = (id: number) => (asIds ? `token_id:${id}` : String.fromCharCode(id));
  const tokens = g.ids.map(tok);
  const logprobs =
    typeof body.logprobs === 'number'
      ? {
          text_offset: tokens.map((_, i) => i),
          token_logprobs: g.logprobs,
          tokens,
          top_logprobs: tokens.map((t, i) => ({ [t]: g.logprobs[i]! })),
        }
      : null;
  return {
    id: 'cmpl-0123',
    object: 'text_completion',
    created: 1_700_000_000,
    model,
    choices: [
      {
        index: 0,
        text: g.text,
        logprobs,
        finish_reason: 'stop',
        stop_reason: null,
        token_ids: ids ? g.ids : null,
        prompt_logprobs: null,
        prompt_token_ids: ids ? promptIds : null,
      },
    ],
    service_tier: null,
    system_fingerprint: null,
    usage: usage(promptIds.length, g.ids.length),
    kv_transfer_params: null,
  };
}

/** ChatCompletionResponse as vLLM fills it (`logprobs: true`, top_logprobs 0 → []). */
function chatReply(body: Json, model: string, adapter: string | null) {
  const g = sample(adapter);
  const promptIds = promptIdsOf(body);
  const asIds = body.return_tokens_as_token_ids === true;
  const ids = body.return_token_ids === true;
  const tok = (id: number) => (asIds ? `token_id:${id}` : String.fromCharCode(id));
  return {
    id: 'chatcmpl-0123',
    object: 'chat.completion',
    created: 1_700_000_000,
    model,
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          content: g.text,
          refusal: null,
          annotations: null,
          audio: null,
          function_call: null,
          reasoning: null,
        },
        logprobs: body.logprobs
          ? {
              content: g.ids.map((id, i) => ({
                token: tok(id),
                logprob: g.logprobs[i]!,
                bytes: utf8(tok(id)),
                top_logprobs: [],
              })),
            }
          : null,
        finish_reason: 'stop',
        stop_reason: null,
        token_ids: ids ? g.ids : null,
      },
    ],
    service_tier: null,
    system_fingerprint: null,
    usage: usage(promptIds.length, g.ids.length),
    prompt_logprobs: null,
    prompt_token_ids: ids ? promptIds : null,
    kv_transfer_params: null,
  };
}

async function listen(server: Server): Promise<string> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** vLLM's OpenAI server, started with --enable-lora and VLLM_ALLOW_RUNTIME_LORA_UPDATING=True. */
async function fakeVllm(): Promise<Fake> {
  const seen: Seen[] = [];
  const adapters = new Map<string, string>();
  const server = createServer(async (req, res) => {
    const path = req.url ?? '';
    const raw = await readBody(req);
    const entry: Seen = { path, body: {}, ignored: [], status: 0 };
    seen.push(entry);
    const reply = (status: number, fn: () => void) => {
      entry.status = status;
      fn();
    };
    const kind = (
      {
        '/v1/completions': 'completion',
        '/v1/chat/completions': 'chat',
        '/v1/load_lora_adapter': 'load',
        '/v1/unload_lora_adapter': 'unload',
      } as const
    )[path];
    if (!kind || req.method !== 'POST')
      return reply(404, () => sendJson(res, 404, { detail: 'Not Found' }));
    // validate_json_request on every one of these routes.
    if ((req.headers['content-type'] ?? '').split(';')[0]!.trim() !== 'application/json')
      return reply(400, () => vllmError(res, 400, 'BadRequestError', 'Unsupported Media Type'));
    let body: Json;
    try {
      body = JSON.parse(raw) as Json;
    } catch {
      return reply(400, () => vllmError(res, 400, 'BadRequestError', 'JSON decode error'));
    }
    entry.body = body;
    const check = checkVllmRequest(kind, body);
    entry.ignored = check.ignored;
    if (check.error)
      return reply(400, () =>
        vllmError(res, 400, 'BadRequestError', check.error!.message, check.error!.param),
      );
    if (kind === 'load') {
      const {
        lora_name: name,
        lora_path: p,
        load_inplace: inplace,
      } = body as Record<string, string>;
      if (!name || !p)
        return reply(400, () =>
          vllmError(
            res,
            400,
            'InvalidUserInput',
            "Both 'lora_name' and 'lora_path' must be provided.",
          ),
        );
      if (!inplace && adapters.has(name))
        return reply(400, () =>
          vllmError(
            res,
            400,
            'InvalidUserInput',
            `The lora adapter '${name}' has already been loaded.`,
          ),
        );
      adapters.set(name, p);
      // Response(status_code=200, content=str): a text body, no JSON content type.
      return reply(200, () =>
        res.writeHead(200).end(`Success: LoRA adapter '${name}' added successfully.`),
      );
    }
    if (kind === 'unload') {
      const name = body.lora_name as string;
      if (!adapters.has(name))
        return reply(404, () =>
          vllmError(res, 404, 'NotFoundError', `The lora adapter '${name}' cannot be found.`),
        );
      adapters.delete(name);
      return reply(200, () =>
        res.writeHead(200).end(`Success: LoRA adapter '${name}' removed successfully.`),
      );
    }
    const model = (body.model as string | null | undefined) ?? BASE;
    if (model !== BASE && !adapters.has(model))
      return reply(404, () =>
        vllmError(res, 404, 'NotFoundError', `The model \`${model}\` does not exist.`, 'model'),
      );
    const adapter = model === BASE ? null : model;
    const out =
      kind === 'chat' ? chatReply(body, model, adapter) : completionReply(body, model, adapter);
    reply(200, () => sendJson(res, 200, out));
  });
  const url = await listen(server);
  const fake: Fake = {
    url,
    seen,
    adapters,
    close: () => new Promise((r) => server.close(() => r())),
  };
  servers.push(fake);
  return fake;
}

/**
 * SGLang's server (--enable-lora): LoRA routes at the root, answered with a JSON LoRAUpdateOutput;
 * a generation's adapter is "base:adapter" in `model` or the `lora_path` field, else the base
 * model runs whatever `model` says. Its generation replies reuse the vLLM shape (SGLang follows
 * the same OpenAI models); only the adapter selection and the LoRA routes are SGLang's here.
 */
async function fakeSglang(): Promise<Fake> {
  const seen: Seen[] = [];
  const adapters = new Map<string, string>();
  const server = createServer(async (req, res) => {
    const path = req.url ?? '';
    let body: Json = {};
    try {
      body = JSON.parse(await readBody(req)) as Json;
    } catch {}
    const entry: Seen = { path, body, ignored: [], status: 200 };
    seen.push(entry);
    const lora = (ok: boolean, error: string | null) => {
      entry.status = ok ? 200 : 400;
      sendJson(res, entry.status, {
        success: ok,
        error_message: error,
        loaded_adapters: Object.fromEntries(adapters),
      });
    };
    if (path === '/load_lora_adapter' || path === '/unload_lora_adapter') {
      const load = path === '/load_lora_adapter';
      const check = checkVllmRequest(
        load ? 'load' : 'unload',
        body,
        load ? SGLANG_LOAD_LORA : SGLANG_UNLOAD_LORA,
      );
      entry.ignored = check.ignored;
      if (check.error) {
        entry.status = 400;
        return sendJson(res, 400, {
          object: 'error',
          message: check.error.message,
          type: 'Bad Request',
          code: 400,
        });
      }
      const name = body.lora_name as string;
      if (load) {
        if (adapters.has(name)) return lora(false, `LoRA adapter ${name} is already loaded.`);
        adapters.set(name, body.lora_path as string);
        return lora(true, null);
      }
      if (!adapters.delete(name)) return lora(false, `LoRA adapter ${name} is not loaded.`);
      return lora(true, null);
    }
    if (path !== '/v1/completions' && path !== '/v1/chat/completions') {
      entry.status = 404;
      return sendJson(res, 404, { detail: 'Not Found' });
    }
    const model = String(body.model ?? '');
    const adapter = model.includes(':')
      ? model.slice(model.indexOf(':') + 1)
      : typeof body.lora_path === 'string'
        ? body.lora_path
        : null;
    if (adapter !== null && !adapters.has(adapter)) {
      entry.status = 400;
      return sendJson(res, 400, {
        object: 'error',
        message: `unknown LoRA ${adapter}`,
        type: 'BadRequestError',
        code: 400,
      });
    }
    entry.adapter = adapter;
    const out =
      path === '/v1/chat/completions'
        ? chatReply(body, model, adapter)
        : completionReply(body, model, adapter);
    sendJson(res, 200, out);
  });
  const url = await listen(server);
  const fake: Fake = {
    url,
    seen,
    adapters,
    close: () => new Promise((r) => server.close(() => r())),
  };
  servers.push(fake);
  return fake;
}

const engine = (
  url: string,
  extra: Partial<ConstructorParameters<typeof OpenAIPolicyEngine>[0]> = {},
) =>
  new OpenAIPolicyEngine({
    model: BASE,
    baseURLs: [`${url}/v1`],
    retry: { maxRetries: 0 },
    timeoutMs: 5_000,
    ...extra,
  });

async function post(url: string, path: string, body: unknown) {
  const res = await fetch(`${url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, type: res.headers.get('content-type'), text: await res.text() };
}

describe('the vLLM stand-in is vLLM (its own checks)', () => {
  it('refuses what vLLM refuses, drops unknown fields, and answers parseable vLLM models', async () => {
    const v = await fakeVllm();
    // Types validated by pydantic (lax): a string for a bool, a list of strings for token ids.
    expect(
      (await post(v.url, '/v1/completions', { prompt: 'x', return_token_ids: 'maybe' })).status,
    ).toBe(400);
    expect(
      (await post(v.url, '/v1/completions', { prompt: 'x', stop_token_ids: ['a'] })).status,
    ).toBe(400);
    // check_logprobs (mode="before"): logprobs must be a number, even a numeric string is refused.
    expect((await post(v.url, '/v1/completions', { prompt: 'x', logprobs: '1' })).status).toBe(400);
    expect((await post(v.url, '/v1/completions', { prompt: '' })).status).toBe(400);
    expect((await post(v.url, '/v1/chat/completions', { model: BASE })).status).toBe(400);
    expect(
      (
        await post(v.url, '/v1/chat/completions', {
          messages: [{ role: 'user', content: 'x' }],
          top_logprobs: 2,
        })
      ).status,
    ).toBe(400);
    expect((await post(v.url, '/v1/load_lora_adapter', { lora_name: 'a' })).status).toBe(400);
    // Lax coercion: 1 for a bool field passes; an unknown field is dropped, not refused.
    const ok = await post(v.url, '/v1/completions', {
      prompt: 'x',
      logprobs: 1,
      return_token_ids: 1,
      not_a_vllm_field: true,
    });
    expect(ok.status).toBe(200);
    expect(v.seen.at(-1)!.ignored).toEqual(['not_a_vllm_field']);
    expect(vllmResponseProblems('CompletionResponse', JSON.parse(ok.text))).toEqual([]);
    const chat = await post(v.url, '/v1/chat/completions', {
      messages: [{ role: 'user', content: 'x' }],
      logprobs: true,
      return_token_ids: true,
    });
    expect(vllmResponseProblems('ChatCompletionResponse', JSON.parse(chat.text))).toEqual([]);
    // The model must be served: an unknown name is vLLM's 404.
    expect((await post(v.url, '/v1/completions', { prompt: 'x', model: 'nope' })).status).toBe(404);
    // The LoRA routes' success is plain text; loading a loaded name again is a 400.
    const load = await post(v.url, '/v1/load_lora_adapter', { lora_name: 'a', lora_path: '/a' });
    expect(load).toMatchObject({
      status: 200,
      type: null,
      text: "Success: LoRA adapter 'a' added successfully.",
    });
    expect(
      (await post(v.url, '/v1/load_lora_adapter', { lora_name: 'a', lora_path: '/a' })).status,
    ).toBe(400);
    expect((await post(v.url, '/v1/unload_lora_adapter', { lora_name: 'b' })).status).toBe(404);
  });

  it('the response checker catches what a vLLM client could not parse', () => {
    expect(vllmResponseProblems('CompletionResponse', { choices: [] })).toEqual(
      expect.arrayContaining(['model: Field required', 'usage: Field required']),
    );
    expect(
      vllmResponseProblems('ChatCompletionResponse', {
        model: 'm',
        usage: usage(1, 1),
        choices: [{ index: 0, message: { role: 'assistant', content: 'x', tool_calls: null } }],
      }),
    ).toEqual(['choices[0].message.tool_calls: must not be null']);
  });
});

describe('OpenAIPolicyEngine against vLLM', () => {
  /** Every request the client sent was accepted, with no field vLLM would drop. */
  function expectClean(v: Fake) {
    for (const s of v.seen) {
      expect({ path: s.path, ignored: s.ignored, status: s.status }).toEqual({
        path: s.path,
        ignored: [],
        status: s.status === 404 && s.path.endsWith('unload_lora_adapter') ? 404 : 200,
      });
    }
  }

  it('/v1/completions: text and token-id prompts, ids and logprobs from the reply', async () => {
    const v = await fakeVllm();
    const p = engine(v.url);
    const r = await p.generate({
      prompt: 'hi',
      maxTokens: 8,
      temperature: 1,
      topP: 1,
      stop: ['\n'],
      seed: 3,
    });
    expect(Array.from(r.actionTokens)).toEqual([65, 66, 2]);
    expect(Array.from(r.actionLogprobs)).toEqual([-0.25, -0.5, -0.75]);
    expect(Array.from(r.promptTokens)).toEqual(utf8('hi'));
    expect(r.model).toBe(BASE);
    const body = v.seen[0]!.body;
    // The fields that make a rollout trainable, with vLLM's types: logprobs an int on /completions.
    expect(body).toMatchObject({
      model: BASE,
      prompt: 'hi',
      logprobs: 1,
      return_tokens_as_token_ids: true,
      return_token_ids: true,
      max_tokens: 8,
    });
    const t = await p.generate({ promptTokens: [5, 6, 7], maxTokens: 4 });
    expect(Array.from(t.promptTokens)).toEqual([5, 6, 7]);
    expect(v.seen[1]!.body.prompt).toEqual([5, 6, 7]);
    expectClean(v);
  });

  it('/v1/chat/completions: logprobs true, prompt_token_ids at the top level', async () => {
    const v = await fakeVllm();
    const r = await engine(v.url).generate({
      messages: [{ role: 'user', content: 'hi' }],
      maxTokens: 8,
    });
    expect(Array.from(r.actionTokens)).toEqual([65, 66, 2]);
    expect(Array.from(r.actionLogprobs)).toEqual([-0.25, -0.5, -0.75]);
    expect(Array.from(r.promptTokens)).toEqual(utf8('<user>hi'));
    expect(v.seen[0]!.body).toMatchObject({
      logprobs: true,
      return_tokens_as_token_ids: true,
      return_token_ids: true,
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(v.seen[0]!.body).not.toHaveProperty('top_logprobs');
    expectClean(v);
  });

  it('loads, swaps and unloads adapters with vLLM bodies; generations name the adapter', async () => {
    const v = await fakeVllm();
    const p = engine(v.url);
    // replace (default): unload first — an unknown name is vLLM's 404, tolerated — then load.
    await p.loadAdapter({ name: 'step-1', path: '/ckpt/1' });
    expect(v.seen.map((s) => [s.path, s.status])).toEqual([
      ['/v1/unload_lora_adapter', 404],
      ['/v1/load_lora_adapter', 200],
    ]);
    expect(v.seen[0]!.body).toEqual({ lora_name: 'step-1' });
    expect(v.seen[1]!.body).toEqual({ lora_name: 'step-1', lora_path: '/ckpt/1' });
    const r = await p.generate({ prompt: 'x', maxTokens: 4 });
    expect(v.seen.at(-1)!.body.model).toBe('step-1');
    expect(r.model).toBe('step-1');
    expect(Array.from(r.actionTokens)).toEqual(sample('step-1').ids);
    // A new name: load it, switch, then unload the old one.
    await p.updateAdapter({ name: 'step-2', path: '/ckpt/2' });
    expect([...v.adapters.keys()]).toEqual(['step-2']);
    // The same name in place: one load with load_inplace (a LoadLoRAAdapterRequest field).
    await engine(v.url, { adapterUpdate: 'inplace' }).loadAdapter(
      { name: 'step-2', path: '/ckpt/2b' },
      { mode: 'inplace' },
    );
    expect(v.seen.at(-1)!.body).toEqual({
      lora_name: 'step-2',
      lora_path: '/ckpt/2b',
      load_inplace: true,
    });
    expect(v.adapters.get('step-2')).toBe('/ckpt/2b');
    await p.unloadAdapter('step-2');
    expect(v.adapters.size).toBe(0);
    expect(p.adapter).toBeUndefined();
    expectClean(v);
    // Unloading an unknown adapter outside a replace is an error the caller sees.
    await expect(p.unloadAdapter('gone')).rejects.toSatisfy(
      (e) => LLMRequestError.isInstance(e) && e.status === 404,
    );
  });
});

describe('several adapter versions at once (GRPO max_staleness ≥ 1)', () => {
  // Names of different lengths: the stand-ins' sample() shifts its ids by the adapter's length,
  // so the ids say which adapter generated.
  const old = { name: 'policy-v1', path: '/run/adapters/step-1' };
  const fresh = { name: 'policy-v10', path: '/run/adapters/step-10' };

  it('vLLM: an engine bound to a version names it while a newer one is loaded beside it', async () => {
    const v = await fakeVllm();
    const p = engine(v.url);
    await p.loadAdapter(old, { mode: 'add' });
    const bound = p.withAdapter(old.name);
    await p.loadAdapter(fresh, { mode: 'add' });
    // 'add' sends the load alone (no unload first), with LoadLoRAAdapterRequest's fields.
    expect(v.seen.map((s) => [s.path, s.body, s.status])).toEqual([
      ['/v1/load_lora_adapter', { lora_name: old.name, lora_path: old.path }, 200],
      ['/v1/load_lora_adapter', { lora_name: fresh.name, lora_path: fresh.path }, 200],
    ]);
    const r = await bound.generate({ prompt: 'x', maxTokens: 4 });
    expect(v.seen.at(-1)!.body.model).toBe(old.name);
    expect(Array.from(r.actionTokens)).toEqual(sample(old.name).ids);
    expect(r.model).toBe(old.name);
    // The engine itself names the adapter loaded last.
    await p.generate({ prompt: 'x', maxTokens: 4 });
    expect(v.seen.at(-1)!.body.model).toBe(fresh.name);
    // Unloaded, the version's requests are vLLM's 404 — never another adapter's samples.
    await p.unloadAdapter(old.name);
    expect(v.seen.at(-1)!.body).toEqual({ lora_name: old.name });
    await expect(bound.generate({ prompt: 'x', maxTokens: 4 })).rejects.toSatisfy(
      (e) => LLMRequestError.isInstance(e) && e.status === 404,
    );
    expect([...v.adapters.keys()]).toEqual([fresh.name]);
    // Every body passed vLLM's checks with no field it would drop; only that last request failed.
    expect(v.seen.every((x) => x.ignored.length === 0)).toBe(true);
    expect(v.seen.map((x) => x.status)).toEqual([200, 200, 200, 200, 200, 404]);
  });

  it("SGLang: the bound version goes in the request's lora_path", async () => {
    const s = await fakeSglang();
    const p = engine(s.url, { loraRoutes: 'sglang' });
    await p.loadAdapter(old, { mode: 'add' });
    await p.loadAdapter(fresh, { mode: 'add' });
    const r = await p.withAdapter(old.name).generate({ prompt: 'x', maxTokens: 4 });
    expect(s.seen.at(-1)!.body).toMatchObject({ model: BASE, lora_path: old.name });
    expect(s.seen.at(-1)!.adapter).toBe(old.name);
    expect(r.model).toBe(old.name);
    await p.unloadAdapter(old.name);
    expect(s.seen.at(-1)!).toMatchObject({
      path: '/unload_lora_adapter',
      body: { lora_name: old.name },
    });
    expect(s.seen.every((x) => x.ignored.length === 0)).toBe(true);
    expect([...s.adapters.keys()]).toEqual([fresh.name]);
  });
});

describe('OpenAIPolicyEngine against SGLang', () => {
  it('uses the root LoRA routes and selects the adapter with lora_path', async () => {
    const s = await fakeSglang();
    const p = engine(s.url, { loraRoutes: 'sglang' });
    await p.loadAdapter({ name: 'step-1', path: '/ckpt/1' });
    // replace: the unload of an unknown name is SGLang's 400 {success: false}, tolerated.
    expect(s.seen.map((x) => [x.path, x.status])).toEqual([
      ['/unload_lora_adapter', 400],
      ['/load_lora_adapter', 200],
    ]);
    expect(s.seen.every((x) => x.ignored.length === 0)).toBe(true);
    expect(s.seen[1]!.body).toEqual({ lora_name: 'step-1', lora_path: '/ckpt/1' });
    for (const req of [
      { prompt: 'x', maxTokens: 4 },
      { messages: [{ role: 'user' as const, content: 'x' }], maxTokens: 4 },
    ]) {
      const r = await p.generate(req);
      // The adapter generated (a `model` naming it would have run the base model).
      expect(s.seen.at(-1)!.adapter).toBe('step-1');
      expect(s.seen.at(-1)!.body).toMatchObject({ model: BASE, lora_path: 'step-1' });
      expect(Array.from(r.actionTokens)).toEqual(sample('step-1').ids);
      expect(r.model).toBe('step-1');
    }
    await p.updateAdapter({ name: 'step-2', path: '/ckpt/2' });
    expect([...s.adapters.keys()]).toEqual(['step-2']);
    await p.generate({ prompt: 'x', maxTokens: 4 });
    expect(s.seen.at(-1)!.adapter).toBe('step-2');
    await p.unloadAdapter('step-2');
    await p.generate({ prompt: 'x', maxTokens: 4 });
    expect(s.seen.at(-1)!.adapter).toBeNull();
    expect(s.seen.at(-1)!.body).not.toHaveProperty('lora_path');
  });
});
