import { OpenAIPolicyEngine, type PolicyTokenizer } from '@flowgrpo/agent';
import { OpenAITestServer, reply } from '@flowgrpo/agent/testing';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { operationExpression } from '../src/offline-roles.js';
import { agentFactory } from '../src/run-agent.js';
import { AgentSchema } from '../src/run-config.js';

// The agents a run config's `agent` key builds (agentFactory), around a policy whose replies are
// scripted on a real OpenAI-compatible server: a Flow agent whose config names no server for its
// fixed roles runs them offline, rule-based (offline-roles.ts) with the real calculator; the tag
// agent sends `system_prompt` as its system message. Expected values are worked by hand: 7 boxes
// of 68 → "7*68" → 476.

const bytes = (s: string) => Array.from(new TextEncoder().encode(s));
const byteTokenizer: PolicyTokenizer = {
  encode: (text) => bytes(text),
  decode: (ids) => new TextDecoder().decode(Uint8Array.from(Array.from(ids))),
};
const sampled = (text: string) =>
  reply.tokens(text, { ids: bytes(text), logprobs: bytes(text).map(() => -0.5) });

let server: OpenAITestServer;
beforeEach(async () => {
  server = await OpenAITestServer.start({ model: 'policy' });
});
afterEach(async () => {
  await server.close();
});

const QUESTION = 'How many shells does Fay buy in 7 boxes of 68?';

/** The offline Flow agent around a planner served by the test server (text prompts: compact). */
function offlineAgent(extra: Record<string, unknown> = {}) {
  const spec = AgentSchema.parse({ type: 'flow', tools: ['calculator'], max_turns: 3, ...extra });
  const policy = new OpenAIPolicyEngine({
    model: 'policy',
    baseURLs: server.baseURL,
    tokenizer: byteTokenizer,
    retry: { maxRetries: 0 },
  });
  const factory = agentFactory(spec, { maxTurns: 3, maxTokens: 64, temperature: 1, topP: 1 }, {});
  return factory(policy);
}

describe('the Flow agent offline (no agent.engine)', () => {
  it('the executor grounds an operation in the question; the generator answers the result', async () => {
    server.enqueue(
      'completions',
      sampled('{"sub_goal":"multiply the numbers","tool_name":"calculator"}'),
      sampled('{"sub_goal":"Final Answer","tool_name":"None"}'),
    );
    const t = await offlineAgent({ planner_prompt: 'compact' }).run(QUESTION);
    expect(t.turns!.map((turn) => [turn.toolName, turn.toolInput, turn.toolResult])).toEqual([
      ['calculator', { expression: '7*68' }, '476'],
      [undefined, undefined, undefined],
    ]);
    expect(t.finalAnswer).toBe('476');
    expect(t.stopReason).toBe('answer');
    // The only server called is the policy's (two planner turns).
    expect(server.requests).toHaveLength(2);
  });

  it('any other sub-goal goes to the tool verbatim; planner_prompt "compact" is a text prompt', async () => {
    server.enqueue(
      'completions',
      sampled('{"sub_goal":"7*68+1","tool_name":"calculator"}'),
      sampled('{"sub_goal":"Final Answer","tool_name":"None"}'),
    );
    const t = await offlineAgent({ planner_prompt: 'compact' }).run(QUESTION);
    expect(t.turns![0]!.toolInput).toEqual({ expression: '7*68+1' });
    expect(t.finalAnswer).toBe('477');
    // compactPlannerPrompt: raw text on /v1/completions, starting with its task line.
    expect(server.requests[0]!.path).toBe('/v1/completions');
    expect(String(server.requests[0]!.body.prompt)).toMatch(/^Task: choose the next step/);
  });

  it('operationExpression: the question numbers in order, joined by the named operation', () => {
    expect(operationExpression('subtract the numbers', 'Ana had 72 and gave 49 away?')).toBe(
      '72-49',
    );
    expect(operationExpression('add them', 'has 12 and gets 7 more')).toBe('12+7');
    expect(operationExpression('Final Answer', 'has 12 and gets 7 more')).toBeUndefined();
    expect(operationExpression('add them', 'has 12 apples')).toBeUndefined();
  });
});

describe('the tag agent', () => {
  it('system_prompt replaces the default system message; the question stays the user message', async () => {
    server.enqueue('completions', sampled('<answer>476</answer>'));
    const spec = AgentSchema.parse({
      type: 'tag',
      tools: ['calculator'],
      system_prompt: 'Be brief.',
    });
    const policy = new OpenAIPolicyEngine({
      model: 'policy',
      baseURLs: server.baseURL,
      tokenizer: byteTokenizer,
      retry: { maxRetries: 0 },
    });
    const agent = agentFactory(spec, { maxTurns: 2, maxTokens: 32, temperature: 1, topP: 1 }, {});
    const t = await agent(policy).run(QUESTION);
    expect(t.finalAnswer).toBe('476');
    // No chat template on this tokenizer: the messages' contents, one blank line apart.
    expect(server.requests[0]!.body.prompt).toEqual(
      bytes(`Be brief.\n\nQuestion: ${QUESTION}\n\n`),
    );
  });
});
