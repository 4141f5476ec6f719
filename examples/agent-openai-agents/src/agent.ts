// An agent written with openai-agents-js, as anyone writes one: an Agent with instructions and a
// tool, run by the Runner over an OpenAI client — the SDK's default Responses API, or Chat
// Completions — streamed, as a chat UI runs it. Nothing here knows about flowgrpo — the trainer only changes `baseURL` (to the
// gateway's per-rollout URL).
import {
  Agent,
  MaxTurnsExceededError,
  OpenAIChatCompletionsModel,
  OpenAIProvider,
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
  /**
   * The OpenAI API the SDK talks: 'responses' (the SDK's default, /v1/responses) or
   * 'chat_completions' (OpenAIChatCompletionsModel, what most OpenAI-compatible servers offer).
   */
  api?: 'responses' | 'chat_completions';
  /** Hears the answer's text as it streams, piece by piece (the gateway sends tokens as sampled). */
  onText?: (delta: string) => void;
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
    model: o.api === 'chat_completions' ? new OpenAIChatCompletionsModel(client, o.model) : o.model,
    modelSettings: { maxTokens: o.maxTokens ?? 24 },
    tools: [almanac],
  });
  try {
    const runner = new Runner({
      tracingDisabled: true,
      modelProvider: new OpenAIProvider({ openAIClient: client, useResponses: true }),
    });
    // Streamed: each model call is an SSE stream, its text arriving as the model samples it.
    const result = await runner.run(agent, o.question, { maxTurns: o.maxTurns ?? 3, stream: true });
    for await (const delta of result.toTextStream()) o.onText?.(delta);
    await result.completed;
    if (result.error) throw result.error;
    return String(result.finalOutput ?? '');
  } catch (e) {
    // A model that keeps calling tools past maxTurns has no answer (reward 0), not a crash.
    if (e instanceof MaxTurnsExceededError) return '';
    throw e;
  }
}
