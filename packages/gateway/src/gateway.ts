import { createHash, randomUUID, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { PolicyEngine, PolicyGenerateResult } from '@flowgrpo/agent';
import {
  ContextLengthExceededError,
  imposeSampling,
  type SamplingWarner,
  samplingWarner,
  TokenOutOfVocabularyError,
  type TrainingSampling,
} from '@flowgrpo/models';
import { renderChat } from './chat-render.js';
import { badRequest, errorBody, GatewayError } from './errors.js';
import { readJson, sendJson, startSse } from './http-util.js';
import type { PolicyHost } from './policy-host.js';
import { type RecordedCall, type RecordedRollout, RolloutRecorder } from './recorder.js';
import {
  ResponsesRequestSchema,
  responseEvents,
  responseObject,
  responsesToChat,
} from './responses.js';
import { type ParsedToolCall, parseAssistantText } from './tool-calls.js';
import {
  type ChatCompletionRequest,
  ChatCompletionRequestSchema,
  type CompletionRequest,
  CompletionRequestSchema,
  LoadLoraRequestSchema,
  parseBody,
  RewardRequestSchema,
  UnloadLoraRequestSchema,
  type WireMessage,
} from './wire.js';

// `flowgrpo serve`: an OpenAI-compatible HTTP server over a policy host (local artifacts or
// upstream vLLM/SGLang) that records every call token-exactly (recorder.ts). node:http, no
// framework: the surface is a dozen routes, and owning the socket lets the gateway stream SSE,
// abort a generation whose client went away, and bound bodies and concurrency itself.
//
//   GET  /v1/models, /v1/models/{id}
//   POST /v1/chat/completions        messages → chat template (+ tools) → ids → policy; SSE too
//   POST /v1/completions             text or token ids → policy
//   POST /v1/responses               the Responses API's input items → the chat path; SSE too
//   POST /v1/load_lora_adapter       vLLM's runtime LoRA routes
//   POST /v1/unload_lora_adapter
//   GET  /v1/rollouts, /v1/rollouts/{id}; POST /v1/rollouts/{id}/reward; DELETE /v1/rollouts/{id}
//   GET  /health
//
// Every route also answers under /rollouts/{id}/…: an agent whose base URL is
// `<gateway>/rollouts/<id>/v1` has all its calls recorded under rollout <id> with no other
// change to its code.

export const ROLLOUT_HEADER = 'x-flowgrpo-rollout-id';
const ROLLOUT_ID = /^[A-Za-z0-9._:@-]{1,200}$/;

export interface PolicyGatewayOptions {
  host: PolicyHost;
  /** Interface to listen on (default 127.0.0.1: nothing beyond this machine). */
  hostname?: string | undefined;
  /** Port (default 0: any free port; `url` says which). */
  port?: number | undefined;
  /** When set, every route but /health needs `Authorization: Bearer <apiKey>`. */
  apiKey?: string | undefined;
  /** Largest request body (default 8 MiB). */
  maxBodyBytes?: number | undefined;
  /** Generations running at once (default 256); more wait in a queue. */
  maxConcurrency?: number | undefined;
  /** Requests waiting for a generation slot (default 4096); more get 429. */
  maxQueue?: number | undefined;
  /** max_tokens when a request leaves it out (default 1024, and never past the context). */
  defaultMaxTokens?: number | undefined;
  /** Variables every chat template render gets (e.g. { enable_thinking: false }). */
  chatTemplateVariables?: Record<string, unknown> | undefined;
  /** Where calls are recorded (default: a new RolloutRecorder). */
  recorder?: RolloutRecorder | undefined;
  /** Serve /v1/load_lora_adapter and /v1/unload_lora_adapter (default true). */
  loraUpdates?: boolean | undefined;
  /** Called once per recorded call. */
  onCall?: ((rolloutId: string, call: RecordedCall) => void) | undefined;
  /**
   * The sampling a trainer imposes on a model's calls that belong to a named rollout (a rollout
   * id in the header, the /rollouts/<id> path or metadata: the calls it may train on), or
   * undefined for none. Temperature and top_p are replaced and the token limit capped, whatever
   * the request asked (one FLOWGRPO_SAMPLING_OVERRIDE warning per model and setting); calls
   * outside a rollout (a held-out evaluation, plain serving) sample as asked.
   */
  rolloutSampling?: (model: string) => TrainingSampling | undefined;
}

/** How calls of one rollout are served: engines per model name (the trainer's policy), a seed. */
export interface RolloutBinding {
  engines?: Record<string, PolicyEngine>;
  /** Calls without a `seed` sample with one derived from this and the call's index. */
  seed?: number | string;
}

export interface PolicyGateway {
  /** http://127.0.0.1:<port> */
  readonly url: string;
  /** `url` + /v1: what an OpenAI client takes as its base URL. */
  readonly baseURL: string;
  readonly port: number;
  readonly host: PolicyHost;
  readonly recorder: RolloutRecorder;
  /** A base URL that records every call under rollout `id` (no header needed). */
  rolloutBaseURL(id: string): string;
  /** Routes the calls of rollout `id` as `binding` says until the returned function is called. */
  bindRollout(id: string, binding: RolloutBinding): () => void;
  /** Stops listening and waits for open requests to finish. */
  close(): Promise<void>;
}

/** A counting semaphore with a bounded queue (429 beyond it). */
class Slots {
  #free: number;
  readonly #queue: (() => void)[] = [];
  readonly #maxQueue: number;
  constructor(n: number, maxQueue: number) {
    this.#free = n;
    this.#maxQueue = maxQueue;
  }
  async acquire(signal: AbortSignal): Promise<() => void> {
    if (this.#free > 0) {
      this.#free--;
      return () => this.#release();
    }
    if (this.#queue.length >= this.#maxQueue)
      throw new GatewayError(429, 'too many requests are waiting for the policy; retry later', {
        code: 'rate_limit_exceeded',
      });
    await new Promise<void>((resolve, reject) => {
      const wake = () => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      };
      const onAbort = () => {
        const i = this.#queue.indexOf(wake);
        if (i >= 0) this.#queue.splice(i, 1);
        reject(signal.reason);
      };
      this.#queue.push(wake);
      signal.addEventListener('abort', onAbort, { once: true });
    });
    return () => this.#release();
  }
  #release() {
    const next = this.#queue.shift();
    if (next) next();
    else this.#free++;
  }
}

/** Whether two JSON texts hold the same value (key order aside). */
function sameJson(a: string, b: string): boolean {
  const canon = (v: unknown): unknown =>
    Array.isArray(v)
      ? v.map(canon)
      : v !== null && typeof v === 'object'
        ? Object.fromEntries(
            Object.keys(v)
              .sort()
              .map((k) => [k, canon((v as Record<string, unknown>)[k])]),
          )
        : v;
  try {
    return JSON.stringify(canon(JSON.parse(a))) === JSON.stringify(canon(JSON.parse(b)));
  } catch {
    return false;
  }
}

/** A 32-bit seed from any seed and a call index. */
function callSeed(seed: number | string, index: number): number {
  return createHash('sha256').update(`${seed}:call:${index}`).digest().readUInt32LE(0);
}

interface GenerateArgs {
  model: string;
  promptIds: number[];
  maxTokens: number | null | undefined;
  temperature: number | null | undefined;
  topP: number | null | undefined;
  stop: string | string[] | null | undefined;
  seed: number | null | undefined;
  rolloutId: string;
  /** The request named its rollout (rolloutSampling applies). */
  named: boolean;
  index: number;
  signal: AbortSignal;
}

interface Generated {
  result: PolicyGenerateResult;
  queueMs: number;
  generateMs: number;
}

export async function createPolicyGateway(options: PolicyGatewayOptions): Promise<PolicyGateway> {
  const o = options;
  const host = o.host;
  const tokenizer = host.tokenizer;
  const recorder = o.recorder ?? new RolloutRecorder();
  const maxBody = o.maxBodyBytes ?? 8 * 2 ** 20;
  const slots = new Slots(o.maxConcurrency ?? 256, o.maxQueue ?? 4096);
  const bindings = new Map<string, RolloutBinding>();
  const key = o.apiKey === undefined ? undefined : Buffer.from(o.apiKey);

  const authorized = (req: IncomingMessage): boolean => {
    if (!key) return true;
    const m = /^Bearer\s+(.+)$/i.exec(req.headers.authorization ?? '');
    const given = Buffer.from(m?.[1]?.trim() ?? '');
    return given.length === key.length && timingSafeEqual(given, key);
  };

  /** rolloutSampling's warnings, one set per model. */
  const warners = new Map<string, SamplingWarner>();

  const engineFor = (model: string, rolloutId: string): PolicyEngine => {
    const engine = bindings.get(rolloutId)?.engines?.[model] ?? host.engine(model);
    if (!engine)
      throw new GatewayError(
        404,
        `The model \`${model}\` does not exist or you do not have access to it.`,
        { type: 'invalid_request_error', param: 'model', code: 'model_not_found' },
      );
    return engine;
  };

  const modelList = () => {
    const seen = new Map(host.models().map((m) => [m.id, m]));
    for (const b of bindings.values())
      for (const id of Object.keys(b.engines ?? {}))
        if (!seen.has(id)) seen.set(id, { id, parent: host.baseModel });
    return [...seen.values()].map((m) => ({
      id: m.id,
      object: 'model',
      created: 0,
      owned_by: 'flowgrpo',
      root: m.path ?? m.id,
      parent: m.parent ?? null,
      ...(host.maxContext !== undefined && { max_model_len: host.maxContext }),
    }));
  };

  async function generate(a: GenerateArgs): Promise<Generated> {
    const engine = engineFor(a.model, a.rolloutId);
    const room = host.maxContext === undefined ? undefined : host.maxContext - a.promptIds.length;
    if (room !== undefined && room <= 0)
      throw new GatewayError(
        400,
        `This model's maximum context length is ${host.maxContext} tokens. However, your messages resulted in ${a.promptIds.length} tokens.`,
        { param: 'messages', code: 'context_length_exceeded' },
      );
    const wanted = a.maxTokens ?? o.defaultMaxTokens ?? 1024;
    let maxTokens = room === undefined ? wanted : Math.min(wanted, room);
    let temperature = a.temperature ?? 1;
    let topP = a.topP;
    const imposed = a.named ? o.rolloutSampling?.(a.model) : undefined;
    if (imposed) {
      const warn = warners.get(a.model) ?? samplingWarner(`the trained role '${a.model}'`);
      warners.set(a.model, warn);
      const asked = { temperature: a.temperature, topP: a.topP, maxTokens };
      ({ temperature, topP, maxTokens } = imposeSampling(asked, imposed, warn));
    }
    const bound = bindings.get(a.rolloutId)?.seed;
    const seed = a.seed ?? (bound !== undefined ? callSeed(bound, a.index) : undefined);
    const t0 = performance.now();
    const release = await slots.acquire(a.signal);
    const t1 = performance.now();
    try {
      const result = await engine.generate({
        promptTokens: a.promptIds,
        maxTokens,
        temperature,
        ...(topP != null && { topP }),
        ...(a.stop != null && { stop: typeof a.stop === 'string' ? [a.stop] : a.stop }),
        ...(seed !== undefined && { seed }),
        signal: a.signal,
      });
      return { result, queueMs: t1 - t0, generateMs: performance.now() - t1 };
    } catch (e) {
      if (GatewayError.isInstance(e)) throw e;
      if (e instanceof RangeError || TokenOutOfVocabularyError.isInstance(e))
        throw badRequest(e.message, null, 'invalid_request');
      // OpenAI's own code for a prompt that does not fit the model's context.
      if (ContextLengthExceededError.isInstance(e))
        throw badRequest(e.message, 'max_tokens', 'context_length_exceeded');
      throw e;
    } finally {
      release();
    }
  }

  /** The rollout a request belongs to: header, /rollouts/<id> path, metadata, else its own. */
  function rolloutOf(
    req: IncomingMessage,
    fromPath: string | undefined,
    body: unknown,
  ): { rolloutId: string; named: boolean } {
    const header = req.headers[ROLLOUT_HEADER];
    const meta = (body as { metadata?: { rollout_id?: unknown } } | undefined)?.metadata
      ?.rollout_id;
    const id =
      (typeof header === 'string' ? header : undefined) ??
      fromPath ??
      (typeof meta === 'string' ? meta : undefined);
    if (id === undefined) return { rolloutId: `call-${randomUUID()}`, named: false };
    if (!ROLLOUT_ID.test(id))
      throw badRequest(
        'a rollout id is 1-200 characters of letters, digits and ._:@-',
        ROLLOUT_HEADER,
      );
    return { rolloutId: id, named: true };
  }

  const tokenText = (id: number, asIds: boolean) =>
    asIds ? `token_id:${id}` : tokenizer.decode([id]);

  /**
   * The text length each completion token brings (decoded incrementally over a short window, as
   * vLLM's detokenizer does; a token that ends inside a UTF-8 character waits for the next).
   * Only chunk boundaries come from here: streamed text is cut from the final content itself.
   */
  function tokenPieceLengths(ids: readonly number[]): number[] {
    const out: number[] = [];
    // An empty window is '' without a call to the tokenizer.
    const decode = (a: number, b: number) =>
      b <= a ? '' : tokenizer.decode(ids.slice(a, b), { skipSpecialTokens: true });
    let prefix = 0;
    let read = 0;
    for (let i = 0; i < ids.length; i++) {
      const before = decode(prefix, read);
      const after = decode(prefix, i + 1);
      if (after.length > before.length && !after.endsWith('\uFFFD')) {
        out.push(after.length - before.length);
        prefix = read;
        read = i + 1;
      } else out.push(0);
    }
    return out;
  }

  /**
   * Tool calls this rollout was served come back in later requests' history; SDKs may re-serialise
   * their arguments (the Vercel AI SDK sends JSON.stringify of the parsed input). When a call's id
   * is one the gateway issued and its arguments are the same JSON, the model's own text is put
   * back, so the prompt shows the tokens the model sampled and continuity holds.
   */
  function restoreToolArguments(messages: WireMessage[], rolloutId: string): WireMessage[] {
    const issued = new Map<string, string>();
    for (const c of recorder.get(rolloutId)?.calls ?? [])
      for (const tc of c.toolCalls ?? []) issued.set(tc.id, tc.function.arguments);
    if (issued.size === 0) return messages;
    return messages.map((m) => {
      if (m.role !== 'assistant' || !m.tool_calls?.length) return m;
      return {
        ...m,
        tool_calls: m.tool_calls.map((tc) => {
          const raw = tc.id === undefined ? undefined : issued.get(tc.id);
          return raw !== undefined &&
            raw !== tc.function.arguments &&
            sameJson(raw, tc.function.arguments)
            ? { ...tc, function: { ...tc.function, arguments: raw } }
            : tc;
        }),
      };
    });
  }

  // ---- /v1/chat/completions ------------------------------------------------------------------
  /** Render → sample → parse → record; `send` answers in the endpoint's format. */
  async function chat(
    body: ChatCompletionRequest,
    { rolloutId, named }: { rolloutId: string; named: boolean },
    signal: AbortSignal,
    endpoint: RecordedCall['endpoint'],
    send: (call: RecordedCall, content: string | null, toolCalls: ParsedToolCall[]) => void,
  ): Promise<void> {
    const started = Date.now();
    const t0 = performance.now();
    const rendered = renderChat(tokenizer, restoreToolArguments(body.messages, rolloutId), {
      tools: body.tools ?? null,
      toolChoice: body.tool_choice ?? null,
      variables: { ...o.chatTemplateVariables, ...body.chat_template_kwargs },
    });
    const promptIds = Array.from(tokenizer.encode(rendered.text));
    const index = recorder.begin(rolloutId);
    let call: RecordedCall | undefined;
    try {
      const g = await generate({
        model: body.model,
        promptIds,
        maxTokens: body.max_completion_tokens ?? body.max_tokens,
        temperature: body.temperature,
        topP: body.top_p,
        stop: body.stop,
        seed: body.seed,
        rolloutId,
        named,
        index,
        signal,
      });
      // A client that went away never saw this reply: it is not part of its trajectory.
      signal.throwIfAborted();
      const r = g.result;
      const text = rendered.prefill + r.text;
      const parsed = parseAssistantText(
        text,
        `${rolloutId}:${index}`,
        rendered.toolsInPrompt || rendered.prefill !== '',
      );
      const finish =
        r.finishReason === 'length'
          ? 'length'
          : parsed.toolCalls.length > 0
            ? 'tool_calls'
            : 'stop';
      call = {
        index,
        model: body.model,
        endpoint,
        promptTokens: Int32Array.from(r.promptTokens),
        completionTokens: Int32Array.from(r.actionTokens),
        logprobs: Float32Array.from(r.actionLogprobs),
        text,
        ...(rendered.prefill && { prefill: rendered.prefill }),
        ...(parsed.toolCalls.length > 0 && { toolCalls: parsed.toolCalls }),
        finishReason: finish,
        startedAt: started,
        timings: { queue_ms: g.queueMs, generate_ms: g.generateMs, total_ms: 0 },
      };
      call.timings.total_ms = performance.now() - t0;
      send(call, parsed.content, parsed.toolCalls);
    } finally {
      recorder.end(rolloutId, call);
      if (call) o.onCall?.(rolloutId, call);
    }
  }

  function sendChat(
    res: ServerResponse,
    body: ChatCompletionRequest,
    rolloutId: string,
    call: RecordedCall,
    content: string | null,
    toolCalls: ParsedToolCall[],
  ) {
    const id = `chatcmpl-${randomUUID().replaceAll('-', '')}`;
    const created = Math.floor(call.startedAt / 1000);
    const asIds = body.return_tokens_as_token_ids === true;
    const ids = Array.from(call.completionTokens);
    const lp = (i: number) => {
      const token = tokenText(ids[i]!, asIds);
      return {
        token,
        logprob: call.logprobs[i]!,
        bytes: Array.from(Buffer.from(token, 'utf8')),
        top_logprobs: [],
      };
    };
    const usage = {
      prompt_tokens: call.promptTokens.length,
      completion_tokens: ids.length,
      total_tokens: call.promptTokens.length + ids.length,
    };
    const headers = { [ROLLOUT_HEADER]: rolloutId };
    const tokenIds = body.return_token_ids === true;
    if (!body.stream) {
      sendJson(
        res,
        200,
        {
          id,
          object: 'chat.completion',
          created,
          model: body.model,
          choices: [
            {
              index: 0,
              message: {
                role: 'assistant',
                content,
                ...(toolCalls.length > 0 && { tool_calls: toolCalls }),
              },
              logprobs: body.logprobs ? { content: ids.map((_, i) => lp(i)) } : null,
              finish_reason: call.finishReason,
              ...(tokenIds && { token_ids: ids }),
            },
          ],
          usage,
          ...(tokenIds && { prompt_token_ids: Array.from(call.promptTokens) }),
        },
        headers,
      );
      return;
    }
    const sse = startSse(res, headers);
    const chunk = (delta: object, extra: object = {}) => ({
      id,
      object: 'chat.completion.chunk',
      created,
      model: body.model,
      choices: [{ index: 0, delta, logprobs: null, finish_reason: null, ...extra }],
    });
    sse.send({
      ...chunk({ role: 'assistant', content: '' }),
      ...(tokenIds && { prompt_token_ids: Array.from(call.promptTokens) }),
    });
    // Content token by token (as far as the content reaches), each with its logprob if asked.
    const visible = content ?? '';
    let sent = 0;
    let reached = 0;
    tokenPieceLengths(ids).forEach((n, i) => {
      reached += n;
      const take = visible.slice(sent, Math.max(sent, Math.min(visible.length, reached)));
      sent += take.length;
      if (take === '' && !body.logprobs) return;
      sse.send(
        chunk(take === '' ? {} : { content: take }, {
          ...(body.logprobs && { logprobs: { content: [lp(i)] } }),
          ...(tokenIds && { token_ids: [ids[i]] }),
        }),
      );
    });
    if (sent < visible.length) sse.send(chunk({ content: visible.slice(sent) }));
    toolCalls.forEach((tc, i) => {
      sse.send(
        chunk({
          tool_calls: [
            {
              index: i,
              id: tc.id,
              type: 'function',
              function: { name: tc.function.name, arguments: '' },
            },
          ],
        }),
      );
      sse.send(
        chunk({ tool_calls: [{ index: i, function: { arguments: tc.function.arguments } }] }),
      );
    });
    sse.send(chunk({}, { finish_reason: call.finishReason }));
    if (body.stream_options?.include_usage)
      sse.send({
        id,
        object: 'chat.completion.chunk',
        created,
        model: body.model,
        choices: [],
        usage,
      });
    sse.done();
  }

  // ---- /v1/completions -------------------------------------------------------------------------
  async function completion(
    res: ServerResponse,
    body: CompletionRequest,
    { rolloutId, named }: { rolloutId: string; named: boolean },
    signal: AbortSignal,
  ): Promise<void> {
    const started = Date.now();
    const t0 = performance.now();
    const p = body.prompt;
    let promptIds: number[];
    if (typeof p === 'string') promptIds = Array.from(tokenizer.encode(p, { addBos: true }));
    else if (typeof p[0] === 'string')
      promptIds = Array.from(tokenizer.encode(p[0], { addBos: true }));
    else if (Array.isArray(p[0])) promptIds = p[0] as number[];
    else promptIds = p as number[];
    if (promptIds.length === 0) throw badRequest('the prompt is empty', 'prompt');
    const index = recorder.begin(rolloutId);
    let call: RecordedCall | undefined;
    try {
      const g = await generate({
        model: body.model,
        promptIds,
        maxTokens: body.max_tokens ?? 16,
        temperature: body.temperature,
        topP: body.top_p,
        stop: body.stop,
        seed: body.seed,
        rolloutId,
        named,
        index,
        signal,
      });
      const r = g.result;
      call = {
        index,
        model: body.model,
        endpoint: 'completions',
        promptTokens: Int32Array.from(r.promptTokens),
        completionTokens: Int32Array.from(r.actionTokens),
        logprobs: Float32Array.from(r.actionLogprobs),
        text: r.text,
        finishReason: r.finishReason === 'length' ? 'length' : 'stop',
        startedAt: started,
        timings: {
          queue_ms: g.queueMs,
          generate_ms: g.generateMs,
          total_ms: performance.now() - t0,
        },
      };
      const asIds = body.return_tokens_as_token_ids === true;
      const ids = Array.from(call.completionTokens);
      const tokens = ids.map((t) => tokenText(t, asIds));
      const offsets: number[] = [];
      tokens.reduce((at, t) => {
        offsets.push(at);
        return at + t.length;
      }, 0);
      const want = body.logprobs !== undefined && body.logprobs !== null;
      const logprobs = want
        ? {
            tokens,
            token_logprobs: Array.from(call.logprobs),
            top_logprobs: tokens.map((t, i) => ({ [t]: call!.logprobs[i]! })),
            text_offset: offsets,
          }
        : null;
      const id = `cmpl-${randomUUID().replaceAll('-', '')}`;
      const created = Math.floor(started / 1000);
      const tokenIds = body.return_token_ids === true;
      const usage = {
        prompt_tokens: promptIds.length,
        completion_tokens: ids.length,
        total_tokens: promptIds.length + ids.length,
      };
      const choice = {
        index: 0,
        text: r.text,
        logprobs,
        finish_reason: call.finishReason,
        ...(tokenIds && { token_ids: ids, prompt_token_ids: promptIds }),
      };
      const headers = { [ROLLOUT_HEADER]: rolloutId };
      if (!body.stream) {
        sendJson(
          res,
          200,
          { id, object: 'text_completion', created, model: body.model, choices: [choice], usage },
          headers,
        );
        return;
      }
      const sse = startSse(res, headers);
      sse.send({ id, object: 'text_completion', created, model: body.model, choices: [choice] });
      if (body.stream_options?.include_usage)
        sse.send({ id, object: 'text_completion', created, model: body.model, choices: [], usage });
      sse.done();
    } finally {
      recorder.end(rolloutId, call);
      if (call) o.onCall?.(rolloutId, call);
    }
  }

  // ---- rollouts --------------------------------------------------------------------------------
  const rolloutJson = (r: RecordedRollout) => ({
    id: r.id,
    object: 'rollout',
    created_at: r.createdAt,
    in_flight: r.inFlight,
    ...(r.reward !== undefined && { reward: r.reward }),
    ...(r.roleRewards && { role_rewards: r.roleRewards }),
    ...(r.finalAnswer !== undefined && { final_answer: r.finalAnswer }),
    calls: r.calls.map((c) => ({
      index: c.index,
      model: c.model,
      endpoint: c.endpoint,
      prompt_token_ids: Array.from(c.promptTokens),
      token_ids: Array.from(c.completionTokens),
      logprobs: Array.from(c.logprobs),
      text: c.text,
      ...(c.toolCalls && { tool_calls: c.toolCalls }),
      finish_reason: c.finishReason,
      started_at: c.startedAt,
      timings: c.timings,
    })),
  });

  // ---- routing ---------------------------------------------------------------------------------
  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const abort = new AbortController();
    res.on('close', () => {
      if (!res.writableEnded) abort.abort(new Error('the client closed the connection'));
    });
    const url = new URL(req.url ?? '/', 'http://gateway');
    let path = url.pathname.replace(/\/+$/, '') || '/';
    let fromPath: string | undefined;
    const scoped = /^\/rollouts\/([^/]+)(\/.*)$/.exec(path);
    if (scoped) {
      fromPath = decodeURIComponent(scoped[1]!);
      path = scoped[2]!;
    }
    const method = req.method ?? 'GET';
    if (path === '/health' || path === '/v1/health') {
      res.writeHead(200).end();
      return;
    }
    if (!authorized(req))
      throw new GatewayError(
        401,
        'Incorrect API key provided. Send it as "Authorization: Bearer <key>".',
        { code: 'invalid_api_key' },
      );
    const only = (m: string) => {
      if (method !== m)
        throw new GatewayError(405, `${method} is not allowed on ${path}; use ${m}`, {
          code: 'method_not_allowed',
        });
    };
    if (path === '/v1/models') {
      only('GET');
      sendJson(res, 200, { object: 'list', data: modelList() });
      return;
    }
    const modelPath = /^\/v1\/models\/(.+)$/.exec(path);
    if (modelPath) {
      only('GET');
      const id = decodeURIComponent(modelPath[1]!);
      const m = modelList().find((x) => x.id === id);
      if (!m)
        throw new GatewayError(404, `The model '${id}' does not exist`, {
          param: 'model',
          code: 'model_not_found',
        });
      sendJson(res, 200, m);
      return;
    }
    if (path === '/v1/chat/completions') {
      only('POST');
      const raw = await readJson(req, maxBody);
      const body = parseBody(ChatCompletionRequestSchema, raw);
      const rollout = rolloutOf(req, fromPath, body);
      await chat(body, rollout, abort.signal, 'chat.completions', (call, content, calls) =>
        sendChat(res, body, rollout.rolloutId, call, content, calls),
      );
      return;
    }
    if (path === '/v1/responses') {
      only('POST');
      const raw = await readJson(req, maxBody);
      const request = parseBody(ResponsesRequestSchema, raw);
      const body = parseBody(ChatCompletionRequestSchema, responsesToChat(request));
      const rollout = rolloutOf(req, fromPath, body);
      const { rolloutId } = rollout;
      await chat(body, rollout, abort.signal, 'responses', (call, content, toolCalls) => {
        const parts = {
          id: `resp_${randomUUID().replaceAll('-', '')}`,
          createdAt: call.startedAt,
          model: body.model,
          content,
          toolCalls,
          finishReason: call.finishReason,
          usage: { input: call.promptTokens.length, output: call.completionTokens.length },
          request,
        };
        const headers = { [ROLLOUT_HEADER]: rolloutId };
        if (!request.stream) {
          const status = call.finishReason === 'length' ? 'incomplete' : 'completed';
          sendJson(res, 200, responseObject(parts, status), headers);
          return;
        }
        res.writeHead(200, {
          'content-type': 'text/event-stream; charset=utf-8',
          'cache-control': 'no-cache',
          connection: 'keep-alive',
          ...headers,
        });
        for (const e of responseEvents(parts))
          res.write(`event: ${String(e.type)}\ndata: ${JSON.stringify(e)}\n\n`);
        res.end();
      });
      return;
    }
    if (path === '/v1/completions') {
      only('POST');
      const raw = await readJson(req, maxBody);
      const body = parseBody(CompletionRequestSchema, raw);
      await completion(res, body, rolloutOf(req, fromPath, body), abort.signal);
      return;
    }
    if (path === '/v1/load_lora_adapter' || path === '/v1/unload_lora_adapter') {
      only('POST');
      if (o.loraUpdates === false)
        throw new GatewayError(404, `Unknown request URL: POST ${path}`, { code: 'unknown_url' });
      const raw = await readJson(req, maxBody);
      if (path === '/v1/load_lora_adapter') {
        const b = parseBody(LoadLoraRequestSchema, raw);
        await host.loadAdapter(b.lora_name, b.lora_path, { inplace: b.load_inplace === true });
        res
          .writeHead(200, { 'content-type': 'text/plain' })
          .end(`Success: LoRA adapter '${b.lora_name}' added successfully.`);
      } else {
        const b = parseBody(UnloadLoraRequestSchema, raw);
        await host.unloadAdapter(b.lora_name);
        res
          .writeHead(200, { 'content-type': 'text/plain' })
          .end(`Success: LoRA adapter '${b.lora_name}' removed successfully.`);
      }
      return;
    }
    if (path === '/v1/rollouts') {
      only('GET');
      sendJson(res, 200, {
        object: 'list',
        data: recorder.ids().map((id) => {
          const r = recorder.get(id)!;
          return {
            id,
            calls: r.calls.length,
            in_flight: r.inFlight,
            ...(r.reward !== undefined && { reward: r.reward }),
          };
        }),
      });
      return;
    }
    const rolloutPath = /^\/v1\/rollouts\/([^/]+)(\/reward)?$/.exec(path);
    if (rolloutPath) {
      const id = decodeURIComponent(rolloutPath[1]!);
      const missing = () =>
        new GatewayError(404, `no rollout '${id}' has been recorded`, {
          param: 'rollout_id',
          code: 'rollout_not_found',
        });
      if (rolloutPath[2]) {
        only('POST');
        const b = parseBody(RewardRequestSchema, await readJson(req, maxBody));
        const r = recorder.setReward(id, {
          reward: b.reward,
          ...(b.role_rewards && { roleRewards: b.role_rewards }),
          ...(b.final_answer !== undefined && { finalAnswer: b.final_answer }),
          ...(b.details && { details: b.details }),
          ...(b.group_id !== undefined && { groupId: b.group_id }),
        });
        if (!r) throw missing();
        sendJson(res, 200, {
          id,
          object: 'rollout.reward',
          reward: b.reward,
          calls: r.calls.length,
        });
        return;
      }
      if (method === 'DELETE') {
        if (!recorder.delete(id)) throw missing();
        sendJson(res, 200, { id, object: 'rollout', deleted: true });
        return;
      }
      only('GET');
      const r = recorder.get(id);
      if (!r) throw missing();
      sendJson(res, 200, rolloutJson(r));
      return;
    }
    throw new GatewayError(404, `Unknown request URL: ${method} ${url.pathname}`, {
      code: 'unknown_url',
    });
  }

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((error) => {
      if (res.headersSent) {
        // Mid-stream: an error event, then the end of the stream.
        if (!res.writableEnded) {
          res.write(`data: ${JSON.stringify(errorBody(error).body)}\n\n`);
          res.end();
        }
        return;
      }
      if (res.destroyed) return;
      const { status, body } = errorBody(error);
      sendJson(res, status, body, status === 413 ? { connection: 'close' } : {});
    });
  });
  const hostname = o.hostname ?? '127.0.0.1';
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(o.port ?? 0, hostname, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const shown = hostname.includes(':') ? `[${hostname}]` : hostname;
  const url = `http://${shown === '0.0.0.0' ? '127.0.0.1' : shown}:${port}`;

  return {
    url,
    baseURL: `${url}/v1`,
    port,
    host,
    recorder,
    rolloutBaseURL: (id: string) => {
      if (!ROLLOUT_ID.test(id)) throw new RangeError(`invalid rollout id '${id}'`);
      return `${url}/rollouts/${encodeURIComponent(id)}/v1`;
    },
    bindRollout(id, binding) {
      bindings.set(id, binding);
      return () => {
        if (bindings.get(id) === binding) bindings.delete(id);
      };
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections?.();
      }),
  };
}
