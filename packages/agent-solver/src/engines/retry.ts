import { FlowGrpoError } from '@flowgrpo/core';
import { APIConnectionTimeoutError, APIError } from 'openai';
import {
  LLMAbortError,
  LLMMalformedReplyError,
  LLMRequestError,
  LLMTimeoutError,
} from './errors.js';
import type { Semaphore } from './semaphore.js';

// One place that turns "call a server once" into "call it reliably": a per-attempt timeout that
// covers the whole exchange (headers and body), the caller's AbortSignal, a concurrency slot held
// only while a request is on the wire, and retries with exponential backoff + jitter on failures
// that a later attempt could fix (429, 408, 409, 5xx, reset connections, cut bodies). A refused
// connection is not retried: nothing listens at that address, and a backoff of seconds will not
// start the server — a dead or mistyped URL fails at once (a pool of several servers opts back
// in with `retryConnectionRefused`, since its next attempt goes to another server).

export interface RetryOptions {
  /** Retries after the first attempt (default 3). */
  maxRetries?: number | undefined;
  /** Delay before the first retry (default 500 ms); doubles (`multiplier`) per retry. */
  initialDelayMs?: number | undefined;
  /** Cap on one backoff delay (default 30 s). */
  maxDelayMs?: number | undefined;
  /** Growth factor of the delay per retry (default 2). */
  multiplier?: number | undefined;
  /**
   * Fraction of each delay drawn at random (default 0.5): the delay is
   * `base × (1 − jitter × U[0,1))`, so concurrent clients do not retry in lockstep.
   */
  jitter?: number | undefined;
  /** Longest `retry-after` honoured (default 60 s); longer hints are clamped to it. */
  maxRetryAfterMs?: number | undefined;
  /**
   * Waits out the delay before a retry (default: a timer that the caller's abort ends early).
   * A simulation or a test passes its own to see the delays chosen without waiting for them.
   */
  sleep?: ((ms: number, signal?: AbortSignal) => Promise<void>) | undefined;
}

// Every number set (NonNullable: the options' fields also take an explicit `undefined`).
export type ResolvedRetryOptions = {
  [K in Exclude<keyof RetryOptions, 'sleep'>]-?: NonNullable<RetryOptions[K]>;
} & Pick<RetryOptions, 'sleep'>;

export function resolveRetryOptions(options: RetryOptions = {}): ResolvedRetryOptions {
  return {
    maxRetries: options.maxRetries ?? 3,
    initialDelayMs: options.initialDelayMs ?? 500,
    maxDelayMs: options.maxDelayMs ?? 30_000,
    multiplier: options.multiplier ?? 2,
    jitter: options.jitter ?? 0.5,
    maxRetryAfterMs: options.maxRetryAfterMs ?? 60_000,
    sleep: options.sleep,
  };
}

/** Backoff before retry number `retry` (0-based). */
export function backoffDelayMs(
  retry: number,
  options: ResolvedRetryOptions,
  random: () => number = Math.random,
): number {
  const base = Math.min(options.maxDelayMs, options.initialDelayMs * options.multiplier ** retry);
  return base * (1 - options.jitter * random());
}

/**
 * Delay asked for by `retry-after-ms` (OpenAI's) or `retry-after` (RFC 9110: seconds or an
 * HTTP date); undefined when absent or unreadable.
 */
export function parseRetryAfterMs(
  headers: Headers | undefined,
  now: number = Date.now(),
): number | undefined {
  if (!headers) return undefined;
  const ms = headers.get('retry-after-ms');
  if (ms !== null && ms.trim() !== '' && Number.isFinite(Number(ms)) && Number(ms) >= 0) {
    return Number(ms);
  }
  const value = headers.get('retry-after');
  if (value === null || value.trim() === '') return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return seconds >= 0 ? seconds * 1000 : undefined;
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

export function isRetryableStatus(status: number): boolean {
  return status === 408 || status === 409 || status === 429 || status >= 500;
}

/** What went wrong in one attempt, as the retry loop sees it. */
export interface AttemptFailure {
  kind: 'http' | 'network' | 'timeout';
  retryable: boolean;
  /** The system error code under a network failure (`ECONNREFUSED`, `ECONNRESET`, …), if any. */
  systemCode?: string;
  status?: number;
  body?: unknown;
  retryAfterMs?: number;
  message: string;
  cause: unknown;
}

/**
 * The first Node system error code (`ECONNREFUSED`, …) in an error's cause chain. undici wraps
 * it twice (APIConnectionError → TypeError "fetch failed" → Error with `code`); a host with
 * several addresses fails with an AggregateError whose members carry the codes.
 */
export function systemErrorCode(error: unknown): string | undefined {
  const seen = new Set<unknown>();
  const queue: unknown[] = [error];
  while (queue.length > 0) {
    const e = queue.shift();
    if (typeof e !== 'object' || e === null || seen.has(e)) continue;
    seen.add(e);
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && /^E[A-Z0-9_]+$/.test(code)) return code;
    queue.push((e as { cause?: unknown }).cause);
    if (e instanceof AggregateError) queue.push(...e.errors);
  }
  return undefined;
}

/** A network failure before any reply: retried, except a refused connection (see above). */
function networkFailure(error: unknown, message: string): AttemptFailure {
  const systemCode = systemErrorCode(error);
  const refused = systemCode === 'ECONNREFUSED';
  return {
    kind: 'network',
    retryable: !refused,
    ...(systemCode ? { systemCode } : {}),
    // The client's own text ("Connection error.") does not say what happened; the code does.
    message: refused
      ? 'connection refused (ECONNREFUSED): nothing is listening at that address'
      : systemCode && !message.includes(systemCode)
        ? `${message} (${systemCode})`
        : message,
    cause: error,
  };
}

/** Classifies an error thrown while talking to a server; undefined = not a transport failure. */
export function classifyFailure(error: unknown): AttemptFailure | undefined {
  if (error instanceof APIConnectionTimeoutError) {
    return { kind: 'timeout', retryable: true, message: error.message, cause: error };
  }
  if (error instanceof APIError) {
    if (error.status === undefined) {
      // APIConnectionError: refused, DNS, reset before the headers.
      return networkFailure(error, error.message);
    }
    return {
      kind: 'http',
      status: error.status,
      body: error.error ?? error.message,
      retryable: isRetryableStatus(error.status),
      retryAfterMs: parseRetryAfterMs(error.headers),
      message: error.message,
      cause: error,
    };
  }
  if (LLMRequestError.isInstance(error)) {
    return {
      kind: error.status === undefined ? 'network' : 'http',
      status: error.status,
      body: error.body,
      retryable: error.retryable,
      message: error.message,
      cause: error,
    };
  }
  if (error instanceof SyntaxError) {
    // The headers said JSON but the body did not parse: a cut or garbled response.
    return {
      kind: 'network',
      retryable: true,
      message: `invalid JSON body: ${error.message}`,
      cause: error,
    };
  }
  if (
    error instanceof TypeError &&
    /terminated|fetch failed|socket|ECONNRESET|other side closed/i.test(
      `${error.message} ${String((error as { cause?: unknown }).cause ?? '')}`,
    )
  ) {
    // undici's error when the connection drops while the body is being read (or, with a bare
    // fetch, when it cannot connect at all).
    return networkFailure(error, error.message);
  }
  return undefined;
}

export interface AttemptContext {
  /** 1-based attempt number. */
  attempt: number;
  /** Fires on the caller's abort or this attempt's timeout. */
  signal: AbortSignal;
  timeoutMs: number;
}

export interface RunWithRetriesOptions {
  retry: ResolvedRetryOptions;
  timeoutMs: number;
  signal?: AbortSignal;
  semaphore?: Semaphore;
  /** Called after each failed attempt (e.g. to mark a server down). */
  onFailure?: (failure: AttemptFailure, context: AttemptContext) => void;
  /** Base URL reported in errors, when there is one. */
  baseURL?: () => string | undefined;
  random?: () => number;
  /** Prefix of error messages, e.g. "chat completion". */
  what?: string;
  /**
   * Retry refused connections too (default false: they fail at once). For a pool of servers,
   * where the next attempt goes to another one.
   */
  retryConnectionRefused?: boolean;
}

export async function runWithRetries<T>(
  run: (context: AttemptContext) => Promise<T>,
  options: RunWithRetriesOptions,
): Promise<T> {
  const { retry, timeoutMs, signal } = options;
  const what = options.what ?? 'request';
  const maxAttempts = retry.maxRetries + 1;
  let last: AttemptFailure | undefined;
  let attempts = 0;
  for (let attempt = 1; attempt <= maxAttempts; attempt++) {
    throwIfAborted(signal, what);
    let release: () => void = () => {};
    if (options.semaphore) {
      try {
        release = await options.semaphore.acquire(signal);
      } catch (error) {
        throwIfAborted(signal, what);
        throw error;
      }
    }
    const controller = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort(new Error(`${what} timed out after ${timeoutMs} ms`));
    }, timeoutMs);
    const onAbort = () => controller.abort(signal?.reason);
    signal?.addEventListener('abort', onAbort, { once: true });
    const context: AttemptContext = { attempt, signal: controller.signal, timeoutMs };
    attempts = attempt;
    try {
      return await run(context);
    } catch (error) {
      throwIfAborted(signal, what, error);
      let failure: AttemptFailure | undefined;
      if (timedOut) {
        failure = {
          kind: 'timeout',
          retryable: true,
          message: `timed out after ${timeoutMs} ms`,
          cause: error,
        };
      } else {
        failure = classifyFailure(error);
        if (!failure) throw error;
        if (FlowGrpoError.isInstance(error) && !failure.retryable) throw error;
        if (failure.systemCode === 'ECONNREFUSED' && options.retryConnectionRefused) {
          failure = { ...failure, retryable: true };
        }
      }
      last = failure;
      options.onFailure?.(failure, context);
      if (!failure.retryable || attempt === maxAttempts) break;
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      release();
    }
    const hinted = last.retryAfterMs;
    const delay =
      hinted !== undefined
        ? Math.min(hinted, retry.maxRetryAfterMs)
        : backoffDelayMs(attempt - 1, retry, options.random);
    if (retry.sleep) await retry.sleep(delay, signal);
    else await sleep(delay, signal, what);
  }
  throw finalError(last!, attempts, options, what);
}

function finalError(
  failure: AttemptFailure,
  attempts: number,
  options: RunWithRetriesOptions,
  what: string,
): FlowGrpoError {
  if (failure.kind === 'timeout') {
    return new LLMTimeoutError(
      `${what}: no answer within ${options.timeoutMs} ms (${attempts} attempt(s))`,
      { timeoutMs: options.timeoutMs, attempts },
      { cause: failure.cause },
    );
  }
  const baseURL = options.baseURL?.();
  if (LLMMalformedReplyError.isInstance(failure.cause)) {
    // Every attempt got a 200 whose body was unusable: keep that type (and its hint) so callers
    // can tell "the server speaks another format" from "the server is down".
    const malformed = failure.cause;
    return new LLMMalformedReplyError(
      `${malformed.message} (${attempts} attempt(s))`,
      { status: 200, body: malformed.body, attempts, retryable: true, baseURL },
      { cause: malformed, hint: malformed.hint },
    );
  }
  return new LLMRequestError(
    `${what} failed${failure.status === undefined ? '' : ` with HTTP ${failure.status}`}` +
      `${baseURL ? ` (${baseURL})` : ''} after ${attempts} attempt(s): ${failure.message}`,
    {
      status: failure.status,
      body: failure.body,
      attempts,
      retryable: failure.retryable,
      baseURL,
    },
    { cause: failure.cause },
  );
}

function throwIfAborted(signal: AbortSignal | undefined, what: string, cause?: unknown): void {
  if (signal?.aborted) {
    throw new LLMAbortError(
      `${what} aborted`,
      { reason: signal.reason },
      { cause: cause ?? signal.reason },
    );
  }
}

/** Sleeps `ms`, ending early with LLMAbortError when `signal` fires. */
export function sleep(ms: number, signal?: AbortSignal, what = 'request'): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(new LLMAbortError(`${what} aborted`, { reason: signal.reason }));
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(new LLMAbortError(`${what} aborted`, { reason: signal?.reason }));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
