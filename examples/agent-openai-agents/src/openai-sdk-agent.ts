// The same agent written with the plain `openai` SDK: a chat-completions tool loop. Like the
// openai-agents-js one, it only knows a base URL.
import OpenAI from 'openai';
import type { AlmanacAgentOptions } from './agent.js';

const TOOLS: OpenAI.Chat.ChatCompletionTool[] = [
  {
    type: 'function',
    function: {
      name: 'almanac',
      description:
        'Looks up a fact in the almanac: "year of <landmark>", "town of <landmark>" or "event in <year>".',
      parameters: {
        type: 'object',
        properties: { query: { type: 'string' } },
        required: ['query'],
      },
    },
  },
];

export async function runOpenAISdkAgent(o: AlmanacAgentOptions): Promise<string> {
  const client = new OpenAI({ baseURL: o.baseURL, apiKey: o.apiKey ?? 'EMPTY', maxRetries: 0 });
  const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [
    { role: 'system', content: 'Answer the question. Use the almanac tool for facts.' },
    { role: 'user', content: o.question },
  ];
  for (let turn = 0; turn < (o.maxTurns ?? 3); turn++) {
    const r = await client.chat.completions.create({
      model: o.model,
      messages,
      tools: TOOLS,
      max_tokens: o.maxTokens ?? 24,
    });
    const msg = r.choices[0]!.message;
    messages.push(msg);
    if (!msg.tool_calls?.length) return msg.content ?? '';
    for (const call of msg.tool_calls) {
      if (call.type !== 'function') continue;
      let query = '';
      try {
        query = String(JSON.parse(call.function.arguments).query ?? '');
      } catch {
        // unparseable arguments: the tool says so, the model may retry
      }
      messages.push({
        role: 'tool',
        tool_call_id: call.id,
        content: o.lookup(query) ?? `no almanac entry for "${query}"`,
      });
    }
  }
  return '';
}
