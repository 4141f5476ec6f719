import { TrajectorySchema } from '@flowgrpo/core';
import {
  createCalculatorTool,
  LocalCorpus,
  successResult,
  type Tool,
  ToolRegistry,
} from '@flowgrpo/tools';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { OpenAIPolicyEngine, type PolicyTokenizer, TagAgent } from '../src/index.js';
import { parseTagAction } from '../src/tag-agent/tag-protocol.js';
import { OpenAITestServer, reply } from '../src/testing/index.js';

// The tag agent over a vLLM-like /v1/completions server (test/support) with a real tokenizer:
// UTF-8 bytes as token ids, so every expected id sequence is derived by encoding the text by
// hand. The search tool is a real BM25 search over a two-passage local corpus; the calculator is
// the real one (2+3 = 5).

const enc = new TextEncoder();
const bytes = (s: string) => Array.from(enc.encode(s));
const byteTokenizer: PolicyTokenizer = {
  encode: (text) => bytes(text),
  decode: (ids) => new TextDecoder().decode(Uint8Array.from(Array.from(ids))),
};

function searchTool(): Tool<{ query: string }> {
  const corpus = new LocalCorpus([
    { id: '1', title: 'Paris', text: 'Paris is the capital of France.' },
    { id: '2', title: 'Bern', text: 'Bern is the capital of Switzerland.' },
  ]);
  return {
    name: 'search',
    description: 'BM25 search over a local corpus.',
    inputSchema: z.object({ query: z.string() }),
    metadata: {
      version: '1',
      inputTypes: { query: 'str' },
      outputType: 'list of passages',
      limitations: [],
      bestPractices: [],
      examples: [],
      requiresLlm: false,
    },
    async execute(input) {
      const start = performance.now();
      const hits = await corpus.search(input.query, { topK: 1 });
      return successResult(
        hits.map((h) => ({ title: h.title, text: h.text })),
        start,
      );
    },
  };
}

let server: OpenAITestServer;
beforeEach(async () => {
  server = await OpenAITestServer.start({ model: 'policy' });
});
afterEach(async () => {
  await server.close();
});

const policy = () =>
  new OpenAIPolicyEngine({
    model: 'policy',
    baseURLs: server.baseURL,
    tokenizer: byteTokenizer,
    retry: { maxRetries: 0 },
    timeoutMs: 10_000,
  });

/** A completion whose ids are the text's bytes, each with logprob −0.5. */
const sampled = (text: string, finishReason = 'stop') =>
  reply.tokens(text, { ids: bytes(text), logprobs: bytes(text).map(() => -0.5) }, { finishReason });

const agent = (extra: Partial<ConstructorParameters<typeof TagAgent>[0]> = {}) =>
  new TagAgent({
    policy: policy(),
    tools: new ToolRegistry([searchTool(), createCalculatorTool()]),
    searchTool: 'search',
    ...extra,
  });

describe('TagAgent.run', () => {
  it('search → tool call → answer: actions trainable, observations not, one growing sequence', async () => {
    const a1 = '<think>I need the capital.</think><search>capital of France</search>';
    const a2 = '<tool_call>{"name": "calculator", "arguments": {"expression": "2+3"}}</tool_call>';
    const a3 = '<answer>Paris</answer>';
    server.enqueue('completions', sampled(a1), sampled(a2), sampled(a3));
    const ag = agent();
    const t = await ag.run('What is the capital of France?', { queryId: 'q', groupId: 'g' });

    const obs1 =
      '\n\n<information>\n<p title="Paris">\nParis is the capital of France.\n</p>\n</information>\n\n';
    const obs2 = '\n<tool_response>\n5\n</tool_response>\n';
    const prompt = bytes(ag.renderPrompt('What is the capital of France?'));

    expect(TrajectorySchema.parse(t)).toBeTruthy();
    expect(t.stopReason).toBe('answer');
    expect(t.finalAnswer).toBe('Paris');
    expect(t.segments!.map((s) => [s.kind, s.trainable])).toEqual([
      ['prompt', false],
      ['action', true],
      ['observation', false],
      ['action', true],
      ['observation', false],
      ['action', true],
    ]);
    const seg = t.segments!;
    expect(Array.from(seg[0]!.tokens)).toEqual(prompt);
    expect(Array.from(seg[1]!.tokens)).toEqual(bytes(a1));
    expect(seg[1]!.logprobs).toEqual(Float32Array.from(bytes(a1).map(() => -0.5)));
    expect(byteTokenizer.decode(seg[2]!.tokens)).toBe(obs1);
    expect(byteTokenizer.decode(seg[4]!.tokens)).toBe(obs2);
    expect(seg[2]!.logprobs).toBeUndefined();

    // Each call continues the exact sequence so far and stops at the closing action tags.
    const sent = server.requests.map((r) => r.body.prompt as number[]);
    expect(sent[0]).toEqual(prompt);
    expect(sent[1]).toEqual([...prompt, ...bytes(a1), ...bytes(obs1)]);
    expect(sent[2]).toEqual([
      ...prompt,
      ...bytes(a1),
      ...bytes(obs1),
      ...bytes(a2),
      ...bytes(obs2),
    ]);
    expect(server.requests[0]!.body.stop).toEqual(['</search>', '</tool_call>', '</answer>']);
    expect(t.metadata).toMatchObject({
      turns: 3,
      toolCalls: [
        { turn: 1, tool: 'search', input: { query: 'capital of France' }, ok: true },
        { turn: 2, tool: 'calculator', input: { expression: '2+3' }, ok: true },
      ],
    });
  });

  it('puts back a closing tag the server stripped (not trainable) before the observation', async () => {
    server.enqueue('completions', sampled('<search>Bern'), sampled('<answer>Bern</answer>'));
    const ag = agent();
    const t = await ag.run('Capital of Switzerland?');
    expect(
      t.segments!.map((s) => [s.kind, s.trainable, byteTokenizer.decode(s.tokens)]).slice(1),
    ).toEqual([
      ['action', true, '<search>Bern'],
      ['observation', false, '</search>'],
      [
        'observation',
        false,
        '\n\n<information>\n<p title="Bern">\nBern is the capital of Switzerland.\n</p>\n</information>\n\n',
      ],
      ['action', true, '<answer>Bern</answer>'],
    ]);
  });

  it('adds no closer when the engine cut it from the text but kept its ids (the local engine)', async () => {
    // As LocalPolicyEngine returns a stop string: the text ends before it, the ids include it.
    const call = '<tool_call>{"name": "calculator", "arguments": {"expression": "2+3"}}';
    const ids = bytes(`${call}</tool_call>`);
    server.enqueue(
      'completions',
      reply.tokens(call, { ids, logprobs: ids.map(() => -0.5) }),
      sampled('<answer>5</answer>'),
    );
    const t = await agent().run('2+3?');
    expect(t.segments!.map((s) => [s.kind, byteTokenizer.decode(s.tokens)]).slice(1)).toEqual([
      ['action', `${call}</tool_call>`],
      ['observation', '\n<tool_response>\n5\n</tool_response>\n'],
      ['action', '<answer>5</answer>'],
    ]);
    expect(t.finalAnswer).toBe('5');
  });

  it('stops at max turns, lets a length-cut action continue, and reports a bad tool call to the model', async () => {
    server.enqueue(
      'completions',
      sampled('<think>long thought', 'length'),
      sampled('<tool_call>{not json}</tool_call>'),
    );
    const t = await agent({ maxTurns: 2 }).run('q');
    expect(t.stopReason).toBe('max_turns');
    expect(t.finalAnswer).toBe('');
    const last = t.segments!.at(-1)!;
    expect(last.trainable).toBe(false);
    expect(byteTokenizer.decode(last.tokens)).toMatch(
      /^\n<tool_response>\nError: the tool call is not JSON: .+\n<\/tool_response>\n$/,
    );
    expect(server.requests).toHaveLength(2);
  });

  it('caps each call at the tokens left and stops at maxTotalTokens', async () => {
    const promptLength = bytes(agent().renderPrompt('q')).length;
    const limit = promptLength + 30;
    server.enqueue('completions', sampled('<search>Paris</search>'));
    const t = await agent({ maxTotalTokens: limit, maxNewTokens: 512 }).run('q');
    // 30 tokens of room: the call may sample 30; the 22-byte action plus the observation passes the limit.
    expect(server.requests[0]!.body.max_tokens).toBe(30);
    expect(t.stopReason).toBe('max_tokens');
    expect(server.requests).toHaveLength(1);
  });

  it('ends with parse_error when the model stops without a tool call or an answer', async () => {
    server.enqueue('completions', sampled('The capital is Paris.'));
    const t = await agent().run('q');
    expect(t.stopReason).toBe('parse_error');
    expect(t.segments!.filter((s) => s.trainable)).toHaveLength(1);
  });

  it('records a policy failure as stopReason error', async () => {
    server.setFallback('completions', reply.error(400, 'bad request'));
    const t = await agent().run('q');
    expect(t.stopReason).toBe('error');
    expect(t.segments).toHaveLength(1);
  });
});

describe('parseTagAction', () => {
  it('takes the block that closes first', () => {
    expect(parseTagAction('<search> a </search> <answer>b</answer>')).toMatchObject({
      kind: 'search',
      query: 'a',
    });
    expect(parseTagAction('<answer> 1997 </answer>')).toMatchObject({
      kind: 'answer',
      answer: '1997',
    });
    expect(parseTagAction('<think>no action</think>')).toBeUndefined();
  });
});
