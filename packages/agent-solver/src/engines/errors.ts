import { FlowGrpoError, type FlowGrpoErrorOptions } from '@flowgrpo/core';

// Errors of the LLM engines. Each carries what a caller needs to decide what to do next: whether
// retrying later could help, how many attempts were already spent, and what the server said.

/** An HTTP request to an LLM server failed (after any retries). */
export class LLMRequestError extends FlowGrpoError {
  static override readonly code: string = 'LLM_REQUEST_ERROR';
  /** HTTP status; undefined for network errors (refused, reset, truncated body). */
  readonly status: number | undefined;
  /** The server's error body (parsed JSON when it was JSON, else text); undefined if none. */
  readonly body: unknown;
  /** Attempts made, the first one included. */
  readonly attempts: number;
  /** True when the failure was of a kind that retrying could fix (429, 5xx, network). */
  readonly retryable: boolean;
  /** Base URL of the server that answered last, when known. */
  readonly baseURL: string | undefined;
  constructor(
    message: string,
    fields: {
      status?: number;
      body?: unknown;
      attempts: number;
      retryable: boolean;
      baseURL?: string;
    },
    options?: FlowGrpoErrorOptions,
  ) {
    // A failed call inside a rollout is reported on the step's line with its fix: say what to
    // check from what the server did (nothing, refused us, did not know the model, failed).
    super(message, { ...options, hint: options?.hint ?? requestFix(fields) });
    this.status = fields.status;
    this.body = fields.body;
    this.attempts = fields.attempts;
    this.retryable = fields.retryable;
    this.baseURL = fields.baseURL;
  }
}

function requestFix(f: { status?: number; baseURL?: string }): string {
  const server = f.baseURL ? `the server at ${f.baseURL}` : 'the server';
  if (f.status === undefined)
    return `check that ${server} is running and reachable (base_url), then run again`;
  if (f.status === 401 || f.status === 403)
    return `check the API key for ${server} (api_key_env names the variable that holds it)`;
  if (f.status === 404)
    return `check base_url (it usually ends in /v1) and that ${server} serves the model named`;
  if (f.status === 429 || f.status >= 500)
    return `${server} is overloaded or failing: lower max_concurrency, raise the timeout, or try later`;
  return `${server} refused the request: its error body above says why`;
}

/** No complete answer arrived within the timeout (on every attempt). */
export class LLMTimeoutError extends FlowGrpoError {
  static override readonly code = 'LLM_TIMEOUT';
  readonly timeoutMs: number;
  readonly attempts: number;
  constructor(
    message: string,
    fields: { timeoutMs: number; attempts: number },
    options?: FlowGrpoErrorOptions,
  ) {
    super(message, options);
    this.timeoutMs = fields.timeoutMs;
    this.attempts = fields.attempts;
  }
}

/** The caller's AbortSignal fired; `reason` is the signal's reason. */
export class LLMAbortError extends FlowGrpoError {
  static override readonly code = 'LLM_ABORTED';
  readonly reason: unknown;
  constructor(message: string, fields: { reason?: unknown } = {}, options?: FlowGrpoErrorOptions) {
    super(message, options);
    this.reason = fields.reason;
  }
}

/** The model declined to answer (OpenAI's `message.refusal`). Not retried. */
export class LLMRefusalError extends FlowGrpoError {
  static override readonly code = 'LLM_REFUSAL';
  readonly refusal: string;
  constructor(refusal: string, options?: FlowGrpoErrorOptions) {
    super(`the model refused: ${refusal}`, options);
    this.refusal = refusal;
  }
}

/**
 * The server answered 200 but the reply carries nothing usable: `content: null` with neither a
 * refusal nor tool calls. Treated like a cut or garbled body — retried — and, when every attempt
 * got one, raised as this error (never turned into an empty answer).
 */
export class LLMMalformedReplyError extends LLMRequestError {
  static override readonly code = 'LLM_MALFORMED_REPLY';
}
