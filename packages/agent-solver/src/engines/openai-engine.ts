import {
  addUsage,
  type ChatMessage,
  emptyUsage,
  type FinishReason,
  type GenerateObjectOptions,
  type GenerateObjectResult,
  type GenerateOptions,
  type GenerateTextResult,
  type LLMEngine,
  type LLMUsage,
} from '@flowgrpo/core';
import OpenAI, { type ClientOptions } from 'openai';
import type {
  ChatCompletion,
  ChatCompletionCreateParamsNonStreaming,
  ChatCompletionMessageParam,
} from 'openai/resources/chat/completions';
import type { z } from 'zod';
import {
  generateStructured,
  type ResponseFormat,
  type StructuredOutputMode,
} from '../structured/structured-output.js';
import { cappedFetch, DEFAULT_MAX_RESPONSE_BYTES } from './capped-fetch.js';
import { LLMRefusalError, LLMRequestError } from './errors.js';
import {
  describeJson,
  expectOptional,
  firstChoice,
  isRecord,
  isString,
  malformedReply,
} from './reply-shape.js';
import { type RetryOptions, resolveRetryOptions, runWithRetries } from './retry.js';
import { Semaphore } from './semaphore.js';

// An LLMEngine over any server that speaks OpenAI's /v1/chat/completions: OpenAI itself, vLLM,
// SGLang, Ollama (/v1), llama.cpp's llama-server. The `openai` client does the HTTP; retries,
// timeouts and the concurrency cap are ours (the client's own retries are switched off) so that
// every engine of this package behaves the same and errors carry attempt counts.

export interface OpenAIEngineOptions {
  model: string;
  /** e.g. http://localhost:8000/v1 (vLLM), http://localhost:11434/v1 (Ollama); default OpenAI's. */
  baseURL?: string | undefined;
  /**
   * Default: $OPENAI_API_KEY when talking to OpenAI itself (no baseURL), else "EMPTY" — an OpenAI
   * key is never sent to another server unless passed here explicitly.
   */
  apiKey?: string | undefined;
  defaultHeaders?: Record<string, string> | undefined;
  /** Per-attempt timeout covering the whole response (default 120 s); GenerateOptions.timeoutMs overrides. */
  timeoutMs?: number | undefined;
  retry?: RetryOptions | undefined;
  /** Requests on the wire at once from this engine (default 8). */
  maxConcurrency?: number | undefined;
  /**
   * How generateObject sends the schema (default 'json_schema'); see StructuredOutputMode.
   * 'auto' starts with 'json_schema' and, when the server rejects the request with 400/422,
   * switches this engine to 'prompt' for good and repeats the call.
   */
  structuredOutput?: StructuredOutputMode | 'auto' | undefined;
  /** Corrective calls after an invalid structured reply (default 1). */
  maxCorrections?: number | undefined;
  /** Sampling defaults applied when a call does not set them. */
  defaults?: Omit<GenerateOptions, 'signal' | 'timeoutMs'> | undefined;
  /**
   * Name of the length limit field: OpenAI's reasoning models only take `max_completion_tokens`;
   * vLLM, SGLang, Ollama and llama.cpp read `max_tokens` (default).
   */
  maxTokensParam?: 'max_tokens' | 'max_completion_tokens' | undefined;
  /** Extra request fields sent as is (e.g. vLLM's `top_k`, `chat_template_kwargs`). */
  extraBody?: Record<string, unknown> | undefined;
  /**
   * A fetch implementation for the client (tests, proxies). Default: undici's `request` on a
   * keep-alive pool (capped-fetch.ts).
   */
  fetch?: ClientOptions['fetch'] | undefined;
  /** Largest reply body read, in bytes (default 64 MiB); a longer one fails with LLM_RESPONSE_TOO_LARGE. */
  maxResponseBytes?: number | undefined;
}

type ChatBody = ChatCompletionCreateParamsNonStreaming & Record<string, unknown>;

export class OpenAIEngine implements LLMEngine {
  readonly model: string;
  readonly baseURL: string;
  /** Tokens used by every successful call of this engine so far. */
  readonly usage: LLMUsage = emptyUsage();
  /** Successful completions so far (corrective structured-output calls included). */
  completions = 0;
  readonly client: OpenAI;
  readonly #options: OpenAIEngineOptions;
  readonly #semaphore: Semaphore;
  readonly #retry;
  #structuredMode: StructuredOutputMode;

  constructor(options: OpenAIEngineOptions) {
    this.#options = options;
    this.model = options.model;
    this.client = new OpenAI({
      baseURL: options.baseURL,
      apiKey:
        options.apiKey ?? (options.baseURL ? undefined : process.env.OPENAI_API_KEY) ?? 'EMPTY',
      defaultHeaders: options.defaultHeaders,
      maxRetries: 0,
      fetch: cappedFetch(options.fetch, options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES),
    });
    this.baseURL = this.client.baseURL;
    this.#semaphore = new Semaphore(options.maxConcurrency ?? 8);
    this.#retry = resolveRetryOptions(options.retry);
    this.#structuredMode =
      options.structuredOutput === undefined || options.structuredOutput === 'auto'
        ? 'json_schema'
        : options.structuredOutput;
  }

  /** Requests currently on the wire. */
  get inFlight(): number {
    return this.#semaphore.active;
  }

  generateText(
    messages: ChatMessage[],
    options: GenerateOptions = {},
  ): Promise<GenerateTextResult> {
    return this.#complete(messages, options, undefined);
  }

  /** The structured-output mode generateObject uses now (see the 'auto' option). */
  get structuredOutputMode(): StructuredOutputMode {
    return this.#structuredMode;
  }

  async generateObject<T>(
    messages: ChatMessage[],
    schema: z.ZodType<T>,
    options: GenerateObjectOptions = {},
  ): Promise<GenerateObjectResult<T>> {
    const mode = this.#structuredMode;
    const run = (m: StructuredOutputMode) =>
      generateStructured(
        (msgs, responseFormat) => this.#complete(msgs, options, responseFormat),
        messages,
        schema,
        { mode: m, schemaName: options.schemaName, maxCorrections: this.#options.maxCorrections },
      );
    try {
      return await run(mode);
    } catch (error) {
      const rejected =
        this.#options.structuredOutput === 'auto' &&
        mode === 'json_schema' &&
        LLMRequestError.isInstance(error) &&
        (error.status === 400 || error.status === 422);
      if (!rejected) throw error;
      this.#structuredMode = 'prompt';
      return run('prompt');
    }
  }

  async #complete(
    messages: ChatMessage[],
    options: GenerateOptions,
    responseFormat: ResponseFormat | undefined,
  ): Promise<GenerateTextResult> {
    const body = this.#body(messages, options, responseFormat);
    const timeoutMs = options.timeoutMs ?? this.#options.timeoutMs ?? 120_000;
    const what = `chat completion (${this.model})`;
    const response = await runWithRetries(
      async ({ signal }) => {
        // The client's own timeout is set past ours so that ours (which also covers reading
        // the body) is the one that fires.
        const completion: unknown = await this.client.chat.completions.create(body, {
          signal,
          timeout: timeoutMs + 5_000,
          maxRetries: 0,
        });
        return this.#checkReply(completion, what);
      },
      {
        retry: this.#retry,
        timeoutMs,
        signal: options.signal,
        semaphore: this.#semaphore,
        baseURL: () => this.baseURL,
        what,
      },
    );
    return this.#interpret(response);
  }

  /**
   * Checks the reply's shape inside the attempt (see reply-shape.ts), so that the retry loop
   * retries a malformed one. `content: null` with no refusal and no tool calls is malformed too,
   * not an empty answer.
   */
  #checkReply(completion: unknown, what: string): ChatCompletion {
    const context = { what, baseURL: this.baseURL };
    const choice = firstChoice(completion, context);
    const message = choice.message;
    if (!isRecord(message)) {
      throw malformedReply(
        `\`choices[0].message\` is ${describeJson(message)}, not an object`,
        completion,
        context,
      );
    }
    expectOptional(message.content, isString, 'a string', 'message.content', completion, context);
    expectOptional(message.refusal, isString, 'a string', 'message.refusal', completion, context);
    const toolCalls = message.tool_calls;
    if (
      (message.content === null || message.content === undefined) &&
      !message.refusal &&
      !(Array.isArray(toolCalls) && toolCalls.length > 0)
    ) {
      throw malformedReply(
        'the reply has no content (content: null, no refusal, no tool calls)',
        completion,
        context,
      );
    }
    return completion as ChatCompletion;
  }

  #body(
    messages: ChatMessage[],
    options: GenerateOptions,
    responseFormat: ResponseFormat | undefined,
  ): ChatBody {
    const d = this.#options.defaults ?? {};
    const body: ChatBody = {
      ...this.#options.extraBody,
      model: this.model,
      messages: messages.map(toOpenAIMessage),
    };
    const temperature = options.temperature ?? d.temperature;
    const topP = options.topP ?? d.topP;
    const maxTokens = options.maxTokens ?? d.maxTokens;
    const stop = options.stop ?? d.stop;
    const seed = options.seed ?? d.seed;
    if (temperature !== undefined) body.temperature = temperature;
    if (topP !== undefined) body.top_p = topP;
    if (maxTokens !== undefined) body[this.#options.maxTokensParam ?? 'max_tokens'] = maxTokens;
    if (stop !== undefined && stop.length > 0) body.stop = stop;
    if (seed !== undefined) body.seed = seed;
    if (responseFormat) body.response_format = responseFormat;
    return body;
  }

  #interpret(response: ChatCompletion): GenerateTextResult {
    // #checkReply vouched for the first choice and its message.
    const choice = response.choices[0]!;
    const usage = usageOf(response.usage);
    addUsage(this.usage, usage);
    this.completions++;
    if (choice.message.refusal) throw new LLMRefusalError(choice.message.refusal);
    return {
      text: choice.message.content ?? '',
      usage,
      finishReason: mapFinishReason(choice.finish_reason),
      model: typeof response.model === 'string' ? response.model : this.model,
    };
  }
}

/**
 * Our ChatMessage has no tool_call_id, which OpenAI requires on role 'tool'; tool output is
 * therefore sent as a user message naming the tool.
 */
export function toOpenAIMessage(message: ChatMessage): ChatCompletionMessageParam {
  switch (message.role) {
    case 'system':
      return {
        role: 'system',
        content: message.content,
        ...(message.name ? { name: message.name } : {}),
      };
    case 'assistant':
      return {
        role: 'assistant',
        content: message.content,
        ...(message.name ? { name: message.name } : {}),
      };
    case 'tool':
      return {
        role: 'user',
        content: `[tool${message.name ? ` ${message.name}` : ''} output]\n${message.content}`,
      };
    default:
      return {
        role: 'user',
        content: message.content,
        ...(message.name ? { name: message.name } : {}),
      };
  }
}

export function usageOf(usage: unknown): LLMUsage {
  // A server's usage block is informative only: a count of the wrong type (a string, a negative
  // or fractional number, a non-object block) counts as absent rather than poisoning the totals.
  const block: Record<string, unknown> = isRecord(usage) ? usage : {};
  const count = (v: unknown) => (isTokenCount(v) ? v : undefined);
  const promptTokens = count(block.prompt_tokens) ?? 0;
  const completionTokens = count(block.completion_tokens) ?? 0;
  return {
    promptTokens,
    completionTokens,
    totalTokens: count(block.total_tokens) ?? promptTokens + completionTokens,
  };
}

const isTokenCount = (v: unknown): v is number =>
  typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;

export function mapFinishReason(reason: string | null | undefined): FinishReason {
  switch (reason) {
    case 'stop':
    case 'length':
    case 'content_filter':
    case 'tool_calls':
      return reason;
    case 'function_call':
      return 'tool_calls';
    default:
      return 'other';
  }
}
