// A local retrieval server speaking the protocol of the AReaL / Search-R1 RAG servers, over
// BM25 on a passage corpus (HotpotQA's paragraphs or a FlashRAG wiki sample):
//
//   POST /retrieve  {"queries": [q…], "topk": 3, "return_scores": false}
//     → {"result": [[{"id", "contents": "\"Title\"\ntext", "wikipedia_title"} …] per query]}
//     with return_scores: [[{"document": {…}, "score"} …] …]
//   GET  /health    → {"status": "ok", "passages": N}
//
// node:http on 127.0.0.1 only (a random port unless one is given); the example starts it before
// its rollouts and closes it after.
import { once } from 'node:events';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { LocalCorpus, type Passage } from '@flowgrpo/tools';

export interface RetrievalServer {
  /** e.g. http://127.0.0.1:41234/retrieve */
  url: string;
  corpus: LocalCorpus;
  /** Requests answered so far (queries, not HTTP requests). */
  readonly queries: number;
  close(): Promise<void>;
}

export interface RetrievalServerOptions {
  passages: readonly Passage[];
  port?: number;
  /** Largest topk a request may ask for (default 50). */
  maxTopK?: number;
}

const MAX_BODY = 1024 * 1024;

export async function startRetrievalServer(o: RetrievalServerOptions): Promise<RetrievalServer> {
  const corpus = new LocalCorpus(o.passages, { name: 'bm25' });
  const maxTopK = o.maxTopK ?? 50;
  let queries = 0;

  const send = (res: ServerResponse, status: number, body: unknown) => {
    const text = JSON.stringify(body);
    res.writeHead(status, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(text),
    });
    res.end(text);
  };

  const retrieve = async (req: IncomingMessage, res: ServerResponse) => {
    let size = 0;
    const chunks: Buffer[] = [];
    for await (const chunk of req as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > MAX_BODY) return send(res, 413, { error: 'request body over 1 MiB' });
      chunks.push(chunk);
    }
    let body: { queries?: unknown; topk?: unknown; return_scores?: unknown };
    try {
      body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch {
      return send(res, 400, { error: 'the body is not JSON' });
    }
    const qs = body.queries;
    if (!Array.isArray(qs) || !qs.every((q) => typeof q === 'string'))
      return send(res, 400, { error: '"queries" must be a list of strings' });
    const topk = body.topk === undefined ? 3 : Number(body.topk);
    if (!Number.isInteger(topk) || topk < 1 || topk > maxTopK)
      return send(res, 400, { error: `"topk" must be an integer in 1..${maxTopK}` });
    const withScores = body.return_scores === true;
    const result = [];
    for (const q of qs as string[]) {
      queries++;
      const hits = await corpus.search(q, { topK: topk });
      result.push(
        hits.map((h) => {
          const document = {
            id: h.id ?? h.title,
            contents: `"${h.title}"\n${h.text}`,
            wikipedia_title: h.title,
          };
          return withScores ? { document, score: h.score } : document;
        }),
      );
    }
    send(res, 200, { result });
  };

  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method === 'POST' && path === '/retrieve') {
      retrieve(req, res).catch((error: unknown) =>
        send(res, 500, { error: error instanceof Error ? error.message : String(error) }),
      );
    } else if (req.method === 'GET' && path === '/health') {
      send(res, 200, { status: 'ok', passages: corpus.passages.length });
    } else {
      send(res, 404, { error: `no route ${req.method} ${path}` });
    }
  });
  server.listen(o.port ?? 0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/retrieve`,
    corpus,
    get queries() {
      return queries;
    },
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((e) => (e ? reject(e) : resolve()));
      }),
  };
}
