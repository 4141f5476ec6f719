import type { IncomingMessage, ServerResponse } from 'node:http';
import { GatewayError } from './errors.js';

// Small node:http helpers: a JSON body read under a byte limit, JSON and SSE replies.

/** Reads the body as JSON; 413 past `maxBytes`, 400 when it is not JSON. */
export async function readJson(req: IncomingMessage, maxBytes: number): Promise<unknown> {
  const declared = Number(req.headers['content-length'] ?? Number.NaN);
  if (declared > maxBytes) {
    req.resume();
    throw tooLarge(maxBytes);
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > maxBytes) {
      req.resume();
      throw tooLarge(maxBytes);
    }
    chunks.push(chunk as Buffer);
  }
  const text = Buffer.concat(chunks).toString('utf8');
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
  return new GatewayError(413, `the request body is larger than ${maxBytes} bytes`, {
    type: 'invalid_request_error',
    code: 'request_too_large',
  });
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
