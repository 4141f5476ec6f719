import { createHash } from 'node:crypto';

// The model's tool calls in the Qwen / Hermes format, parsed back into OpenAI `tool_calls`:
//
//   optional text\n<tool_call>\n{"name": "lookup", "arguments": {"query": "x"}}\n</tool_call>
//
// `arguments` is returned as the exact text the model wrote (when it is valid JSON), not a
// re-serialisation: the agent sends it back in the next request, the template writes it into
// the prompt again, and only the model's own bytes give the same tokens — token continuity.
// A block that is not valid JSON, or has no name, stays in the content (the agent sees what the
// model wrote; the reward decides).

export const TOOL_CALL_OPEN = '<tool_call>';
export const TOOL_CALL_CLOSE = '</tool_call>';

export interface ParsedToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

export interface ParsedAssistant {
  /** Text outside the tool-call blocks (null when there is none and there are calls). */
  content: string | null;
  toolCalls: ParsedToolCall[];
}

const BLOCK = /<tool_call>\s*([\s\S]*?)\s*(?:<\/tool_call>|$)/g;
const RAW = /^\{\s*"name"\s*:\s*"((?:[^"\\]|\\.)*)"\s*,\s*"arguments"\s*:\s*([\s\S]*)\}$/;

/** A call id stable for the same rollout, call and position (OpenAI's look: call_…). */
export function toolCallId(seed: string, index: number): string {
  return `call_${createHash('sha256').update(`${seed}:${index}`).digest('hex').slice(0, 24)}`;
}

function parseBlock(json: string): { name: string; arguments: string } | undefined {
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch {
    return undefined;
  }
  if (typeof value !== 'object' || value === null) return undefined;
  const v = value as { name?: unknown; arguments?: unknown; parameters?: unknown };
  if (typeof v.name !== 'string' || v.name === '') return undefined;
  const args = v.arguments ?? v.parameters ?? {};
  const raw = RAW.exec(json);
  if (raw) {
    const text = raw[2]!.trim();
    try {
      JSON.parse(text);
      return { name: v.name, arguments: text };
    } catch {
      // fall through to the re-serialised form
    }
  }
  return { name: v.name, arguments: typeof args === 'string' ? args : JSON.stringify(args) };
}

/** Splits an assistant reply into content and tool calls (none when `parse` is false). */
export function parseAssistantText(text: string, idSeed: string, parse = true): ParsedAssistant {
  if (!parse || !text.includes(TOOL_CALL_OPEN)) return { content: text, toolCalls: [] };
  const toolCalls: ParsedToolCall[] = [];
  let first = -1;
  for (const m of text.matchAll(BLOCK)) {
    const call = parseBlock(m[1]!);
    if (!call) return { content: text, toolCalls: [] };
    if (first < 0) first = m.index;
    toolCalls.push({ id: toolCallId(idSeed, toolCalls.length), type: 'function', function: call });
  }
  if (toolCalls.length === 0) return { content: text, toolCalls: [] };
  // Qwen's template writes content + "\n" before the first call: that newline is the format's.
  const before = text.slice(0, first).replace(/\n$/, '');
  return { content: before === '' ? null : before, toolCalls };
}
