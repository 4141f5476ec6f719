import type { ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chunkText } from '../src/chunk-text.js';
import { cosineSimilarity, createOpenAIEmbedder } from '../src/embeddings.js';
import { HttpRequestError, UrlPolicyError } from '../src/errors.js';
import { decodeEntities, htmlToText } from '../src/html-to-text.js';
import { checkUrl, isPrivateAddress } from '../src/url-policy.js';
import { fetchWebPage } from '../src/web-page.js';
import { answerFromWebPage, createWebRagTool } from '../src/web-rag-tool.js';
import {
  hashEmbedding,
  type LocalServer,
  ScriptedEngine,
  sendJson,
  startServer,
} from './helpers/local-server.js';

const filler = (topic: string, n: number) =>
  Array.from(
    { length: n },
    (_, i) => `<p>Paragraph ${i} about ${topic} and its long history.</p>`,
  ).join('\n');

// A page whose single fact about the completion year sits deep among unrelated paragraphs.
const PAGE = `<!DOCTYPE html>
<html><head><title>Eiffel Tower &amp; Paris</title>
<style>p { color: red }</style><script>var secret = "do not index";</script></head>
<body><nav><ul><li>Home</li><li>About</li></ul></nav>
<h1>The Eiffel&nbsp;Tower</h1>
${filler('bridges over the Seine', 30)}
<p>Construction of the tower was completed in March 1889, in time for the World&#39;s Fair.</p>
${filler('cafes and bakeries', 30)}
<!-- a comment that must vanish -->
</body></html>`;

let server: LocalServer;
beforeAll(async () => {
  server = await startServer((req, body, res: ServerResponse) => {
    if (req.url === '/page') {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      res.end(PAGE);
    } else if (req.url === '/moved') {
      res.writeHead(302, { location: '/page' });
      res.end();
    } else if (req.url === '/to-private') {
      res.writeHead(302, { location: 'http://127.0.0.1:9/secret' });
      res.end();
    } else if (req.url === '/big') {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end('word '.repeat(100_000));
    } else if (req.url === '/binary') {
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      res.end(Buffer.alloc(10));
    } else if (req.url === '/v1/embeddings' && req.method === 'POST') {
      const { input, model } = JSON.parse(body) as { input: string[]; model: string };
      // Answer in reverse order to check that the client sorts by `index`.
      const data = input.map((text, index) => ({
        object: 'embedding',
        index,
        embedding: hashEmbedding(text),
      }));
      sendJson(res, {
        object: 'list',
        model,
        data: data.reverse(),
        usage: { prompt_tokens: 0, total_tokens: 0 },
      });
    } else {
      res.writeHead(404);
      res.end('not found');
    }
  });
});
afterAll(async () => {
  await server.close();
});

describe('htmlToText', () => {
  it('drops script/style/comments, breaks blocks into lines and decodes entities', () => {
    const { title, text } = htmlToText(PAGE);
    expect(title).toBe('Eiffel Tower & Paris');
    expect(text).not.toMatch(/secret|color: red|comment/);
    expect(text).toContain('The Eiffel Tower');
    expect(text).toContain("in time for the World's Fair.");
    expect(text.split('\n')).toContain('- Home');
    expect(decodeEntities('&lt;a&gt; &#x41;&#66; &copy; &unknown;')).toBe('<a> AB © &unknown;');
  });
});

describe('chunkText', () => {
  it('covers the text with chunks of at most chunkSize sharing about `overlap` characters', () => {
    const text = Array.from({ length: 500 }, (_, i) => `w${i}`).join(' ');
    const chunks = chunkText(text, { chunkSize: 200, overlap: 50 });
    for (const c of chunks) expect(c.length).toBeLessThanOrEqual(200);
    // Every word appears in some chunk, in order, and consecutive chunks share words.
    const words = text.split(' ');
    const seen = new Set(chunks.flatMap((c) => c.split(' ')));
    for (const w of words) expect(seen.has(w)).toBe(true);
    for (let i = 1; i < chunks.length; i++) {
      const prev = new Set(chunks[i - 1]!.split(' '));
      expect(chunks[i]!.split(' ').some((w) => prev.has(w))).toBe(true);
    }
    expect(() => chunkText('x', { chunkSize: 10, overlap: 10 })).toThrow(RangeError);
  });
});

describe('URL policy', () => {
  it.each([
    '127.0.0.1',
    '10.1.2.3',
    '172.20.0.1',
    '192.168.1.1',
    '169.254.169.254',
    '100.64.0.1',
    '0.0.0.0',
    '::1',
    '::',
    'fe80::1',
    'fd00::1',
    '::ffff:127.0.0.1',
    '::ffff:7f00:1',
    '64:ff9b::a00:1',
  ])('%s is private', (ip) => {
    expect(isPrivateAddress(ip)).toBe(true);
  });

  it.each(['93.184.215.14', '8.8.8.8', '2606:4700:4700::1111', '::ffff:8.8.8.8'])(
    '%s is public',
    (ip) => {
      expect(isPrivateAddress(ip)).toBe(false);
    },
  );

  it('refuses loopback literals, localhost, bad schemes and hosts with any private address', async () => {
    for (const url of [
      'http://127.0.0.1/',
      'http://[::1]:8080/',
      'file:///etc/passwd',
      'http://user:pw@example.com/',
    ]) {
      await expect(checkUrl(url)).rejects.toSatisfy((e) => UrlPolicyError.isInstance(e));
    }
    // Real resolver: localhost resolves to loopback on every system.
    await expect(checkUrl('http://localhost:1234/')).rejects.toThrow(/private, loopback/);
    // One public and one private address: refused (all addresses are checked).
    const lookup = async () => [
      { address: '93.184.215.14', family: 4 },
      { address: 'fd12::5', family: 6 },
    ];
    await expect(checkUrl('http://mixed.test/', { lookup })).rejects.toThrow(/fd12::5/);
    const publicOnly = async () => [{ address: '93.184.215.14', family: 4 }];
    expect((await checkUrl('https://public.test/x', { lookup: publicOnly })).href).toBe(
      'https://public.test/x',
    );
    expect((await checkUrl('http://127.0.0.1/', { allowPrivateNetwork: true })).hostname).toBe(
      '127.0.0.1',
    );
  });

  it('checks redirect targets too', async () => {
    // The injected fetch routes "public.test" to the local server, like a proxy would; the
    // server then redirects to a loopback URL, which must be refused.
    const lookup = async () => [{ address: '93.184.215.14', family: 4 }];
    const viaProxy = (url: string, init?: RequestInit) =>
      fetch(url.replace('http://public.test', server.origin), init);
    await expect(
      fetchWebPage('http://public.test/to-private', { lookup, fetch: viaProxy }),
    ).rejects.toSatisfy((e) => UrlPolicyError.isInstance(e) && /127\.0\.0\.1/.test(e.message));
    const ok = await fetchWebPage('http://public.test/moved', { lookup, fetch: viaProxy });
    expect(ok.title).toBe('Eiffel Tower & Paris');
  });
});

describe('fetchWebPage', () => {
  it('follows redirects on 127.0.0.1 when private networks are allowed, and caps size', async () => {
    await expect(fetchWebPage(`${server.origin}/page`)).rejects.toSatisfy((e) =>
      UrlPolicyError.isInstance(e),
    );
    const page = await fetchWebPage(`${server.origin}/moved`, { allowPrivateNetwork: true });
    expect(page.url).toBe(`${server.origin}/page`);
    expect(page.text).toContain('completed in March 1889');
    const big = await fetchWebPage(`${server.origin}/big`, {
      allowPrivateNetwork: true,
      maxBytes: 1000,
    });
    expect(big.truncated).toBe(true);
    expect(big.text.length).toBe(1000);
    await expect(
      fetchWebPage(`${server.origin}/binary`, { allowPrivateNetwork: true }),
    ).rejects.toThrow(/Unsupported content type/);
    await expect(
      fetchWebPage(`${server.origin}/missing`, { allowPrivateNetwork: true }),
    ).rejects.toThrow(/HTTP 404/);
  });
});

describe('OpenAI-compatible embeddings', () => {
  it('posts batches to /v1/embeddings and returns vectors in input order', async () => {
    const embed = createOpenAIEmbedder({
      baseUrl: `${server.origin}/v1`,
      model: 'toy-hash',
      apiKey: 'sk-test',
      batchSize: 2,
    });
    const texts = ['alpha beta', 'gamma', 'alpha'];
    const vectors = await embed(texts);
    expect(vectors).toEqual(texts.map((t) => hashEmbedding(t)));
    const posts = server.requests.filter((r) => r.url === '/v1/embeddings');
    expect(posts.at(-1)!.headers.authorization).toBe('Bearer sk-test');
    expect(JSON.parse(posts.at(-1)!.body)).toMatchObject({ model: 'toy-hash', input: ['alpha'] });
    // cos(a, a) = 1; orthogonal one-hot vectors give 0 (hand values).
    expect(cosineSimilarity([1, 2, 3], [1, 2, 3])).toBeCloseTo(1, 12);
    expect(cosineSimilarity([1, 0], [0, 1])).toBe(0);
  });
});

describe('a faulty embeddings server', () => {
  it.each([
    [
      'vectors of different lengths',
      [
        [1, 0],
        [1, 0, 0],
      ],
      /embedding 1 has 3 dimensions, not 2/,
    ],
    ['empty vectors', [[], []], /embedding 0 has 0 dimensions/],
    [
      'a repeated index',
      [
        [1, 0],
        [0, 1],
      ],
      /indices are not 0\.\.1 each once/,
      [0, 0],
    ],
  ])(
    '%s: a typed HttpRequestError naming the server',
    async (_name, vectors, message, indices?) => {
      const faulty = await startServer((_req, _body, res) =>
        sendJson(res, {
          data: vectors.map((embedding, i) => ({ embedding, index: indices?.[i] ?? i })),
        }),
      );
      try {
        const embed = createOpenAIEmbedder({ baseUrl: `${faulty.origin}/v1`, model: 'm' });
        const error = await embed(['a', 'b']).catch((e: unknown) => e);
        expect(HttpRequestError.isInstance(error), String(error)).toBe(true);
        expect((error as Error).message).toMatch(message);
        expect((error as Error).message).toContain(faulty.origin);
      } finally {
        await faulty.close();
      }
    },
  );
});

describe('web RAG tool', () => {
  it('retrieves the relevant chunk by embeddings and synthesizes with the LLM', async () => {
    const engine = new ScriptedEngine((messages) => {
      // Answers from the first reference passage only, so the test sees what was ranked first.
      const first = /\[1\] ([\s\S]*?)(?:\n\n\[2\]|$)/.exec(messages.at(-1)!.content)?.[1] ?? '';
      return /1889/.test(first) ? 'It was completed in March 1889.' : 'Not found.';
    });
    const embed = createOpenAIEmbedder({ baseUrl: `${server.origin}/v1`, model: 'toy-hash' });
    const tool = createWebRagTool({
      engine,
      embed,
      allowPrivateNetwork: true,
      chunkSize: 300,
      overlap: 150,
      topK: 3,
    });
    const result = await tool.execute(
      { query: 'When was construction of the tower completed?', url: `${server.origin}/page` },
      {},
    );
    expect(result).toMatchObject({ ok: true, output: 'It was completed in March 1889.' });
    const prompt = engine.calls[0]!.at(-1)!.content;
    expect(prompt).toContain('When was construction of the tower completed?');
    expect(prompt.match(/^\[\d\] /gm)).toHaveLength(3);
  });

  it('without embeddings or an engine, returns the BM25-ranked passages', async () => {
    const result = await answerFromWebPage(
      'tower construction completed',
      `${server.origin}/page`,
      {
        allowPrivateNetwork: true,
        chunkSize: 300,
        overlap: 50,
        topK: 2,
      },
    );
    expect(result.chunks[0]!.text).toContain('completed in March 1889');
    expect(result.answer.startsWith('[1] ')).toBe(true);
  });

  it('refuses a loopback URL by default, as a failed result', async () => {
    const tool = createWebRagTool({});
    const result = await tool.execute({ query: 'q', url: `${server.origin}/page` }, {});
    expect(result).toMatchObject({ ok: false, errorCode: 'URL_POLICY_VIOLATION' });
  });
});
