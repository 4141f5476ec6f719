// An agent written with the Vercel AI SDK, as anyone writes one for an OpenAI-compatible server:
// streamText with a tool and a step limit, over @ai-sdk/openai-compatible. Nothing here knows
// about flowgrpo — the trainer only changes `baseURL` (to the gateway's per-rollout URL).
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { stepCountIs, streamText, tool } from 'ai';
import { z } from 'zod';

export interface AlmanacAgentOptions {
  baseURL: string;
  apiKey?: string;
  model: string;
  question: string;
  /** The almanac lookup the tool calls ("year of X", "town of X", "event in Y"). */
  lookup: (query: string) => string | undefined;
  maxTokens?: number;
  maxSteps?: number;
  /** Hears the text as it streams, piece by piece (the gateway sends tokens as sampled). */
  onText?: (delta: string) => void;
}

export async function runAlmanacAgent(o: AlmanacAgentOptions): Promise<string> {
  const provider = createOpenAICompatible({
    name: 'local',
    baseURL: o.baseURL,
    apiKey: o.apiKey ?? 'EMPTY',
    includeUsage: true,
  });
  let failure: unknown;
  const result = streamText({
    model: provider.chatModel(o.model),
    system: 'Answer the question. Use the almanac tool for facts. Reply with the answer only.',
    prompt: o.question,
    tools: {
      almanac: tool({
        description:
          'Looks up a fact in the almanac: "year of <landmark>", "town of <landmark>" or "event in <year>".',
        inputSchema: z.object({ query: z.string() }),
        execute: async ({ query }) => o.lookup(query) ?? `no almanac entry for "${query}"`,
      }),
    },
    stopWhen: stepCountIs(o.maxSteps ?? 3),
    maxOutputTokens: o.maxTokens ?? 24,
    maxRetries: 0,
    // textStream leaves errors out (a failed request just ends it): keep the first, throw it below,
    // so that a call that failed is a failed rollout, not an empty answer scored as one.
    onError: ({ error }) => {
      failure ??= error;
    },
  });
  // Streamed token by token (SSE: the gateway sends each token's text as it is sampled); the
  // answer is the last step's text.
  let text = '';
  for await (const delta of result.textStream) {
    o.onText?.(delta);
    text += delta;
  }
  if (failure !== undefined) throw failure;
  return (await result.text) || text;
}
