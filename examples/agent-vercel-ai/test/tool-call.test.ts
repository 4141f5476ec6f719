// The agent's tool loop through the gateway, with a scripted policy (the tiny model never writes
// a tool call): the framework receives the parsed tool call, runs its tool, sends the result
// back, and the gateway records both calls as one token-continuous chain (one training row).
import type { PolicyGenerateRequest, PolicyGenerateResult } from '@flowgrpo/agent';
import {
  chainCalls,
  createPolicyGateway,
  EnginePolicyHost,
  rolloutTrajectory,
} from '@flowgrpo/gateway';
import { ByteLevelTokenizer } from '@flowgrpo/models';
import { expect, it } from 'vitest';
import { runAlmanacAgent } from '../src/agent.js';

const tokenizer = new ByteLevelTokenizer();
const replies = [
  '<tool_call>\n{"name": "almanac", "arguments": {"query": "year of Old Mill"}}\n</tool_call>',
  'It was built in 1850.',
];

it('runs the tool the model called and keeps the conversation one chain', async () => {
  const seen: PolicyGenerateRequest[] = [];
  const engine = {
    model: 'scripted',
    async generate(request: PolicyGenerateRequest): Promise<PolicyGenerateResult> {
      const text = replies[Math.min(seen.length, replies.length - 1)]!;
      seen.push(request);
      const ids = [...tokenizer.encode(text), tokenizer.eosTokenId!];
      return {
        text,
        promptTokens: Int32Array.from(request.promptTokens as ArrayLike<number>),
        actionTokens: Int32Array.from(ids),
        actionLogprobs: new Float32Array(ids.length).fill(-0.25),
        finishReason: 'stop',
      };
    },
  };
  const gateway = await createPolicyGateway({
    host: new EnginePolicyHost({ tokenizer, engines: { policy: engine } }),
  });
  try {
    const queries: string[] = [];
    const answer = await runAlmanacAgent({
      baseURL: gateway.rolloutBaseURL('tool-loop'),
      model: 'policy',
      question: 'In which year was Old Mill built?',
      lookup: (q) => {
        queries.push(q);
        return '1850';
      },
    });
    expect(queries).toEqual(['year of Old Mill']);
    expect(answer).toBe('It was built in 1850.');
    const rollout = gateway.recorder.get('tool-loop')!;
    expect(rollout.calls).toHaveLength(2);
    expect(rollout.calls[0]!.finishReason).toBe('tool_calls');
    // The second prompt is the first prompt + the sampled call + the tool result, token for token.
    expect(chainCalls(rollout.calls)).toHaveLength(1);
    const t = rolloutTrajectory(rollout, { queryId: 'q', groupId: 'g' });
    expect(t.segments!.map((s) => s.kind)).toEqual(['prompt', 'action', 'observation', 'action']);
    expect(tokenizer.decode(t.segments![2]!.tokens)).toContain(
      '<tool_response>\n1850\n</tool_response>',
    );
  } finally {
    await gateway.close();
  }
});
