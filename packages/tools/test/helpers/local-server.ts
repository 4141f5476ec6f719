import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type {
  ChatMessage,
  GenerateObjectResult,
  GenerateTextResult,
  LLMEngine,
} from '@flowgrpo/core';
import type { z } from 'zod';

export interface LocalServer {
  /** `http://127.0.0.1:<port>` */
  origin: string;
  requests: { method: string; url: string; headers: IncomingMessage['headers']; body: string }[];
  close(): Promise<void>;
}

/** A real HTTP server on 127.0.0.1 with an ephemeral port. */
export async function startServer(
  handler: (req: IncomingMessage, body: string, res: ServerResponse) => void | Promise<void>,
): Promise<LocalServer> {
  const requests: LocalServer['requests'] = [];
  const server = createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => {
      const body = Buffer.concat(parts).toString('utf8');
      requests.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
      Promise.resolve(handler(req, body, res)).catch((error: unknown) => {
        res.statusCode = 500;
        res.end(String(error));
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    origin: `http://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export function sendJson(res: ServerResponse, value: unknown, status = 200): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(value));
}

/**
 * A deterministic LLMEngine for tests: `reply` computes the answer from the messages, and every
 * call is recorded so the test can check what the tool sent.
 */
export class ScriptedEngine implements LLMEngine {
  readonly model = 'scripted';
  readonly calls: ChatMessage[][] = [];
  constructor(
    private readonly reply: (messages: ChatMessage[]) => string,
    private readonly objectReply?: (messages: ChatMessage[]) => unknown,
  ) {}

  async generateText(messages: ChatMessage[]): Promise<GenerateTextResult> {
    this.calls.push(messages);
    const text = this.reply(messages);
    return {
      text,
      usage: { promptTokens: 0, completionTokens: 0, totalTokens: 0 },
      finishReason: 'stop',
      model: this.model,
    };
  }

  async generateObject<T>(
    messages: ChatMessage[],
    schema: z.ZodType<T>,
  ): Promise<GenerateObjectResult<T>> {
    this.calls.push(messages);
    if (!this.objectReply) throw new Error('no object reply scripted');
    const raw = this.objectReply(messages);
    const object = schema.parse(raw);
    return {
      object,
      rawText: JSON.stringify(raw),
      usage: { promptTokens: 0, completionTokens: 0, totalTokens: 0 },
      finishReason: 'stop',
      model: this.model,
    };
  }
}

/**
 * A toy embedding model served over HTTP: each word (lowercased, letters/digits) adds 1 to
 * dimension (FNV-1a hash mod `dims`). Texts sharing words get a high cosine; that is all the
 * RAG tests need from it.
 */
export function hashEmbedding(text: string, dims = 64): number[] {
  const v = new Array<number>(dims).fill(0);
  for (const word of text.toLowerCase().match(/[a-z0-9]+/g) ?? []) {
    let h = 0x811c9dc5;
    for (let i = 0; i < word.length; i++) {
      h ^= word.charCodeAt(i);
      h = Math.imul(h, 0x01000193) >>> 0;
    }
    v[h % dims]! += 1;
  }
  return v;
}
