import { ConfigError, type LLMUsage } from '@flowgrpo/core';
import OpenAI, { type ClientOptions } from 'openai';
import { cappedFetch, DEFAULT_MAX_RESPONSE_BYTES } from '../engines/capped-fetch.js';
import { LLMMalformedReplyError, LLMRequestError } from '../engines/errors.js';
import { mapFinishReason, toOpenAIMessage, usageOf } from '../engines/openai-engine.js';
import { isTokenId } from '../engines/reply-shape.js';
import {
  classifyFailure,
  type RetryOptions,
  resolveRetryOptions,
  runWithRetries,
} from '../engines/retry.js';
import { Semaphore } from '../engines/semaphore.js';
import {
  type AdapterRef,
  type PolicyEngine,
  type PolicyGenerateRequest,
  type PolicyGenerateResult,
  PolicyResponseError,
  type PolicyTokenizer,
  promptKind,
} from './policy-engine.js';
import { type BalanceStrategy, type PooledServer, ServerPool } from './server-pool.js';
import { checkChat, checkCompletion, type WireChat, type WireCompletion } from './wire-reply.js';

// A PolicyEngine over vLLM (or SGLang) OpenAI-compatible servers. Per request it asks for:
// - `logprobs` (completions: 1; chat: true) — the sampled token's log-probability;
// - `return_tokens_as_token_ids: true` (vLLM) — logprob tokens come back as "token_id:<id>",
//   which gives ids aligned one-to-one with the logprobs even for tokens that are not valid
//   UTF-8 on their own;
// - `return_token_ids: true` (vLLM ≥ 0.10.2) — `prompt_token_ids` (per choice on /completions,
//   top level on /chat/completions) and the choice's `token_ids`.
// The action ids come from the "token_id:" logprob tokens, else from `token_ids` when its length
// matches the logprobs. Prompt ids come from `prompt_token_ids`, else from the request's own
// promptTokens, else from the tokenizer hook. `prompt_logprobs` is not requested: the trainer
// recomputes old/ref logprobs of the prompt itself when it needs them.

export interface OpenAIPolicyEngineOptions {
  /** Base model name as served (`--served-model-name`). */
  model: string;
  /** One or several servers, each like http://host:8000/v1. */
  baseURLs: string | string[];
  /** Sent to every server (vLLM's --api-key); default "EMPTY". */
  apiKey?: string | undefined;
  defaultHeaders?: Record<string, string> | undefined;
  /** Per-attempt timeout (default 300 s: long rollouts). */
  timeoutMs?: number | undefined;
  retry?: RetryOptions | undefined;
  /** Requests in flight across all servers (default 64). */
  maxConcurrency?: number | undefined;
  balance?: BalanceStrategy | undefined;
  /** How long a failing server is skipped before being tried again (default 10 s). */
  serverCooldownMs?: number | undefined;
  /** The clock the server cooldowns are measured with (default Date.now; tests pass their own). */
  now?: (() => number) | undefined;
  tokenizer?: PolicyTokenizer | undefined;
  /**
   * How `messages` prompts are sent: 'server' uses /chat/completions (the server applies the chat
   * template); 'local' renders them with tokenizer.applyChatTemplate and uses /completions.
   */
  chatTemplate?: 'server' | 'local' | undefined;
  /**
   * LoRA routes: 'vllm' → `<baseURL>/load_lora_adapter` (i.e. /v1/…, needs
   * VLLM_ALLOW_RUNTIME_LORA_UPDATING=True), generations name the adapter in `model`; 'sglang' →
   * `/load_lora_adapter` at the server root, generations name it in `lora_path` (SGLang ignores
   * a `model` that is not "base:adapter").
   */
  loraRoutes?: 'vllm' | 'sglang' | undefined;
  /** How updateAdapter reloads an adapter under an unchanged name (default 'replace'). */
  adapterUpdate?: 'replace' | 'inplace' | undefined;
  /** Extra request fields sent as is (e.g. `top_k`, `skip_special_tokens`). */
  extraBody?: Record<string, unknown> | undefined;
  /**
   * The fetch requests go through (a proxy's, a test's). Default: undici's `request` on a
   * keep-alive pool (engines/capped-fetch.ts), lighter than the global fetch.
   */
  fetch?: ClientOptions['fetch'] | undefined;
  /** Largest reply body read, in bytes (default 64 MiB); a longer one fails with LLM_RESPONSE_TOO_LARGE. */
  maxResponseBytes?: number | undefined;
}

export class OpenAIPolicyEngine implements PolicyEngine {
  readonly model: string;
  readonly tokenizer: PolicyTokenizer | undefined;
  readonly pool: ServerPool<OpenAI>;
  readonly usage: LLMUsage = { promptTokens: 0, completionTokens: 0, totalTokens: 0 };
  /** The adapter generations use, once one was loaded. */
  adapter: AdapterRef | undefined;
  readonly #options: OpenAIPolicyEngineOptions;
  readonly #retry;
  readonly #semaphore: Semaphore;

  constructor(options: OpenAIPolicyEngineOptions) {
    this.#options = options;
    this.model = options.model;
    this.tokenizer = options.tokenizer;
    const urls = Array.isArray(options.baseURLs) ? options.baseURLs : [options.baseURLs];
    this.pool = new ServerPool(
      urls.map((baseURL) => ({
        baseURL,
        client: new OpenAI({
          baseURL,
          apiKey: options.apiKey ?? 'EMPTY',
          defaultHeaders: options.defaultHeaders,
          maxRetries: 0,
          fetch: cappedFetch(options.fetch, options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES),
        }),
      })),
      { strategy: options.balance, cooldownMs: options.serverCooldownMs, now: options.now },
    );
    this.#retry = resolveRetryOptions(options.retry);
    this.#semaphore = new Semaphore(options.maxConcurrency ?? 64);
  }

  /** The model name requests carry: the loaded adapter's, else the base model's. */
  get servedModel(): string {
    return this.adapter?.name ?? this.model;
  }

  async generate(request: PolicyGenerateRequest): Promise<PolicyGenerateResult> {
    return this.#generate(request, this.adapter?.name);
  }

  /**
   * This engine — its servers, balancer, concurrency limit, retries and usage — with every
   * request naming the adapter `name` instead of the one loaded last: rollouts of one policy
   * version keep their adapter while a newer one is loaded beside it (GRPO's max_staleness).
   */
  withAdapter(name: string): PolicyEngine {
    return {
      model: this.model,
      ...(this.tokenizer && { tokenizer: this.tokenizer }),
      generate: (request) => this.#generate(request, name),
    };
  }

  /** A generation from the adapter `adapter` (a loaded name), or the base model when undefined. */
  async #generate(
    request: PolicyGenerateRequest,
    adapter: string | undefined,
  ): Promise<PolicyGenerateResult> {
    const servedModel = adapter ?? this.model;
    const kind = promptKind(request);
    const localTemplate = kind === 'messages' && this.#options.chatTemplate === 'local';
    if (localTemplate && !this.tokenizer?.applyChatTemplate) {
      throw new ConfigError("chatTemplate 'local' needs a tokenizer with applyChatTemplate", {
        key: 'chatTemplate',
      });
    }
    const promptText =
      kind === 'text'
        ? request.prompt!
        : localTemplate
          ? this.tokenizer!.applyChatTemplate!(request.messages!, { addGenerationPrompt: true })
          : undefined;
    const useChat = kind === 'messages' && !localTemplate;
    // vLLM picks the adapter by the request's `model` (the adapter's name). SGLang runs its base
    // model for a `model` that names no adapter, whatever it says: the adapter goes in its
    // `lora_path` field (the adapter's name, as loaded), and `model` stays the base model's.
    const sglangAdapter = this.#options.loraRoutes === 'sglang' ? adapter : undefined;
    const body: Record<string, unknown> = {
      ...this.#options.extraBody,
      model: sglangAdapter ? this.model : servedModel,
      ...(sglangAdapter && { lora_path: sglangAdapter }),
      max_tokens: request.maxTokens,
      return_tokens_as_token_ids: true,
      return_token_ids: true,
    };
    if (useChat) {
      body.messages = request.messages!.map(toOpenAIMessage);
      body.logprobs = true;
    } else {
      body.prompt = kind === 'tokens' ? Array.from(request.promptTokens!) : promptText;
      body.logprobs = 1;
    }
    if (request.temperature !== undefined) body.temperature = request.temperature;
    if (request.topP !== undefined) body.top_p = request.topP;
    if (request.stop !== undefined && request.stop.length > 0) body.stop = request.stop;
    if (request.seed !== undefined) body.seed = request.seed;

    const path = useChat ? '/chat/completions' : '/completions';
    let lastServer: PooledServer<OpenAI> | undefined;
    const timeoutMs = request.timeoutMs ?? this.#options.timeoutMs ?? 300_000;
    const what = `policy ${useChat ? 'chat completion' : 'completion'} (${servedModel})`;
    const { wire, server } = await runWithRetries(
      async ({ signal }) => {
        const server = this.pool.pick();
        lastServer = server;
        server.inFlight++;
        try {
          const reply: unknown = await server.client.post(path, {
            body,
            signal,
            timeout: timeoutMs + 5_000,
            maxRetries: 0,
          });
          // Checked inside the attempt: a malformed reply is retried (on another server, when
          // there are several, since it marks this one down).
          const context = { what, baseURL: server.baseURL };
          const wire = useChat ? checkChat(reply, context) : checkCompletion(reply, context);
          this.pool.markOk(server);
          return { wire, server };
        } catch (error) {
          // A timeout counts against the server; the caller's own abort does not.
          const timedOut = signal.aborted && !request.signal?.aborted;
          if (timedOut || pointsAtServer(error)) this.pool.markDown(server);
          throw error;
        } finally {
          server.inFlight--;
        }
      },
      {
        retry: this.#retry,
        timeoutMs,
        signal: request.signal,
        semaphore: this.#semaphore,
        baseURL: () => lastServer?.baseURL,
        what,
        // A refused server is marked down, so with several the next attempt goes elsewhere.
        retryConnectionRefused: this.pool.servers.length > 1,
      },
    );
    const result = useChat
      ? this.#fromChat(wire as WireChat, server.baseURL, request)
      : this.#fromCompletion(wire as WireCompletion, server.baseURL, request, promptText);
    const usage = usageOf(wire.usage);
    this.usage.promptTokens += usage.promptTokens;
    this.usage.completionTokens += usage.completionTokens;
    this.usage.totalTokens += usage.totalTokens;
    return {
      ...result,
      usage,
      // SGLang echoes the base model's name even when the adapter generated.
      model: sglangAdapter
        ? sglangAdapter
        : typeof wire.model === 'string'
          ? wire.model
          : servedModel,
    };
  }

  #fromCompletion(
    wire: WireCompletion,
    baseURL: string,
    request: PolicyGenerateRequest,
    promptText: string | undefined,
  ): Omit<PolicyGenerateResult, 'usage' | 'model'> {
    const choice = wire.choices[0]!; // checkCompletion vouched for it
    const lp = choice.logprobs;
    if (!lp?.tokens || !lp.token_logprobs) {
      throw new PolicyResponseError(
        'the server returned no logprobs (is it vLLM/SGLang with logprobs enabled?)',
        { baseURL },
      );
    }
    const action = alignAction(lp.tokens, lp.token_logprobs, choice.token_ids, baseURL);
    const promptTokens = this.#promptIds(
      choice.prompt_token_ids ?? wire.prompt_token_ids,
      request,
      promptText,
      baseURL,
    );
    return {
      text: choice.text ?? '',
      promptTokens,
      ...action,
      finishReason: mapFinishReason(choice.finish_reason),
    };
  }

  #fromChat(
    wire: WireChat,
    baseURL: string,
    request: PolicyGenerateRequest,
  ): Omit<PolicyGenerateResult, 'usage' | 'model'> {
    const choice = wire.choices[0]!; // checkChat vouched for it
    const content = choice.logprobs?.content;
    if (!content) {
      throw new PolicyResponseError(
        'the server returned no logprobs (is it vLLM/SGLang with logprobs enabled?)',
        { baseURL },
      );
    }
    const action = alignAction(
      content.map((c) => c.token),
      content.map((c) => c.logprob),
      choice.token_ids,
      baseURL,
    );
    // Without prompt_token_ids, a local chat template can still say what the server saw.
    const rendered = this.tokenizer?.applyChatTemplate?.(request.messages!, {
      addGenerationPrompt: true,
    });
    const promptTokens = this.#promptIds(
      wire.prompt_token_ids ?? choice.prompt_token_ids,
      request,
      rendered,
      baseURL,
    );
    return {
      text: choice.message?.content ?? '',
      promptTokens,
      ...action,
      finishReason: mapFinishReason(choice.finish_reason),
    };
  }

  #promptIds(
    fromServer: number[] | null | undefined,
    request: PolicyGenerateRequest,
    promptText: string | undefined,
    baseURL: string,
  ): Int32Array<ArrayBuffer> {
    if (fromServer) return Int32Array.from(fromServer);
    if (request.promptTokens) return Int32Array.from(request.promptTokens);
    if (promptText !== undefined && this.tokenizer) {
      return Int32Array.from(this.tokenizer.encode(promptText));
    }
    throw new PolicyResponseError(
      'the server returned no prompt_token_ids (vLLM ≥ 0.10.2 with return_token_ids) and there is no ' +
        'tokenizer to render the prompt; pass promptTokens, a tokenizer, or use a newer server',
      { baseURL },
    );
  }

  /**
   * Registers a PEFT adapter on every server and makes later generations use it.
   * - `replace` (default): unload an adapter of the same name first (a missing one is fine), then
   *   load. Requests naming the adapter fail in the short window between the two calls.
   * - `inplace`: one load with vLLM's `load_inplace: true` (newer vLLM), which swaps the weights
   *   under the same name without that window.
   * - `add`: just load (the name must be new to the servers).
   */
  async loadAdapter(
    adapter: AdapterRef,
    options: { mode?: 'replace' | 'inplace' | 'add'; signal?: AbortSignal } = {},
  ): Promise<void> {
    const mode = options.mode ?? 'replace';
    await Promise.all(
      this.pool.servers.map(async (server) => {
        if (mode === 'replace') {
          await this.#loraCall(server, 'unload', { lora_name: adapter.name }, options.signal, true);
        }
        await this.#loraCall(
          server,
          'load',
          {
            lora_name: adapter.name,
            lora_path: adapter.path,
            ...(mode === 'inplace' ? { load_inplace: true } : {}),
          },
          options.signal,
          false,
        );
      }),
    );
    this.adapter = { ...adapter };
  }

  /** Removes an adapter from every server; generations go back to the base model if it was active. */
  async unloadAdapter(name: string, options: { signal?: AbortSignal } = {}): Promise<void> {
    await Promise.all(
      this.pool.servers.map((server) =>
        this.#loraCall(server, 'unload', { lora_name: name }, options.signal, false),
      ),
    );
    if (this.adapter?.name === name) this.adapter = undefined;
  }

  /**
   * PolicyEngine hook, called by the trainer after each optimizer step. With a new name per step
   * (e.g. `planner-step-12`) the new adapter is loaded, generations switch to it, and only then
   * is the previous one unloaded: no request ever names a missing adapter. With the same name
   * as before, the option `adapterUpdate` decides ('replace' by default, or 'inplace').
   */
  async updateAdapter(adapter: AdapterRef, options: { signal?: AbortSignal } = {}): Promise<void> {
    const previous = this.adapter;
    if (previous && previous.name !== adapter.name) {
      await this.loadAdapter(adapter, { mode: 'add', signal: options.signal });
      await this.unloadAdapter(previous.name, options);
      return;
    }
    await this.loadAdapter(adapter, {
      mode: this.#options.adapterUpdate ?? 'replace',
      signal: options.signal,
    });
  }

  async #loraCall(
    server: PooledServer<OpenAI>,
    action: 'load' | 'unload',
    body: Record<string, unknown>,
    signal: AbortSignal | undefined,
    missingIsOk: boolean,
  ): Promise<void> {
    const route = `/${action}_lora_adapter`;
    const path =
      this.#options.loraRoutes === 'sglang' ? new URL(route, server.baseURL).href : route;
    try {
      await runWithRetries(
        ({ signal: s }) =>
          server.client.post<unknown>(path, { body, signal: s, timeout: 120_000, maxRetries: 0 }),
        {
          retry: this.#retry,
          timeoutMs: 120_000,
          signal,
          baseURL: () => server.baseURL,
          what: `${action} LoRA adapter '${String(body.lora_name)}'`,
        },
      );
    } catch (error) {
      // Unloading a name the server does not know (404, or 400 on older vLLM) is fine when we
      // only unload to make room for a reload.
      if (
        missingIsOk &&
        LLMRequestError.isInstance(error) &&
        (error.status === 404 || error.status === 400)
      ) {
        return;
      }
      throw error;
    }
  }
}

function pointsAtServer(error: unknown): boolean {
  // A server that answers 200 with a body of another format is as useless as a failing one.
  if (LLMMalformedReplyError.isInstance(error)) return true;
  const failure = classifyFailure(error);
  if (!failure) return false;
  return failure.kind !== 'http' || (failure.status !== undefined && failure.status >= 500);
}

const TOKEN_ID = /^token_id:(\d+)$/;

/** Sampled ids and their logprobs, aligned one-to-one. */
function alignAction(
  tokens: string[],
  logprobs: Array<number | null>,
  tokenIds: number[] | null | undefined,
  baseURL: string,
): { actionTokens: Int32Array<ArrayBuffer>; actionLogprobs: Float32Array<ArrayBuffer> } {
  if (tokens.length !== logprobs.length) {
    throw new PolicyResponseError(
      `logprobs tokens (${tokens.length}) and values (${logprobs.length}) differ in length`,
      { baseURL },
    );
  }
  const actionLogprobs = new Float32Array(logprobs.length);
  for (let i = 0; i < logprobs.length; i++) {
    const v = logprobs[i];
    if (typeof v !== 'number' || Number.isNaN(v)) {
      throw new PolicyResponseError(`no logprob for sampled token ${i}`, { baseURL });
    }
    actionLogprobs[i] = v;
  }
  // An id outside int32 would wrap silently in the Int32Array: such a token counts as unparsed.
  const parsed = tokens.map((t) => Number(TOKEN_ID.exec(t)?.[1] ?? Number.NaN));
  if (parsed.every(isTokenId)) {
    return { actionTokens: Int32Array.from(parsed), actionLogprobs };
  }
  if (tokenIds && tokenIds.length === tokens.length) {
    return { actionTokens: Int32Array.from(tokenIds), actionLogprobs };
  }
  throw new PolicyResponseError(
    'cannot tell the sampled token ids: the server ignored return_tokens_as_token_ids and its ' +
      `token_ids (${tokenIds ? tokenIds.length : 'absent'}) do not match the ${tokens.length} logprobs`,
    { baseURL },
  );
}
