// An agent written with openai-agents-js, as anyone writes one for an OpenAI-compatible server:
// an Agent with instructions and a tool, run by the Runner. Nothing here knows about flowgrpo —
// the trainer only changes `baseURL` (to the gateway's per-rollout URL).
import {
  Agent,
  MaxTurnsExceededError,
  OpenAIChatCompletionsModel,
  Runner,
  setTracingDisabled,
  tool,
} from '@openai/agents';
import OpenAI from 'openai';
import { z } from 'zod';

// Traces would be exported to OpenAI's servers; this agent talks to a local model only.
setTracingDisabled(true);

export interface AlmanacAgentOptions {
  baseURL: string;
  apiKey?: string;
  model: string;
  question: string;
  /** The almanac lookup the tool calls ("year of X", "town of X", "event in Y"). */
  lookup: (query: string) => string | undefined;
  maxTokens?: number;
  maxTurns?: number;
}

export async function runAlmanacAgent(o: AlmanacAgentOptions): Promise<string> {
  const client = new OpenAI({ baseURL: o.baseURL, apiKey: o.apiKey ?? 'EMPTY', maxRetries: 0 });
  const almanac = tool({
    name: 'almanac',
    description:
      'Looks up a fact in the almanac: "year of <landmark>", "town of <landmark>" or "event in <year>".',
    parameters: z.object({ query: z.string() }),
    execute: async ({ query }) => o.lookup(query) ?? `no almanac entry for "${query}"`,
  });
  const agent = new Agent({
    name: 'almanac-agent',
    instructions:
      'Answer the question. Use the almanac tool for facts. Reply with the answer only.',
    model: new OpenAIChatCompletionsModel(client, o.model),
    modelSettings: { maxTokens: o.maxTokens ?? 24 },
    tools: [almanac],
  });
  try {
    const result = await new Runner({ tracingDisabled: true }).run(agent, o.question, {
      maxTurns: o.maxTurns ?? 3,
    });
    return String(result.finalOutput ?? '');
  } catch (e) {
    // A model that keeps calling tools past maxTurns has no answer (reward 0), not a crash.
    if (e instanceof MaxTurnsExceededError) return '';
    throw e;
  }
}
