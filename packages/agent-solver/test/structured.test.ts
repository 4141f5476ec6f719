import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  LLMRefusalError,
  LLMRequestError,
  OpenAIEngine,
  StructuredOutputError,
} from '../src/index.js';
import {
  dropNullOptionals,
  toStrictJsonSchema,
  zodToJsonSchema,
} from '../src/structured/json-schema.js';
import { bracketSlices, parseModelJson } from '../src/structured/parse-json.js';
import { schemaNameFor } from '../src/structured/structured-output.js';
import { exampleFromJsonSchema, OpenAITestServer, reply } from '../src/testing/index.js';

// Expected parses are written out by hand from the literal model replies below; the structured
// requests go to a real HTTP server through the real `openai` client.

describe('parseModelJson', () => {
  it.each([
    ['plain JSON', '{"a": 1}', { a: 1 }, false],
    [
      'a ```json fence with prose',
      'Sure!\n```json\n{"a": 1, "b": "x"}\n```\nHope it helps.',
      { a: 1, b: 'x' },
      false,
    ],
    [
      'prose around an object',
      'The answer is {"a": {"b": [1, 2]}} as requested.',
      { a: { b: [1, 2] } },
      false,
    ],
    [
      'braces inside strings',
      'x {"s": "a } b { c", "t": "\\"q\\""} y',
      { s: 'a } b { c', t: '"q"' },
      false,
    ],
    ['a trailing comma', '{"a": 1, "b": [1, 2,],}', { a: 1, b: [1, 2] }, true],
    ['single quotes and a bare key', "{a: 'x'}", { a: 'x' }, true],
    ['truncated output', '{"a": 1, "b": ["x", "y', { a: 1, b: ['x', 'y'] }, true],
    [
      'a truncated fence',
      '```json\n{"plan": "go", "steps": [1, 2',
      { plan: 'go', steps: [1, 2] },
      true,
    ],
    [
      'prose, then a bracket that is not JSON, then the object',
      'See [note] below: {"ok": true}',
      { ok: true },
      false,
    ],
  ])('reads %s', (_name, text, expected, repaired) => {
    const r = parseModelJson(text);
    expect(r.ok).toBe(true);
    if (r.ok) {
      expect(r.value).toEqual(expected);
      expect(r.repaired).toBe(repaired);
    }
  });

  it('fails on text without JSON', () => {
    expect(parseModelJson('I do not know.').ok).toBe(false);
    expect(parseModelJson('   ').ok).toBe(false);
  });

  it('bracketSlices finds balanced spans and runs an unclosed one to the end', () => {
    expect(bracketSlices('a {"x": [1]} b [2] c {"y": ', 10)).toEqual([
      '{"x": [1]}',
      '[1]',
      '[2]',
      '{"y": ',
    ]);
  });
});

describe('strict JSON Schema', () => {
  const Plan = z.object({
    tool: z.string().min(1).max(40),
    note: z.string().optional(),
    confidence: z.number().nullable(),
    steps: z.array(z.object({ id: z.number().int().min(0), done: z.boolean().optional() })).max(5),
    mode: z.enum(['fast', 'slow']).default('fast'),
  });

  it('closes objects, requires every property, makes optional ones nullable, drops constraints', () => {
    // Hand-written expectation of OpenAI strict mode for the schema above; length, bound and
    // item-count constraints are left to zod.
    expect(toStrictJsonSchema(Plan)).toEqual({
      type: 'object',
      properties: {
        tool: { type: 'string' },
        note: { anyOf: [{ type: 'string' }, { type: 'null' }] },
        // zod writes a nullable primitive as a type list; it is required, so left as is.
        confidence: { type: ['number', 'null'] },
        steps: {
          type: 'array',
          items: {
            type: 'object',
            properties: {
              id: { type: 'integer' },
              done: { anyOf: [{ type: 'boolean' }, { type: 'null' }] },
            },
            required: ['id', 'done'],
            additionalProperties: false,
          },
        },
        mode: { anyOf: [{ type: 'string', enum: ['fast', 'slow'] }, { type: 'null' }] },
      },
      required: ['tool', 'note', 'confidence', 'steps', 'mode'],
      additionalProperties: false,
    });
  });

  it('drops the nulls strict mode forced into optional fields, keeps real nullables', () => {
    const value = {
      tool: 't',
      note: null,
      confidence: null,
      steps: [{ id: 1, done: null }],
      mode: null,
    };
    const cleaned = dropNullOptionals(value, zodToJsonSchema(Plan));
    expect(cleaned).toEqual({ tool: 't', confidence: null, steps: [{ id: 1 }] });
    expect(Plan.parse(cleaned)).toEqual({
      tool: 't',
      confidence: null,
      steps: [{ id: 1 }],
      mode: 'fast',
    });
  });

  it('sanitises schema names', () => {
    expect(schemaNameFor('Next Step!')).toBe('Next_Step_');
    expect(schemaNameFor(undefined)).toBe('response');
  });

  it('keeps the constraints in the plain schema used for prompts', () => {
    const plain = zodToJsonSchema(Plan) as { properties: { tool: object; steps: object } };
    expect(plain.properties.tool).toEqual({ type: 'string', minLength: 1, maxLength: 40 });
    expect(plain.properties.steps).toMatchObject({ maxItems: 5 });
  });

  it('the test server builds a valid instance from a strict schema', () => {
    const example = exampleFromJsonSchema(toStrictJsonSchema(Plan));
    expect(Plan.safeParse(dropNullOptionals(example, zodToJsonSchema(Plan))).success).toBe(true);
  });
});

describe('OpenAIEngine.generateObject', () => {
  let server: OpenAITestServer;
  beforeEach(async () => {
    server = await OpenAITestServer.start();
  });
  afterEach(async () => {
    await server.close();
  });

  const Verdict = z.object({ analysis: z.string(), correct: z.boolean() });
  const ask = [{ role: 'user' as const, content: 'Is 2+2=4?' }];
  const engine = (extra: Partial<ConstructorParameters<typeof OpenAIEngine>[0]> = {}) =>
    new OpenAIEngine({
      model: 'judge',
      baseURL: server.baseURL,
      apiKey: 'k',
      retry: { initialDelayMs: 1 },
      ...extra,
    });

  it('sends a strict json_schema response_format and parses the reply', async () => {
    server.enqueue('chat', reply.fromSchema());
    const r = await engine().generateObject(ask, Verdict, { schemaName: 'verdict' });
    // exampleFromJsonSchema answers "x" for strings and true for booleans.
    expect(r.object).toEqual({ analysis: 'x', correct: true });
    expect(server.requests[0]!.body.response_format).toEqual({
      type: 'json_schema',
      json_schema: {
        name: 'verdict',
        strict: true,
        schema: {
          type: 'object',
          properties: { analysis: { type: 'string' }, correct: { type: 'boolean' } },
          required: ['analysis', 'correct'],
          additionalProperties: false,
        },
      },
    });
    expect(server.requests[0]!.body.messages).toEqual(ask);
  });

  it('repairs malformed JSON without a second call', async () => {
    server.enqueue(
      'chat',
      reply.text('Here you go:\n```json\n{"analysis": "2+2 is 4", "correct": true,}\n```'),
    );
    const r = await engine().generateObject(ask, Verdict);
    expect(r.object).toEqual({ analysis: '2+2 is 4', correct: true });
    expect(r.rawText).toBe('{"analysis": "2+2 is 4", "correct": true}');
    expect(server.requestsTo('chat')).toHaveLength(1);
  });

  it('makes one corrective call showing the invalid reply and the error, then succeeds', async () => {
    server.enqueue(
      'chat',
      reply.text('{"analysis": "ok", "correct": "yes"}', {
        usage: { prompt_tokens: 11, completion_tokens: 5 },
      }),
      reply.text('{"analysis": "ok", "correct": true}', {
        usage: { prompt_tokens: 40, completion_tokens: 6 },
      }),
    );
    const e = engine();
    const r = await e.generateObject(ask, Verdict);
    expect(r.object).toEqual({ analysis: 'ok', correct: true });
    // Usage of both calls: 11+40 prompt, 5+6 completion.
    expect(r.usage).toEqual({ promptTokens: 51, completionTokens: 11, totalTokens: 62 });
    expect(e.usage).toEqual(r.usage);
    const second = server.requests[1]!.body.messages!;
    expect(second.slice(0, 2)).toEqual([
      ask[0],
      { role: 'assistant', content: '{"analysis": "ok", "correct": "yes"}' },
    ]);
    expect(second[2]!.role).toBe('user');
    expect(second[2]!.content).toContain('correct');
    expect(second[2]!.content).toContain('expected boolean');
  });

  it('throws StructuredOutputError with the raw text after the corrective call fails', async () => {
    server.enqueue(
      'chat',
      reply.text('{"analysis": 1}'),
      reply.text('{"analysis": 2, "correct": null}'),
    );
    const err = await engine()
      .generateObject(ask, Verdict)
      .catch((e: unknown) => e);
    expect(StructuredOutputError.isInstance(err)).toBe(true);
    const e = err as StructuredOutputError;
    expect(e.rawText).toBe('{"analysis": 2, "correct": null}');
    expect(e.attempts).toBe(2);
    expect(e.issues.map((i) => i.path.join('.')).sort()).toEqual(['analysis', 'correct']);
    expect(server.requestsTo('chat')).toHaveLength(2);
  });

  it('reports a reply that is not JSON at all through parseError', async () => {
    server.enqueue('chat', reply.text('I refuse to use JSON.'), reply.text('Still no.'));
    const err = (await engine()
      .generateObject(ask, Verdict)
      .catch((e: unknown) => e)) as StructuredOutputError;
    expect(StructuredOutputError.isInstance(err)).toBe(true);
    expect(err.parseError).toMatch(/no JSON object/);
    expect(err.issues).toEqual([]);
  });

  it("'prompt' mode puts the schema in the system prompt and sends no response_format", async () => {
    server.enqueue('chat', reply.text('{"analysis": "a", "correct": false}'));
    const r = await engine({ structuredOutput: 'prompt' }).generateObject(
      [{ role: 'system', content: 'You are a judge.' }, ...ask],
      Verdict,
    );
    expect(r.object).toEqual({ analysis: 'a', correct: false });
    const body = server.requests[0]!.body;
    expect(body.response_format).toBeUndefined();
    const system = body.messages![0]!;
    expect(system.role).toBe('system');
    expect(system.content).toMatch(/^You are a judge\.\n\n/);
    expect(system.content).toContain(JSON.stringify(zodToJsonSchema(Verdict)));
  });

  it("'json_object' mode sends JSON mode plus the schema as a new system message", async () => {
    server.enqueue('chat', reply.text('{"analysis": "a", "correct": true}'));
    await engine({ structuredOutput: 'json_object' }).generateObject(ask, Verdict);
    const body = server.requests[0]!.body;
    expect(body.response_format).toEqual({ type: 'json_object' });
    expect(body.messages![0]!.role).toBe('system');
    expect(body.messages![0]!.content).toContain('"required":["analysis","correct"]');
  });

  it("'auto' falls back to the prompt mode for good when json_schema is rejected", async () => {
    server.enqueue(
      'chat',
      reply.error(400, "response_format type 'json_schema' is not supported"),
      reply.text('{"analysis": "a", "correct": true}'),
      reply.text('{"analysis": "b", "correct": false}'),
    );
    const e = engine({ structuredOutput: 'auto' });
    expect(e.structuredOutputMode).toBe('json_schema');
    expect((await e.generateObject(ask, Verdict)).object).toEqual({ analysis: 'a', correct: true });
    expect(e.structuredOutputMode).toBe('prompt');
    expect((await e.generateObject(ask, Verdict)).object).toEqual({
      analysis: 'b',
      correct: false,
    });
    const formats = server.requests.map((r) => r.body.response_format?.type ?? 'none');
    expect(formats).toEqual(['json_schema', 'none', 'none']);
    expect(server.requests[1]!.body.messages![0]!.role).toBe('system');
  });

  it('without auto, a rejected json_schema request is an error', async () => {
    server.enqueue('chat', reply.error(400, 'unsupported'));
    const err = await engine()
      .generateObject(ask, Verdict)
      .catch((x: unknown) => x);
    expect(LLMRequestError.isInstance(err)).toBe(true);
  });

  it('accepts null for optional fields (strict mode) and drops them', async () => {
    const Step = z.object({ tool: z.string(), query: z.string().optional() });
    server.enqueue('chat', reply.text('{"tool": "search", "query": null}'));
    const r = await engine().generateObject(ask, Step);
    expect(r.object).toEqual({ tool: 'search' });
  });

  it('a refusal is an LLMRefusalError, not a corrective retry', async () => {
    server.enqueue('chat', reply.refusal('No.'));
    const err = await engine()
      .generateObject(ask, Verdict)
      .catch((e: unknown) => e);
    expect(LLMRefusalError.isInstance(err)).toBe(true);
    expect(server.requestsTo('chat')).toHaveLength(1);
  });
});
