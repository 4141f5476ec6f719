import type { ClientOptions } from 'openai';
import { LLMRequestError } from './errors.js';

// A fetch whose response bodies stop at a size. The `openai` client reads a whole reply into
// memory before parsing it; a server (or whatever answers at a mistyped URL) that streams without
// end would grow this process until the per-attempt timeout — minutes of gigabytes. The limit is
// far above any real completion (a 32k-token reply with logprobs is a few MiB) and ends such a
// reply with a typed, non-retried error instead.

type Fetch = NonNullable<ClientOptions['fetch']>;

/** Default cap of one reply's body: 64 MiB. */
export const DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024 * 1024;

/** The server's reply was larger than the engine's `maxResponseBytes`. Not retried. */
export class LLMResponseTooLargeError extends LLMRequestError {
  static override readonly code = 'LLM_RESPONSE_TOO_LARGE';
}

/** The error a reply from `url` over `maxBytes` ends with. */
export function responseTooLarge(
  url: string,
  status: number,
  maxBytes: number,
): LLMResponseTooLargeError {
  return new LLMResponseTooLargeError(
    `the reply from ${url} is larger than ${maxBytes} bytes (maxResponseBytes); it was cut off`,
    { status, attempts: 1, retryable: false },
    { hint: 'check the base URL; raise maxResponseBytes if such replies are expected' },
  );
}

export function cappedFetch(inner: Fetch | undefined, maxBytes: number): Fetch {
  const base: Fetch = inner ?? ((input, init) => fetch(input, init));
  return async (input, init) => {
    const response = await base(input, init);
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
