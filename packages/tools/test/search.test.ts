import type { ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sharedPath, skipWithoutShared } from '../../../test-utils/shared.js';
import { HttpRequestError } from '../src/errors.js';
import { createGeneralistTool } from '../src/generalist-tool.js';
import { LocalCorpus, loadHotpotQaPassages } from '../src/local-corpus.js';
import { MediaWikiClient } from '../src/mediawiki-client.js';
import { RetrievalServerProvider } from '../src/retrieval-server-provider.js';
import { GoogleCustomSearchProvider, SerperSearchProvider } from '../src/web-search-providers.js';
import { createWebSearchTool, formatSearchHits } from '../src/web-search-tool.js';
import { createWikipediaTool } from '../src/wikipedia-tool.js';
import { type LocalServer, ScriptedEngine, sendJson, startServer } from './helpers/local-server.js';

// Scripted MediaWiki: the JSON shapes of action=query&list=search and prop=extracts|info with
// formatversion=2, as en.wikipedia.org answers them.
const PAGES: Record<string, { extract: string; pageid: number }> = {
  'Marie Curie': {
    pageid: 20408,
    extract:
      'Marie Curie was a Polish and naturalised-French physicist and chemist.\n' +
      'She was the first woman to win a Nobel Prize, the first person to win a Nobel Prize twice, ' +
      'and the only person to win a Nobel Prize in two scientific fields.\n' +
      'Her husband Pierre Curie was a co-winner of her first Nobel Prize.',
  },
  'Pierre Curie': {
    pageid: 24035,
    extract: 'Pierre Curie was a French physicist, a pioneer in crystallography and magnetism.',
  },
};

function mediawiki(url: URL, res: ServerResponse): void {
  const p = url.searchParams;
  if (p.get('format') !== 'json' || p.get('formatversion') !== '2' || p.get('action') !== 'query') {
    sendJson(res, { error: { code: 'badparams', info: 'unexpected parameters' } });
    return;
  }
  if (p.get('list') === 'search') {
    const q = p.get('srsearch') ?? '';
    if (q === 'slow') {
      setTimeout(() => sendJson(res, { query: { search: [] } }), 2000);
      return;
    }
    const all = [
      {
        ns: 0,
        title: 'Marie Curie',
        pageid: 20408,
        snippet: '<span class="searchmatch">Marie</span> Curie &amp; radium',
      },
      {
        ns: 0,
        title: 'Pierre Curie',
        pageid: 24035,
        snippet: '<span class="searchmatch">Pierre</span> Curie',
      },
      { ns: 0, title: 'Curie (unit)', pageid: 5555, snippet: 'a unit of radioactivity' },
    ];
    const hits = q.toLowerCase().includes('curie') ? all : [];
    sendJson(res, {
      batchcomplete: true,
      continue: { sroffset: 3, continue: '-||' },
      query: {
        searchinfo: { totalhits: hits.length },
        search: hits.slice(0, Number(p.get('srlimit'))),
      },
    });
    return;
  }
  if (p.get('prop') === 'extracts|info') {
    const title = p.get('titles') ?? '';
    const page = PAGES[title];
    sendJson(res, {
      batchcomplete: true,
      query: {
        pages: page
          ? [
              {
                pageid: page.pageid,
                ns: 0,
                title,
                extract: page.extract,
                fullurl: `https://en.wikipedia.org/wiki/${title.replace(/ /g, '_')}`,
              },
            ]
          : [{ ns: 0, title, missing: true }],
      },
    });
    return;
  }
  sendJson(res, { error: { code: 'unknown', info: 'unsupported request' } });
}

let server: LocalServer;
beforeAll(async () => {
  server = await startServer((req, body, res) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    if (url.pathname === '/w/api.php') return mediawiki(url, res);
    if (url.pathname === '/retrieve' && req.method === 'POST') {
      // The AReaL/Search-R1 retrieval protocol over a tiny corpus, FlashRAG `contents` format.
      const { queries, topk, return_scores } = JSON.parse(body) as {
        queries: string[];
        topk: number;
        return_scores: boolean;
      };
      const docs = [
        { id: '7', contents: '"China"\nChina is a country in East Asia.' },
        {
          id: '9',
          contents: '"Great Wall of China"\nThe Great Wall is a series of fortifications.',
        },
        { id: '3', contents: '"Chinatown"\nA Chinatown is an ethnic enclave.' },
      ];
      const result = queries.map((_q, qi) =>
        docs
          .slice(0, topk)
          .map((d, i) => (return_scores ? { document: d, score: 10 - i - qi } : d)),
      );
      return sendJson(res, { result });
    }
    if (url.pathname === '/search' && req.method === 'POST') {
      if (req.headers['x-api-key'] !== 'serper-key')
        return sendJson(res, { message: 'Unauthorized' }, 403);
      const { q, num } = JSON.parse(body) as { q: string; num: number };
      return sendJson(res, {
        searchParameters: { q, num },
        answerBox: { title: 'Canberra', answer: 'Canberra' },
        organic: [
          {
            title: 'Canberra - Wikipedia',
            link: 'https://en.wikipedia.org/wiki/Canberra',
            snippet: 'Canberra is the capital city of Australia.',
            position: 1,
          },
          {
            title: 'Australia',
            link: 'https://example.org/au',
            snippet: 'A country.',
            position: 2,
          },
        ],
      });
    }
    if (url.pathname === '/customsearch/v1') {
      if (url.searchParams.get('key') !== 'cse-key')
        return sendJson(res, { error: { code: 400 } }, 400);
      return sendJson(res, {
        kind: 'customsearch#search',
        items: [
          {
            kind: 'customsearch#result',
            title: 'Node.js',
            link: 'https://nodejs.org/',
            snippet: 'Node.js is a JavaScript runtime.',
          },
        ],
      });
    }
    res.writeHead(404);
    res.end();
  });
});
afterAll(async () => {
  await server.close();
});

describe('MediaWikiClient against a local MediaWiki', () => {
  const client = () =>
    new MediaWikiClient({
      apiUrl: `${server.origin}/w/api.php`,
      userAgent: 'flowgrpo-test/1.0 (test@example.org)',
    });

  it('searches with list=search and strips snippet markup', async () => {
    const hits = await client().search('Marie Curie Nobel', { topK: 2 });
    expect(hits).toEqual([
      {
        id: '20408',
        title: 'Marie Curie',
        text: 'Marie Curie & radium',
        url: `${server.origin}/wiki/Marie_Curie`,
      },
      {
        id: '24035',
        title: 'Pierre Curie',
        text: 'Pierre Curie',
        url: `${server.origin}/wiki/Pierre_Curie`,
      },
    ]);
    const req = server.requests.at(-1)!;
    expect(req.headers['user-agent']).toBe('flowgrpo-test/1.0 (test@example.org)');
    const params = new URL(req.url, 'http://x').searchParams;
    expect(params.get('srsearch')).toBe('Marie Curie Nobel');
    expect(params.get('srlimit')).toBe('2');
  });

  it('reads plain-text extracts and skips missing pages', async () => {
    const pages = await client().getPages(['Marie Curie', 'No Such Page']);
    expect(pages).toHaveLength(1);
    expect(pages[0]!.title).toBe('Marie Curie');
    expect(pages[0]!.url).toBe('https://en.wikipedia.org/wiki/Marie_Curie');
    expect(pages[0]!.text).toContain('first woman to win a Nobel Prize');
    const params = new URL(server.requests.at(-1)!.url, 'http://x').searchParams;
    expect(params.get('explaintext')).toBe('1');
    expect(params.get('redirects')).toBe('1');
  });

  it('times out and reports API errors as HttpRequestError', async () => {
    const slow = new MediaWikiClient({ apiUrl: `${server.origin}/w/api.php`, timeoutMs: 200 });
    await expect(slow.search('slow')).rejects.toSatisfy(
      (e) => HttpRequestError.isInstance(e) && /timed out after 200 ms/.test(e.message),
    );
    const bad = new MediaWikiClient({ apiUrl: `${server.origin}/nope/api.php` });
    await expect(bad.search('x')).rejects.toThrow(/HTTP 404/);
  });
});

describe('Wikipedia RAG tool', () => {
  it('selects pages with the LLM, then answers from each page', async () => {
    const engine = new ScriptedEngine(
      (messages) => {
        const prompt = messages.at(-1)!.content;
        return prompt.includes('first woman to win a Nobel Prize') ? 'Marie Curie.' : 'Unknown.';
      },
      () => ({ matched_queries: ['Marie Curie'], matched_query_ids: [0, 7] }),
    );
    const tool = createWikipediaTool({
      backend: new MediaWikiClient({ apiUrl: `${server.origin}/w/api.php` }),
      engine,
    });
    const result = await tool.execute(
      { query: 'Who was the first woman to win a Nobel Prize? Curie?' },
      {},
    );
    expect(result.ok).toBe(true);
    expect(result.output).toEqual({
      query: 'Who was the first woman to win a Nobel Prize? Curie?',
      relevant_pages: [
        {
          title: 'Marie Curie',
          url: 'https://en.wikipedia.org/wiki/Marie_Curie',
          retrieved_information: 'Marie Curie.',
        },
      ],
    });
    // First call: the selection prompt lists numbered candidates.
    expect(engine.calls[0]!.at(-1)!.content).toContain(
      '0. Marie Curie\n1. Pierre Curie\n2. Curie (unit)',
    );
  });

  it('falls back to the top result when selection fails, and reports missing pages per page', async () => {
    const engine = new ScriptedEngine(() => 'ok'); // generateObject throws: no object scripted
    const tool = createWikipediaTool({
      backend: new MediaWikiClient({ apiUrl: `${server.origin}/w/api.php` }),
      engine,
    });
    const result = await tool.execute({ query: 'curie' }, {});
    expect(
      (result.output as { relevant_pages: { title: string }[] }).relevant_pages.map((p) => p.title),
    ).toEqual(['Marie Curie']);
    const noEngine = createWikipediaTool({
      backend: new MediaWikiClient({ apiUrl: `${server.origin}/w/api.php` }),
    });
    const all = await noEngine.execute({ query: 'curie' }, {});
    const pages = (all.output as { relevant_pages: { title: string; error?: string }[] })
      .relevant_pages;
    expect(pages.map((p) => [p.title, p.error])).toEqual([
      ['Marie Curie', undefined],
      ['Pierre Curie', undefined],
      ['Curie (unit)', 'Page not found'],
    ]);
    const none = await noEngine.execute({ query: 'zebra' }, {});
    expect(none).toMatchObject({ ok: false, error: "No Wikipedia results for 'zebra'" });
  });

  describe.skipIf(skipWithoutShared('offline Wikipedia tool'))(
    'offline, on the HotpotQA corpus',
    () => {
      it('answers from the local corpus without network', async () => {
        const corpus = new LocalCorpus(
          await loadHotpotQaPassages(sharedPath('data', 'hotpotqa', 'dev-distractor-500.jsonl')),
        );
        const tool = createWikipediaTool({ backend: corpus, maxPages: 2 });
        // HotpotQA row 0 (supporting titles: "Kiss and Tell (1945 film)", "Shirley Temple").
        const result = await tool.execute(
          { query: 'Shirley Temple Chief of Protocol ambassador' },
          {},
        );
        const pages = (
          result.output as { relevant_pages: { title: string; retrieved_information: string }[] }
        ).relevant_pages;
        expect(pages[0]!.title).toBe('Shirley Temple');
        expect(pages[0]!.retrieved_information).toContain('Chief of Protocol of the United States');
      });
    },
  );
});

describe('search providers', () => {
  it('speaks the /retrieve protocol, with and without scores', async () => {
    const withScores = new RetrievalServerProvider({ url: `${server.origin}/retrieve` });
    const hits = await withScores.searchMany(['China', 'wall'], { topK: 2 });
    expect(JSON.parse(server.requests.at(-1)!.body)).toEqual({
      queries: ['China', 'wall'],
      topk: 2,
      return_scores: true,
    });
    expect(hits[0]).toEqual([
      { id: '7', title: 'China', text: 'China is a country in East Asia.', score: 10 },
      {
        id: '9',
        title: 'Great Wall of China',
        text: 'The Great Wall is a series of fortifications.',
        score: 9,
      },
    ]);
    expect(hits[1]![0]!.score).toBe(9);
    const plain = new RetrievalServerProvider({
      url: `${server.origin}/retrieve`,
      returnScores: false,
    });
    expect(await plain.search('China', { topK: 1 })).toEqual([
      { id: '7', title: 'China', text: 'China is a country in East Asia.' },
    ]);
    expect(formatSearchHits(await plain.search('China', { topK: 2 }), 'areal')).toBe(
      '<p title="China">\nChina is a country in East Asia.\n</p>\n\n' +
        '<p title="Great Wall of China">\nThe Great Wall is a series of fortifications.\n</p>',
    );
  });

  it('queries Serper and Google Custom Search with their keys', async () => {
    const serper = new SerperSearchProvider({
      apiKey: 'serper-key',
      endpoint: `${server.origin}/search`,
    });
    const hits = await serper.search('capital of Australia', { topK: 2 });
    expect(hits).toEqual([
      { title: 'Canberra', text: 'Canberra' },
      {
        title: 'Canberra - Wikipedia',
        text: 'Canberra is the capital city of Australia.',
        url: 'https://en.wikipedia.org/wiki/Canberra',
      },
    ]);
    const wrongKey = new SerperSearchProvider({
      apiKey: 'nope',
      endpoint: `${server.origin}/search`,
    });
    await expect(wrongKey.search('x')).rejects.toThrow(/HTTP 403/);

    const cse = new GoogleCustomSearchProvider({
      apiKey: 'cse-key',
      cx: 'engine-1',
      endpoint: `${server.origin}/customsearch/v1`,
    });
    expect(await cse.search('node', { topK: 20 })).toEqual([
      { title: 'Node.js', text: 'Node.js is a JavaScript runtime.', url: 'https://nodejs.org/' },
    ]);
    const params = new URL(server.requests.at(-1)!.url, 'http://x').searchParams;
    expect([params.get('cx'), params.get('q'), params.get('num')]).toEqual([
      'engine-1',
      'node',
      '10',
    ]);
    const badKey = new GoogleCustomSearchProvider({
      apiKey: 'leaky-secret',
      cx: 'c',
      endpoint: `${server.origin}/customsearch/v1`,
    });
    const error = (await badKey.search('x').then(
      () => new Error('no error'),
      (e: unknown) => e as Error,
    )) as Error;
    expect(error.message).toMatch(/HTTP 400/);
    expect(error.message).not.toContain('leaky-secret');
    expect(() => new SerperSearchProvider({ apiKey: '' })).toThrow(/apiKey/);
  });

  it('web search tool lists results, or answers from them with an engine', async () => {
    const provider = new RetrievalServerProvider({ url: `${server.origin}/retrieve` });
    const listing = createWebSearchTool({ provider, style: 'search-r1' });
    const result = await listing.execute({ query: 'China', num_results: 2 }, {});
    expect(result.output).toBe(
      'Doc 1(Title: China) China is a country in East Asia.\n' +
        'Doc 2(Title: Great Wall of China) The Great Wall is a series of fortifications.',
    );
    const engine = new ScriptedEngine((m) =>
      m.at(-1)!.content.includes('East Asia') ? 'East Asia.' : '?',
    );
    const answering = createWebSearchTool({ provider, engine });
    expect((await answering.execute({ query: 'Where is China?' }, {})).output).toBe('East Asia.');
    const down = createWebSearchTool({
      provider: new RetrievalServerProvider({ url: `${server.origin}/gone` }),
    });
    expect(await down.execute({ query: 'x' }, {})).toMatchObject({
      ok: false,
      errorCode: 'HTTP_REQUEST_FAILED',
    });
  });

  it('generalist tool passes the query to the engine', async () => {
    const engine = new ScriptedEngine((m) => `echo: ${m.at(-1)!.content}`);
    const tool = createGeneralistTool({ engine, systemPrompt: 'Be brief.' });
    expect(await tool.execute({ query: '2+2?' }, {})).toMatchObject({
      ok: true,
      output: 'echo: 2+2?',
    });
    expect(engine.calls[0]).toEqual([
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: '2+2?' },
    ]);
  });
});
