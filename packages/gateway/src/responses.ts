import { z } from 'zod';
import { badRequest } from './errors.js';
import type { ParsedToolCall } from './tool-calls.js';

// OpenAI's Responses API (/v1/responses), as far as an agent over a chat model needs it: the
// request's `input` items become chat messages (then the same path as /v1/chat/completions:
// chat template, sampling, recording), the reply becomes `output` items — a message and/or
// function calls. openai-agents-js uses this API by default. Stateless: `previous_response_id`
// (server-side conversation state) is refused; agents send the whole conversation as input.

const tool = z.looseObject({
  type: z.string(),
  name: z.string().optional(),
  description: z.string().nullish(),
  parameters: z.record(z.string(), z.unknown()).nullish(),
  strict: z.boolean().nullish(),
});

export const ResponsesRequestSchema = z.looseObject({
  model: z.string().min(1),
  input: z.union([z.string(), z.array(z.record(z.string(), z.unknown())).min(1)]),
  instructions: z.string().nullish(),
  tools: z.array(tool).nullish(),
  tool_choice: z
    .union([
      z.enum(['none', 'auto', 'required']),
      z.looseObject({ type: z.literal('function'), name: z.string() }),
    ])
    .nullish(),
  max_output_tokens: z.number().int().positive().nullish(),
  temperature: z.number().min(0).max(2).nullish(),
  top_p: z.number().gt(0).max(1).nullish(),
  stream: z.boolean().nullish(),
  metadata: z.record(z.string(), z.unknown()).nullish(),
  previous_response_id: z
    .string()
    .nullish()
    .refine((v) => !v, {
      message:
        'previous_response_id is not supported: the gateway keeps no conversations; send the whole conversation as input',
    }),
});
export type ResponsesRequest = z.infer<typeof ResponsesRequestSchema>;

function partsText(content: unknown, where: string): string {
  if (content === null || content === undefined) return '';
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) throw badRequest(`${where} must be a string or parts`, where);
  return content
    .map((p, i) => {
      const part = p as { type?: string; text?: unknown };
      if (
        (part.type === 'input_text' || part.type === 'output_text' || part.type === 'text') &&
        typeof part.text === 'string'
      )
        return part.text;
      throw badRequest(
        `${where}.${i}: content of type '${part.type}' is not supported (text only)`,
        `${where}.${i}.type`,
      );
    })
    .join('');
}

/** The request as a chat completion request body (validated again as one by the caller). */
export function responsesToChat(b: ResponsesRequest): Record<string, unknown> {
  const messages: Record<string, unknown>[] = [];
  if (b.instructions) messages.push({ role: 'system', content: b.instructions });
  const items = typeof b.input === 'string' ? [{ role: 'user', content: b.input }] : b.input;
  items.forEach((raw, i) => {
    const item = raw as Record<string, unknown>;
    const where = `input.${i}`;
    const type = item.type ?? (item.role !== undefined ? 'message' : undefined);
    if (type === 'message') {
      const role = item.role === 'developer' ? 'system' : item.role;
      if (role !== 'user' && role !== 'system' && role !== 'assistant')
        throw badRequest(
          `${where}.role must be user, system, developer or assistant`,
          `${where}.role`,
        );
      messages.push({ role, content: partsText(item.content, `${where}.content`) });
      return;
    }
    if (type === 'function_call') {
      const call = {
        id: String(item.call_id ?? ''),
        type: 'function',
        function: { name: String(item.name ?? ''), arguments: String(item.arguments ?? '{}') },
      };
      const last = messages.at(-1);
      // A reply's text and its calls are one assistant turn (the API lists them as items).
      if (last?.role === 'assistant')
        last.tool_calls = [...((last.tool_calls as unknown[]) ?? []), call];
      else messages.push({ role: 'assistant', content: null, tool_calls: [call] });
      return;
    }
    if (type === 'function_call_output') {
      const output = item.output;
      messages.push({
        role: 'tool',
        tool_call_id: String(item.call_id ?? ''),
        content: typeof output === 'string' ? output : partsText(output, `${where}.output`),
      });
      return;
    }
    if (type === 'reasoning') return; // the model's reasoning is part of its message text here
    throw badRequest(
      `${where}: items of type '${String(type)}' are not supported`,
      `${where}.type`,
    );
  });
  const tools = (b.tools ?? []).map((t, i) => {
    if (t.type !== 'function' || !t.name)
      throw badRequest(
        `tools.${i}: only function tools are supported (got '${t.type}')`,
        `tools.${i}.type`,
      );
    return {
      type: 'function',
      function: {
        name: t.name,
        ...(t.description && { description: t.description }),
        ...(t.parameters && { parameters: t.parameters }),
      },
    };
  });
  const choice = b.tool_choice;
  return {
    model: b.model,
    messages,
    ...(tools.length > 0 && { tools }),
    ...(choice != null && {
      tool_choice:
        typeof choice === 'string' ? choice : { type: 'function', function: { name: choice.name } },
    }),
    ...(b.max_output_tokens != null && { max_tokens: b.max_output_tokens }),
    ...(b.temperature != null && { temperature: b.temperature }),
    ...(b.top_p != null && { top_p: b.top_p }),
    ...(b.metadata != null && { metadata: b.metadata }),
  };
}

export interface ResponseParts {
  id: string;
  createdAt: number;
  model: string;
  content: string | null;
  toolCalls: readonly ParsedToolCall[];
  finishReason: string;
  usage: { input: number; output: number };
  request: ResponsesRequest;
}

/** The id of a response's message item. */
export const messageId = (id: string) => `msg_${id.slice(5)}`;
const callItemId = (callId: string) => `fc_${callId.replace(/^call_/, '')}`;

/** The output items: the reply's text as a message (always, when it made no call), then calls. */
export function outputItems(p: ResponseParts): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  if ((p.content !== null && p.content !== '') || p.toolCalls.length === 0)
    out.push({
      type: 'message',
      id: messageId(p.id),
      status: 'completed',
      role: 'assistant',
      content: [{ type: 'output_text', text: p.content ?? '', annotations: [] }],
    });
  for (const tc of p.toolCalls)
    out.push({
      type: 'function_call',
      id: callItemId(tc.id),
      call_id: tc.id,
      name: tc.function.name,
      arguments: tc.function.arguments,
      status: 'completed',
    });
  return out;
}

/** The response object (status, output, usage and the request's settings echoed). */
export function responseObject(
  p: ResponseParts,
  status: 'in_progress' | 'completed' | 'incomplete',
): Record<string, unknown> {
  const r = p.request;
  return {
    id: p.id,
    object: 'response',
    created_at: Math.floor(p.createdAt / 1000),
    status,
    model: p.model,
    output: status === 'in_progress' ? [] : outputItems(p),
    error: null,
    incomplete_details: status === 'incomplete' ? { reason: 'max_output_tokens' } : null,
    instructions: r.instructions ?? null,
    metadata: r.metadata ?? {},
    parallel_tool_calls: true,
    temperature: r.temperature ?? 1,
    top_p: r.top_p ?? 1,
    tool_choice: r.tool_choice ?? 'auto',
    tools: r.tools ?? [],
    max_output_tokens: r.max_output_tokens ?? null,
    text: { format: { type: 'text' } },
    ...(status !== 'in_progress' && {
      usage: {
        input_tokens: p.usage.input,
        input_tokens_details: { cached_tokens: 0 },
        output_tokens: p.usage.output,
        output_tokens_details: { reasoning_tokens: 0 },
        total_tokens: p.usage.input + p.usage.output,
      },
    }),
  };
}
