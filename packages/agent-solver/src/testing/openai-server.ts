import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

// A scripted OpenAI-compatible server for tests (ours and apps built on @flowgrpo/agent, through
// `@flowgrpo/agent/testing`): a real node:http server on 127.0.0.1 (random port). Each route has a
// queue of behaviours consumed one per request; when a queue is empty the route's fallback answers.
// Every request is recorded (route, body, headers, arrival and end times) and the server counts
// requests in flight, so tests can assert retries, concurrency and what was sent.

export type TestServerRoute =
  | 'chat'
  | 'completions'
  | 'embeddings'
  | 'models'
  | 'load_lora_adapter'
  | 'unload_lora_adapter';

const ROUTES: Record<string, TestServerRoute> = {
  '/v1/chat/completions': 'chat',
  '/v1/completions': 'completions',
  '/v1/embeddings': 'embeddings',
  '/v1/models': 'models',
  '/v1/load_lora_adapter': 'load_lora_adapter',
  '/v1/unload_lora_adapter': 'unload_lora_adapter',
  // SGLang serves its LoRA routes at the root.
  '/load_lora_adapter': 'load_lora_adapter',
  '/unload_lora_adapter': 'unload_lora_adapter',
};

export interface RecordedRequest {
  route: TestServerRoute;
  method: string;
  path: string;
  headers: Record<string, string | string[] | undefined>;
  /** Parsed JSON body ({} for GET or an unparsable body). */
  body: RequestBody;
  rawBody: string;
  /** Index of this request among all requests to the server. */
  index: number;
  receivedAt: number;
  /** Set when the server finished answering (or the client went away). */
  endedAt?: number;
}

export type JsonObject = { [key: string]: unknown };

/** The request fields the server and tests read; anything else is kept under its own key. */
export interface RequestBody {
  model?: string;
  messages?: Array<{ role: string; content: string | null; name?: string }>;
  prompt?: string | number[] | string[];
  response_format?: {
    type: string;
    json_schema?: { name: string; strict?: boolean; schema: JsonObject };
  };
  max_tokens?: number;
  max_completion_tokens?: number;
  temperature?: number;
  top_p?: number;
  stop?: string[];
  seed?: number;
  logprobs?: boolean | number | null;
  top_logprobs?: number;
  return_token_ids?: boolean;
  return_tokens_as_token_ids?: boolean;
  input?: string | string[];
  encoding_format?: 'float' | 'base64';
  lora_name?: string;
  lora_path?: string;
  load_inplace?: boolean;
  [key: string]: unknown;
}

export interface ReplyUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens?: number;
}

export interface TokenInfo {
  /** Sampled token ids (vLLM `token_ids`, and `token_id:N` strings in logprobs). */
  ids: number[];
  /** Log-probability of each sampled token. */
  logprobs: number[];
  /** Prompt ids returned as vLLM's `prompt_token_ids`. */
  promptIds?: number[];
}

export interface TextReply {
  kind: 'text';
  /** The content, or a function of the request (e.g. answer from the json_schema sent). */
  text: string | ((request: RecordedRequest) => string);
  finishReason?: string;
  usage?: ReplyUsage;
  tokens?: TokenInfo;
  delayMs?: number;
  /**
   * Holds the answer until this settles (e.g. a `gate()` the test opens once the requests it
   * wants to see at the same time have arrived): concurrency without racing a timer.
   */
  waitFor?: PromiseLike<unknown>;
}

export type Behaviour =
  | TextReply
  | { kind: 'refusal'; refusal: string; usage?: ReplyUsage }
  /** Any JSON body with any status. */
  | {
      kind: 'json';
      status?: number;
      body: unknown | ((request: RecordedRequest) => unknown);
      headers?: Record<string, string>;
      delayMs?: number;
    }
  /** A raw body (e.g. malformed JSON) with the given content type. */
  | {
      kind: 'raw';
      status?: number;
      body: string;
      contentType?: string;
      headers?: Record<string, string>;
    }
  | { kind: 'error'; status: number; message?: string; headers?: Record<string, string> }
  /** Never answers; the socket stays open until the client gives up or the server closes. */
  | { kind: 'hang' }
  /** Sends headers and the first part of a JSON body, then destroys the socket. */
  | { kind: 'truncate' }
  /** Destroys the socket before any response. */
  | { kind: 'reset' }
  /** Picks the behaviour from the request (e.g. by system prompt or response_format name). */
  | { kind: 'dynamic'; choose: (request: RecordedRequest) => Behaviour };

/** Behaviour builders. */
export const reply = {
  text: (text: TextReply['text'], extra: Omit<TextReply, 'kind' | 'text'> = {}): TextReply => ({
    kind: 'text',
    text,
    ...extra,
  }),
  /** Answers structured requests with an instance of the json_schema they sent. */
  fromSchema: (extra: Omit<TextReply, 'kind' | 'text'> = {}): TextReply => ({
    kind: 'text',
    text: (req) =>
      JSON.stringify(exampleFromJsonSchema(req.body.response_format?.json_schema?.schema ?? {})),
    ...extra,
  }),
  tokens: (
    text: string,
    tokens: TokenInfo,
    extra: Omit<TextReply, 'kind' | 'text' | 'tokens'> = {},
  ): TextReply => ({
    kind: 'text',
    text,
    tokens,
    ...extra,
  }),
  refusal: (refusal: string): Behaviour => ({ kind: 'refusal', refusal }),
  json: (body: unknown, status = 200, headers?: Record<string, string>): Behaviour => ({
    kind: 'json',
    body,
    status,
    headers,
  }),
  raw: (body: string, contentType = 'application/json', status = 200): Behaviour => ({
    kind: 'raw',
    body,
    contentType,
    status,
  }),
  error: (
    status: number,
    message = `error ${status}`,
    headers?: Record<string, string>,
  ): Behaviour => ({
    kind: 'error',
    status,
    message,
    headers,
  }),
  rateLimit: (retryAfterSeconds: number): Behaviour => ({
    kind: 'error',
    status: 429,
    message: 'rate limited',
    headers: { 'retry-after': String(retryAfterSeconds) },
  }),
  hang: (): Behaviour => ({ kind: 'hang' }),
  truncate: (): Behaviour => ({ kind: 'truncate' }),
  reset: (): Behaviour => ({ kind: 'reset' }),
  dynamic: (choose: (request: RecordedRequest) => Behaviour): Behaviour => ({
    kind: 'dynamic',
    choose,
  }),
};

export interface OpenAITestServerOptions {
  /** Model id in /v1/models and replies (default "test-model"). */
  model?: string;
  /** Replaces the default answer of a route when its queue is empty. */
  fallback?: Partial<Record<TestServerRoute, Behaviour>>;
}

export class OpenAITestServer {
  readonly requests: RecordedRequest[] = [];
  readonly model: string;
  /** LoRA adapters currently loaded (by /v1/load_lora_adapter), name → path. */
  readonly adapters = new Map<string, string>();
  #server: Server;
  #queues = new Map<TestServerRoute, Behaviour[]>();
  #fallback: Partial<Record<TestServerRoute, Behaviour>>;
  #sockets = new Set<Socket>();
  #connections = 0;
  #inFlight = 0;
  #maxInFlight = 0;
  #port = 0;

  private constructor(options: OpenAITestServerOptions) {
    this.model = options.model ?? 'test-model';
    this.#fallback = options.fallback ?? {};
    this.#server = createServer((req, res) => {
      void this.#handle(req, res);
    });
    this.#server.on('connection', (socket) => {
      this.#connections++;
      this.#sockets.add(socket);
      socket.on('close', () => this.#sockets.delete(socket));
    });
  }

  static async start(options: OpenAITestServerOptions = {}): Promise<OpenAITestServer> {
    const s = new OpenAITestServer(options);
    s.#server.listen(0, '127.0.0.1');
    await once(s.#server, 'listening');
    s.#port = (s.#server.address() as AddressInfo).port;
    return s;
  }

  get port(): number {
    return this.#port;
  }

  /** Base URL including /v1, as OpenAI clients expect. */
  get baseURL(): string {
    return `http://127.0.0.1:${this.#port}/v1`;
  }

  get inFlight(): number {
    return this.#inFlight;
  }

  /** Most requests that were being answered at the same time. */
  get maxInFlight(): number {
    return this.#maxInFlight;
  }

  /** TCP connections clients opened to this server so far. */
  get connections(): number {
    return this.#connections;
  }

  /** Adds behaviours to a route's queue, consumed one per request in order. */
  enqueue(route: TestServerRoute, ...behaviours: Behaviour[]): this {
    const q = this.#queues.get(route) ?? [];
    q.push(...behaviours);
    this.#queues.set(route, q);
    return this;
  }

  setFallback(route: TestServerRoute, behaviour: Behaviour): this {
    this.#fallback[route] = behaviour;
    return this;
  }

  /** Behaviours still queued for a route. */
  pending(route: TestServerRoute): number {
    return this.#queues.get(route)?.length ?? 0;
  }

  requestsTo(route: TestServerRoute): RecordedRequest[] {
    return this.requests.filter((r) => r.route === route);
  }

  async close(): Promise<void> {
    for (const socket of this.#sockets) socket.destroy();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const rawBody = Buffer.concat(chunks).toString('utf8');
    const path = (req.url ?? '/').split('?')[0]!;
    const route = ROUTES[path];
    if (!route) {
      sendJson(res, 404, { error: { message: `no route ${path}`, type: 'not_found' } });
      return;
    }
    let body: RequestBody = {};
    try {
      body = rawBody ? (JSON.parse(rawBody) as RequestBody) : {};
    } catch {
      body = {};
    }
    const record: RecordedRequest = {
      route,
      method: req.method ?? 'GET',
      path,
      headers: req.headers,
      body,
      rawBody,
      index: this.requests.length,
      receivedAt: Date.now(),
    };
    this.requests.push(record);
    this.#inFlight++;
    this.#maxInFlight = Math.max(this.#maxInFlight, this.#inFlight);
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      this.#inFlight--;
      record.endedAt = Date.now();
    };
    res.on('close', finish);
    const behaviour =
      this.#queues.get(route)?.shift() ?? this.#fallback[route] ?? this.#default(route);
    try {
      await this.#respond(behaviour, record, res);
    } catch (error) {
      if (!res.headersSent) sendJson(res, 500, { error: { message: String(error) } });
      else res.destroy();
    }
  }

  #default(route: TestServerRoute): Behaviour {
    switch (route) {
      case 'models':
        return {
          kind: 'json',
          body: { object: 'list', data: [{ id: this.model, object: 'model', owned_by: 'test' }] },
        };
      case 'embeddings':
        return {
          kind: 'json',
          body: (req: RecordedRequest) => {
            const inputs: unknown[] = Array.isArray(req.body.input)
              ? req.body.input
              : [req.body.input];
            return {
              object: 'list',
              model: req.body.model ?? this.model,
              data: inputs.map((input, index) => ({
                object: 'embedding',
                index,
                // The openai client asks for base64 (float32 little-endian) unless told otherwise.
                embedding:
                  req.body.encoding_format === 'base64'
                    ? Buffer.from(Float32Array.from(embedText(String(input))).buffer).toString(
                        'base64',
                      )
                    : embedText(String(input)),
              })),
              usage: { prompt_tokens: inputs.length, total_tokens: inputs.length },
            };
          },
        };
      case 'load_lora_adapter':
        return {
          kind: 'json',
          body: (req: RecordedRequest) => {
            const name = String(req.body.lora_name);
            if (this.adapters.has(name) && !req.body.load_inplace) {
              return {
                status: 400,
                error: { message: `The lora adapter '${name}' has already been loaded.` },
              };
            }
            this.adapters.set(name, String(req.body.lora_path));
            return `Success: LoRA adapter '${name}' added successfully.`;
          },
        };
      case 'unload_lora_adapter':
        return {
          kind: 'json',
          body: (req: RecordedRequest) => {
            const name = String(req.body.lora_name);
            if (!this.adapters.delete(name)) {
              return {
                status: 404,
                error: { message: `The lora adapter '${name}' cannot be found.` },
              };
            }
            return `Success: LoRA adapter '${name}' removed successfully.`;
          },
        };
      default:
        return { kind: 'text', text: 'ok' };
    }
  }

  async #respond(b: Behaviour, req: RecordedRequest, res: ServerResponse): Promise<void> {
    if ('delayMs' in b && b.delayMs) await delay(b.delayMs);
    if ('waitFor' in b && b.waitFor) await b.waitFor;
    switch (b.kind) {
      case 'dynamic':
        await this.#respond(b.choose(req), req, res);
        return;
      case 'text': {
        const text = typeof b.text === 'function' ? b.text(req) : b.text;
        sendJson(
          res,
          200,
          this.#completionBody(req, {
            text,
            finishReason: b.finishReason,
            usage: b.usage,
            tokens: b.tokens,
          }),
        );
        return;
      }
      case 'refusal':
        sendJson(
          res,
          200,
          this.#completionBody(req, { text: null, refusal: b.refusal, usage: b.usage }),
        );
        return;
      case 'json': {
        const value = typeof b.body === 'function' ? b.body(req) : b.body;
        // Builders of stateful defaults return {status, error} to signal an error answer.
        if (isErrorAnswer(value)) {
          sendJson(res, value.status, {
            error: { ...value.error, type: 'invalid_request_error', code: value.status },
          });
        } else if (typeof value === 'string') {
          res.writeHead(b.status ?? 200, { 'content-type': 'text/plain', ...b.headers });
          res.end(value);
        } else {
          sendJson(res, b.status ?? 200, value, b.headers);
        }
        return;
      }
      case 'raw':
        res.writeHead(b.status ?? 200, {
          'content-type': b.contentType ?? 'application/json',
          ...b.headers,
        });
        res.end(b.body);
        return;
      case 'error':
        sendJson(
          res,
          b.status,
          {
            error: {
              message: b.message ?? `error ${b.status}`,
              type: 'server_error',
              code: b.status,
            },
          },
          b.headers,
        );
        return;
      case 'hang':
        await once(res, 'close');
        return;
      case 'truncate': {
        const full = JSON.stringify(this.#completionBody(req, { text: 'this answer will be cut' }));
        res.writeHead(200, {
          'content-type': 'application/json',
          'content-length': String(Buffer.byteLength(full)),
        });
        res.write(full.slice(0, Math.floor(full.length / 2)));
        await delay(10);
        res.socket?.destroy();
        return;
      }
      case 'reset':
        req.endedAt = Date.now();
        res.socket?.destroy();
        return;
    }
  }

  #completionBody(
    req: RecordedRequest,
    r: {
      text: string | null;
      refusal?: string;
      finishReason?: string;
      usage?: ReplyUsage;
      tokens?: TokenInfo;
    },
  ): JsonObject {
    const usage = r.usage ?? {
      prompt_tokens: countWords(promptText(req.body)),
      completion_tokens: countWords(r.text ?? r.refusal ?? ''),
    };
    const usageOut = {
      ...usage,
      total_tokens: usage.total_tokens ?? usage.prompt_tokens + usage.completion_tokens,
    };
    const finish_reason = r.finishReason ?? 'stop';
    const model = req.body.model ?? this.model;
    const tokens = r.tokens;
    const asIds = req.body.return_tokens_as_token_ids === true;
    const wantIds = req.body.return_token_ids === true;
    const tokenStr = (id: number, i: number) => (asIds ? `token_id:${id}` : `t${i}`);
    if (req.route === 'completions') {
      const choice: JsonObject = { index: 0, text: r.text ?? '', finish_reason, logprobs: null };
      if (tokens && req.body.logprobs !== undefined && req.body.logprobs !== null) {
        choice.logprobs = {
          tokens: tokens.ids.map(tokenStr),
          token_logprobs: tokens.logprobs,
          top_logprobs: null,
          text_offset: tokens.ids.map(() => 0),
        };
      }
      if (tokens && wantIds) {
        choice.token_ids = tokens.ids;
        choice.prompt_token_ids =
          tokens.promptIds ?? (Array.isArray(req.body.prompt) ? req.body.prompt : null);
      }
      return {
        id: `cmpl-${req.index}`,
        object: 'text_completion',
        created: 0,
        model,
        choices: [choice],
        usage: usageOut,
      };
    }
    const choice: JsonObject = {
      index: 0,
      message: { role: 'assistant', content: r.text, refusal: r.refusal ?? null },
      finish_reason,
      logprobs: null,
    };
    const out: JsonObject = {
      id: `chatcmpl-${req.index}`,
      object: 'chat.completion',
      created: 0,
      model,
      choices: [choice],
      usage: usageOut,
    };
    if (tokens && req.body.logprobs === true) {
      choice.logprobs = {
        content: tokens.ids.map((id, i) => ({
          token: tokenStr(id, i),
          logprob: tokens.logprobs[i],
          bytes: null,
          top_logprobs: [],
        })),
      };
    }
    if (tokens && wantIds) {
      choice.token_ids = tokens.ids;
      out.prompt_token_ids = tokens.promptIds ?? null;
    }
    return out;
  }
}

function isErrorAnswer(value: unknown): value is { status: number; error: JsonObject } {
  return typeof value === 'object' && value !== null && 'status' in value && 'error' in value;
}

function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': String(Buffer.byteLength(text)),
    ...headers,
  });
  res.end(text);
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** The request's prompt as text: chat message contents joined, or the completions prompt. */
export function promptText(body: RequestBody): string {
  if (Array.isArray(body.messages))
    return body.messages.map((m) => String(m.content ?? '')).join(' ');
  if (typeof body.prompt === 'string') return body.prompt;
  if (Array.isArray(body.prompt)) return body.prompt.join(' ');
  return '';
}

/** The default usage counts whitespace-separated words, so tests can derive it by hand. */
export function countWords(text: string): number {
  const t = text.trim();
  return t === '' ? 0 : t.split(/\s+/).length;
}

/** A deterministic 8-dimensional vector from a text's character codes. */
export function embedText(text: string): number[] {
  const v = new Array<number>(8).fill(0);
  for (let i = 0; i < text.length; i++) v[i % 8]! += text.charCodeAt(i) / 1000;
  return v;
}

/**
 * A minimal instance of a JSON Schema: first enum value / const, "x" for strings, 1 for numbers,
 * true for booleans, one item for arrays, every property for objects, the first non-null branch
 * of anyOf/oneOf. $ref to #/$defs/… and # are followed.
 */
export function exampleFromJsonSchema(
  schema: JsonObject,
  root: JsonObject = schema,
  depth = 0,
): unknown {
  if (depth > 16) return null;
  if (typeof schema.$ref === 'string') {
    const ref = schema.$ref;
    const defs = (root.$defs ?? {}) as Record<string, JsonObject>;
    const target = ref === '#' ? root : defs[ref.replace(/^#\/\$defs\//, '')];
    return target ? exampleFromJsonSchema(target, root, depth + 1) : null;
  }
  if ('const' in schema) return schema.const;
  if (Array.isArray(schema.enum)) return schema.enum[0];
  const branches = (schema.anyOf ?? schema.oneOf) as JsonObject[] | undefined;
  if (Array.isArray(branches)) {
    const b = branches.find((x) => x.type !== 'null') ?? branches[0]!;
    return exampleFromJsonSchema(b, root, depth + 1);
  }
  const type = Array.isArray(schema.type)
    ? (schema.type as string[]).find((t) => t !== 'null')
    : schema.type;
  switch (type) {
    case 'object': {
      const out: JsonObject = {};
      for (const [k, v] of Object.entries(
        (schema.properties ?? {}) as Record<string, JsonObject>,
      )) {
        out[k] = exampleFromJsonSchema(v, root, depth + 1);
      }
      return out;
    }
    case 'array':
      return depth > 8
        ? []
        : [exampleFromJsonSchema((schema.items ?? {}) as JsonObject, root, depth + 1)];
    case 'string':
      return 'x';
    case 'integer':
    case 'number':
      return typeof schema.minimum === 'number' ? schema.minimum : 1;
    case 'boolean':
      return true;
    default:
      return null;
  }
}
