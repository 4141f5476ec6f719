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
import { LLMMalformedReplyError, LLMRefusalError, LLMRequestError } from './errors.js';
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
  /** A fetch implementation for the client (tests, proxies). */
  fetch?: ClientOptions['fetch'] | undefined;
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
      fetch: options.fetch,
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
    let response: ChatCompletion;
    try {
      response = await runWithRetries(
        async ({ signal }) => {
          // The client's own timeout is set past ours so that ours (which also covers reading
          // the body) is the one that fires.
          const completion: ChatCompletion = await this.client.chat.completions.create(body, {
            signal,
            timeout: timeoutMs + 5_000,
            maxRetries: 0,
          });
          this.#checkContent(completion, what);
          return completion;
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
    } catch (error) {
      // The retry loop reports its last failure as an LLMRequestError; keep the malformed
      // reply's own type (with the attempts spent) so callers can tell it apart.
      const cause: unknown = (error as { cause?: unknown } | undefined)?.cause;
      if (
        LLMRequestError.isInstance(error) &&
        error.code !== LLMMalformedReplyError.code &&
        LLMMalformedReplyError.isInstance(cause)
      ) {
        throw new LLMMalformedReplyError(
          error.message,
          {
            status: 200,
            body: cause.body,
            attempts: error.attempts,
            retryable: true,
            baseURL: this.baseURL,
          },
          { cause },
        );
      }
      throw error;
    }
    return this.#interpret(response);
  }

  /**
   * `content: null` with no refusal and no tool calls is a malformed reply, not an empty answer:
   * thrown inside the attempt so that the retry loop retries it like a garbled body.
   */
  #checkContent(completion: ChatCompletion, what: string): void {
    const message = completion.choices?.[0]?.message;
    if (!message) return; // no choices: reported (not retried) by #interpret
    const toolCalls = (message as { tool_calls?: unknown[] }).tool_calls;
    if (
      (message.content === null || message.content === undefined) &&
      !message.refusal &&
      !(Array.isArray(toolCalls) && toolCalls.length > 0)
    ) {
      throw new LLMMalformedReplyError(
        `${what}: the reply has no content (content: null, no refusal, no tool calls)`,
        { status: 200, body: completion, attempts: 1, retryable: true, baseURL: this.baseURL },
      );
    }
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
    const choice = response.choices?.[0];
    if (!choice?.message) {
      throw new LLMRequestError(`chat completion (${this.model}): the response has no choices`, {
        status: 200,
        body: response,
        attempts: 1,
        retryable: false,
        baseURL: this.baseURL,
      });
    }
    const usage = usageOf(response.usage);
    addUsage(this.usage, usage);
    this.completions++;
    if (choice.message.refusal) throw new LLMRefusalError(choice.message.refusal);
    return {
      text: choice.message.content ?? '',
      usage,
      finishReason: mapFinishReason(choice.finish_reason),
      model: response.model ?? this.model,
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

export function usageOf(
  usage:
    | { prompt_tokens?: number; completion_tokens?: number; total_tokens?: number }
    | null
    | undefined,
): LLMUsage {
  const promptTokens = usage?.prompt_tokens ?? 0;
  const completionTokens = usage?.completion_tokens ?? 0;
  return {
    promptTokens,
    completionTokens,
    totalTokens: usage?.total_tokens ?? promptTokens + completionTokens,
  };
}

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
