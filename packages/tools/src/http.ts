import { HttpRequestError, ToolAbortedError } from './errors.js';

/** The subset of `fetch` the tools use; inject one to add proxies, retries or test doubles. */
export type FetchLike = (url: string, init?: RequestInit) => Promise<Response>;

export interface HttpOptions {
  fetch?: FetchLike;
  timeoutMs?: number;
  signal?: AbortSignal;
  /** Largest body read; default 5 MiB. */
  maxBytes?: number;
}

export interface HttpTextResponse {
  url: string;
  status: number;
  headers: Headers;
  text: string;
  /** True when the body was longer than `maxBytes` and was cut. */
  truncated: boolean;
}

export const DEFAULT_USER_AGENT = 'flowgrpo-tools/0.1 (+https://github.com/flowgrpo)';

function combinedSignal(timeoutMs: number, signal?: AbortSignal): AbortSignal {
  const timeout = AbortSignal.timeout(timeoutMs);
  return signal ? AbortSignal.any([signal, timeout]) : timeout;
}

async function readCapped(
  response: Response,
  maxBytes: number,
): Promise<{ text: string; truncated: boolean }> {
  if (!response.body) return { text: '', truncated: false };
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  let truncated = false;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (size + value.length > maxBytes) {
      chunks.push(value.subarray(0, maxBytes - size));
      size = maxBytes;
      truncated = true;
      await reader.cancel().catch(() => {});
      break;
    }
    chunks.push(value);
    size += value.length;
  }
  return { text: Buffer.concat(chunks).toString('utf8'), truncated };
}

/**
 * One HTTP request with a timeout, an abort signal and a size cap. Network failures and timeouts
 * become `HttpRequestError` (or `ToolAbortedError` when the caller aborted); the status is not
 * checked here.
 */
export async function httpRequest(
  url: string,
  init: RequestInit,
  options: HttpOptions = {},
): Promise<HttpTextResponse> {
  const timeoutMs = options.timeoutMs ?? 30_000;
  const signal = combinedSignal(timeoutMs, options.signal);
  const doFetch = options.fetch ?? fetch;
  try {
    const response = await doFetch(url, { ...init, signal });
    const { text, truncated } = await readCapped(response, options.maxBytes ?? 5 * 1024 * 1024);
    return { url, status: response.status, headers: response.headers, text, truncated };
  } catch (error) {
    if (options.signal?.aborted) throw new ToolAbortedError(undefined, { cause: error });
    if (signal.aborted) {
      throw new HttpRequestError(
        `Request to ${url} timed out after ${timeoutMs} ms`,
        { url },
        {
          cause: error,
        },
      );
    }
    const message = error instanceof Error ? error.message : String(error);
    throw new HttpRequestError(`Request to ${url} failed: ${message}`, { url }, { cause: error });
  }
}

/** Sends `body` as JSON (POST) or nothing (GET) and parses a JSON answer; non-2xx is an error. */
export async function httpJson<T = unknown>(
  url: string,
  options: HttpOptions & {
    method?: 'GET' | 'POST';
    body?: unknown;
    headers?: Record<string, string>;
  } = {},
): Promise<T> {
  const method = options.method ?? (options.body === undefined ? 'GET' : 'POST');
  const headers: Record<string, string> = {
    accept: 'application/json',
    'user-agent': DEFAULT_USER_AGENT,
    ...options.headers,
  };
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  const init: RequestInit = { method, headers };
  if (options.body !== undefined) init.body = JSON.stringify(options.body);
  const response = await httpRequest(url, init, options);
  if (response.status < 200 || response.status >= 300) {
    throw new HttpRequestError(
      `${method} ${url} returned HTTP ${response.status}: ${response.text.slice(0, 200)}`,
      { url, status: response.status },
    );
  }
  if (response.truncated) {
    throw new HttpRequestError(`Response from ${url} exceeds the size limit`, {
      url,
      status: response.status,
    });
  }
  try {
    return JSON.parse(response.text) as T;
  } catch (error) {
    throw new HttpRequestError(
      `Response from ${url} is not JSON: ${response.text.slice(0, 200)}`,
      { url, status: response.status },
      { cause: error },
    );
  }
}
