import type { IncomingMessage, ServerResponse } from 'node:http';
import { GatewayError } from './errors.js';

// Small node:http helpers: a JSON body read under a byte limit, the reply that refuses a body, JSON
// and SSE replies.

/**
 * How long a refused body is still read (and dropped) after the reply, at most: nginx's
 * `lingering_time` default.
 */
const LINGER_MS = 30_000;

/**
 * Reads the body as JSON; 413 past `maxBytes` (before reading a byte when Content-Length says
 * so), 400 when it is not JSON. A client that sent `Expect: 100-continue` gets its 100 Continue
 * here, once the declared size is within the limit: refused earlier, it never sends the body.
 */
export async function readJson(
  r: { req: IncomingMessage; res: ServerResponse },
  maxBytes: number,
): Promise<unknown> {
  const { req, res } = r;
  const declared = Number(req.headers['content-length'] ?? Number.NaN);
  if (declared > maxBytes) throw tooLarge(maxBytes);
  if (/^100-continue$/i.test(req.headers.expect ?? '')) res.writeContinue();
  const text = await new Promise<string>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const stop = () => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
    };
    // Listeners rather than `for await`: leaving that loop early destroys the request, and with
    // it the socket the 413 must still be written to.
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes) {
        stop();
        reject(tooLarge(maxBytes));
      } else chunks.push(chunk);
    };
    const onEnd = () => {
      stop();
      resolve(Buffer.concat(chunks).toString('utf8'));
    };
    const onError = (error: Error) => {
      stop();
      reject(error);
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
  });
  if (text.trim() === '')
    throw new GatewayError(400, 'the request has no body; send a JSON object', {
      code: 'invalid_body',
    });
  try {
    return JSON.parse(text);
  } catch {
    throw new GatewayError(
      400,
      "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)",
      { code: 'invalid_json' },
    );
  }
}

function tooLarge(maxBytes: number): GatewayError {
  return new GatewayError(
    413,
    `the request body is larger than ${maxBytes} bytes; send a smaller one, or start the gateway with a larger limit (flowgrpo serve --max-body-bytes N, or maxBodyBytes)`,
    { type: 'invalid_request_error', code: 'request_too_large' },
  );
}

/**
 * Answers a request whose body is left unread (413) and then closes the connection without
 * losing the answer. Closing a socket while the client's bytes are still arriving makes the
 * kernel send a reset, and a reset can discard the answer before the client has read it (what
 * `connection: close` plus Node's immediate destroy did). So the whole answer is written at
 * once (its Content-Length tells the client it is complete), the rest of the body is read and
 * dropped, and the reply ends, closing the socket, only when the body has ended, the client has
 * gone, LINGER_MS have passed or the returned function (the server's close) is called: a
 * lingering close, as nginx and Apache do it.
 */
export function refuseBody(
  req: IncomingMessage,
  res: ServerResponse,
  status: number,
  body: unknown,
): () => void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
    connection: 'close',
  });
  res.write(text);
  const finish = () => {
    clearTimeout(timer);
    req.off('end', finish);
    req.off('close', finish);
    if (!res.writableEnded && !res.destroyed) res.end();
  };
  const timer = setTimeout(finish, LINGER_MS);
  if (req.complete || req.destroyed) finish();
  else {
    req.on('end', finish);
    req.on('close', finish);
    req.resume();
  }
  return finish;
}

export function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
    ...headers,
  });
  res.end(text);
}

/** Starts a text/event-stream reply; `send` writes one `data:` event, `done` the [DONE] one. */
export function startSse(res: ServerResponse, headers: Record<string, string> = {}) {
  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
    ...headers,
  });
  return {
    send(data: unknown) {
      res.write(`data: ${JSON.stringify(data)}\n\n`);
    },
    done() {
      res.end('data: [DONE]\n\n');
    },
  };
}
