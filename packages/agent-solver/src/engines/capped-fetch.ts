import type { ClientOptions } from 'openai';
import { Agent, request } from 'undici';
import { LLMRequestError } from './errors.js';

// The engines' fetch, whose response bodies stop at a size. The `openai` client reads a whole
// reply into memory before parsing it; a server (or whatever answers at a mistyped URL) that
// streams without end would grow this process until the per-attempt timeout — minutes of
// gigabytes. The limit is far above any real completion (a 32k-token reply with logprobs is a few
// MiB) and ends such a reply with a typed, non-retried error instead.
//
// Unless the caller brings a fetch of its own, requests go through undici's `request` on a
// keep-alive pool, the body read whole under the cap. A GRPO step makes hundreds of small
// requests, and with rollouts sampled while the update runs (max_staleness) the agents' loop
// shares the trainer's core with the update, so their CPU is the step's. Through the global fetch
// (WHATWG streams, the request cloned and its body teed, the cap's TransformStream) one request
// cost 1.4–1.8 ms of CPU, through this 0.9–1.0 ms, under the same `openai` client (scratch: 3,000
// requests of a 400-token prompt and a 60-token reply with log-probs); the async-rollouts bench's
// trainer used 4.25–4.27 s of CPU a step before and 4.08–4.11 s after. The `openai` client stays:
// its errors, timeouts and aborts are what the retry loop classifies (retry.ts).

type Fetch = NonNullable<ClientOptions['fetch']>;

/** Default cap of one reply's body: 64 MiB. */
export const DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024 * 1024;

/** The server's reply was larger than the engine's `maxResponseBytes`. Not retried. */
export class LLMResponseTooLargeError extends LLMRequestError {
  static override readonly code = 'LLM_RESPONSE_TOO_LARGE';
}

/** The error a reply from `url` over `maxBytes` ends with. */
function responseTooLarge(url: string, status: number, maxBytes: number): LLMResponseTooLargeError {
  return new LLMResponseTooLargeError(
    `the reply from ${url} is larger than ${maxBytes} bytes (maxResponseBytes); it was cut off`,
    { status, attempts: 1, retryable: false },
    { hint: 'check the base URL; raise maxResponseBytes if such replies are expected' },
  );
}

/** `inner` with its bodies cut at `maxBytes`; without one, keepAliveFetch (below). */
export function cappedFetch(inner: Fetch | undefined, maxBytes: number): Fetch {
  if (!inner) return keepAliveFetch(maxBytes);
  return async (input, init) => {
    const response = await inner(input, init);
    if (!response.body) return response;
    const tooLarge = () =>
      responseTooLarge(response.url || String(input), response.status, maxBytes);
    let seen = 0;
    // The error is raised while the body is read, not from fetch itself: the client would wrap
    // a fetch error into a generic (and retried) connection error.
    const limited = response.body.pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, controller) {
          seen += chunk.byteLength;
          if (seen > maxBytes) controller.error(tooLarge());
          else controller.enqueue(chunk);
        },
      }),
    );
    const capped = new Response(limited, {
      status: response.status,
      statusText: response.statusText,
      headers: response.headers,
    });
    // `url` is read-only on a constructed Response; the client reads it for its error messages.
    Object.defineProperty(capped, 'url', { value: response.url });
    return capped;
  };
}

/** One pool for every engine of the process, as the global fetch has. */
let pool: Agent | undefined;

/** Statuses whose Response may carry no body. */
const NULL_BODY = new Set([101, 204, 205, 304]);

/** A fetch for JSON replies read whole, cut at `maxBytes` (LLM_RESPONSE_TOO_LARGE). */
function keepAliveFetch(maxBytes: number): Fetch {
  return async (input, init) => {
    if (typeof input !== 'string' && !(input instanceof URL))
      throw new TypeError('keepAliveFetch takes a URL, not a Request');
    const body = init?.body;
    if (body != null && typeof body !== 'string' && !(body instanceof Uint8Array))
      throw new TypeError('keepAliveFetch sends text or bytes, not a stream or form');
    const url = String(input);
    const signal = init?.signal ?? undefined;
    const aborted = () => new DOMException('This operation was aborted', 'AbortError');
    let reply: Awaited<ReturnType<typeof request>>;
    try {
      pool ??= new Agent();
      reply = await request(url, {
        method: (init?.method ?? 'GET') as 'GET',
        headers: init?.headers ? Object.fromEntries(new Headers(init.headers)) : undefined,
        body: body ?? null,
        signal,
        dispatcher: pool,
      });
    } catch (error) {
      if (signal?.aborted) throw aborted();
      // As the global fetch fails: the system error (ECONNREFUSED, …) is the cause.
      throw new TypeError('fetch failed', { cause: error });
    }
    const headers = new Headers();
    for (const [name, value] of Object.entries(reply.headers))
      for (const v of Array.isArray(value) ? value : [value ?? '']) headers.append(name, v);
    const chunks: Buffer[] = [];
    let seen = 0;
    let over = false;
    try {
      for await (const chunk of reply.body as AsyncIterable<Buffer>) {
        seen += chunk.length;
        if (seen > maxBytes) {
          over = true;
          reply.body.destroy();
          break;
        }
        chunks.push(chunk);
      }
    } catch (error) {
      if (signal?.aborted) throw aborted();
      throw new TypeError('fetch failed', { cause: error });
    }
    // The cap's error comes out of the body as it is read, not from fetch: the client would
    // wrap a fetch error into a connection error, and retry it.
    const content = over
      ? new ReadableStream<Uint8Array>({
          start: (c) => c.error(responseTooLarge(url, reply.statusCode, maxBytes)),
        })
      : NULL_BODY.has(reply.statusCode)
        ? null
        : Buffer.concat(chunks, seen);
    const response = new Response(content, { status: reply.statusCode, headers });
    // `url` is read-only on a constructed Response; the client reads it for its error messages.
    Object.defineProperty(response, 'url', { value: url });
    return response;
  };
}
