// The gateway's responses against vLLM's response models (`@flowgrpo/agent/testing`'s
// vllm-protocol, written from vLLM's source and citing the files and commit read): a client written
// for vLLM — one that parses CompletionResponse, ChatCompletionResponse, their stream chunks and
// ModelList with vLLM's pydantic models — must be able to read every body the gateway sends.
// Required fields present, JSON types right, null only where vLLM's model has `X | None`
// (e.g. `message.tool_calls` is a list, never null). Over real HTTP on 127.0.0.1, with a scripted
// engine on a tiny byte-level Qwen2 tokenizer (no sampling needed to check shapes).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { vllmResponseProblems } from '@flowgrpo/agent/testing';
import { createTinyQwen2, type TinyModel } from '@flowgrpo/models';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPolicyGateway, EnginePolicyHost, type PolicyGateway } from '../src/index.js';
import { ScriptedEngine } from './support/gateway-fixtures.js';

const root = mkdtempSync(join(tmpdir(), 'flowgrpo-gateway-vllm-'));
let model: TinyModel;
let gw: PolicyGateway;

const tools = [
  {
    type: 'function',
    function: {
      name: 'lookup',
      parameters: { type: 'object', properties: { query: { type: 'string' } } },
    },
  },
];

beforeAll(async () => {
  model = await createTinyQwen2(join(root, 'model'), {
    seed: 'gateway-vllm',
    hiddenSize: 32,
    layers: 1,
    heads: 4,
    kvHeads: 2,
    intermediateSize: 64,
    ropeTheta: 10000,
  });
  const engine = new ScriptedEngine(model.tokenizer, [
    'Hello there.',
    'Hello there.',
    'Let me look.\n<tool_call>\n{"name": "lookup", "arguments": {"query": "x"}}\n</tool_call>',
    'Hello there.',
  ]);
  gw = await createPolicyGateway({
    host: new EnginePolicyHost({ tokenizer: model.tokenizer, engines: { policy: engine } }),
    defaultMaxTokens: 16,
  });
}, 120_000);

afterAll(async () => {
  await gw?.close();
  rmSync(root, { recursive: true, force: true });
});

async function post(path: string, body: unknown): Promise<{ status: number; text: string }> {
  const res = await fetch(`${gw.baseURL}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, text: await res.text() };
}

/** The JSON events of an SSE body, without the final [DONE]. */
function events(text: string): unknown[] {
  return text
    .split('\n')
    .filter((l) => l.startsWith('data: ') && l !== 'data: [DONE]')
    .map((l) => JSON.parse(l.slice(6)));
}

const ask = { model: 'policy', return_token_ids: true, return_tokens_as_token_ids: true };
const messages = [{ role: 'user', content: 'Say hello.' }];

describe('the gateway answers in vLLM response models', () => {
  it('/v1/completions (logprobs, token ids) parses as CompletionResponse', async () => {
    const r = await post('/completions', { ...ask, prompt: 'Say hello.', logprobs: 1 });
    expect(r.status).toBe(200);
    const body = JSON.parse(r.text);
    expect(vllmResponseProblems('CompletionResponse', body)).toEqual([]);
    expect(body.choices[0].logprobs.tokens[0]).toMatch(/^token_id:\d+$/);
    expect(body.choices[0].prompt_token_ids.length).toBeGreaterThan(0);
  });

  it('/v1/chat/completions (logprobs, token ids) parses as ChatCompletionResponse', async () => {
    const r = await post('/chat/completions', { ...ask, messages, logprobs: true });
    expect(r.status).toBe(200);
    const body = JSON.parse(r.text);
    expect(vllmResponseProblems('ChatCompletionResponse', body)).toEqual([]);
    expect(body.prompt_token_ids.length).toBeGreaterThan(0);
    expect(body.choices[0].token_ids.length).toBe(body.choices[0].logprobs.content.length);
  });

  it('a chat reply with tool calls parses as ChatCompletionResponse', async () => {
    const r = await post('/chat/completions', { model: 'policy', messages, tools });
    const body = JSON.parse(r.text);
    expect(body.choices[0].message.tool_calls).toHaveLength(1);
    expect(vllmResponseProblems('ChatCompletionResponse', body)).toEqual([]);
  });

  it('stream chunks parse as ChatCompletionStreamResponse / CompletionStreamResponse', async () => {
    const stream = { stream: true, stream_options: { include_usage: true } };
    const chat = await post('/chat/completions', { ...ask, ...stream, messages, logprobs: true });
    const chunks = events(chat.text);
    expect(chunks.length).toBeGreaterThan(2);
    for (const c of chunks)
      expect(vllmResponseProblems('ChatCompletionStreamResponse', c)).toEqual([]);
    const text = await post('/completions', {
      ...ask,
      ...stream,
      prompt: 'Say hello.',
      logprobs: 1,
    });
    const parts = events(text.text);
    expect(parts.length).toBeGreaterThan(2);
    for (const c of parts) expect(vllmResponseProblems('CompletionStreamResponse', c)).toEqual([]);
  });

  it('/v1/models parses as ModelList', async () => {
    const res = await fetch(`${gw.baseURL}/models`);
    expect(vllmResponseProblems('ModelList', await res.json())).toEqual([]);
  });
});
