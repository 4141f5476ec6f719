// The tag protocol of the single-policy agent: Search-R1 / AReaL's `<search>` + `<information>`
// and ARTIST's `<tool_call>` + `<tool_response>`, with `<think>` for reasoning and `<answer>` to
// finish. Generation stops right after a closing action tag so the observation can be spliced in.

export const ACTION_CLOSERS = ['</search>', '</tool_call>', '</answer>'] as const;

export type TagAction =
  | { kind: 'answer'; answer: string; end: number }
  | { kind: 'search'; query: string; end: number }
  | { kind: 'tool_call'; raw: string; end: number };

const PATTERNS: Array<{ kind: TagAction['kind']; re: RegExp }> = [
  { kind: 'answer', re: /<answer>([\s\S]*?)<\/answer>/ },
  { kind: 'search', re: /<search>([\s\S]*?)<\/search>/ },
  { kind: 'tool_call', re: /<tool_call>([\s\S]*?)<\/tool_call>/ },
];

/** The first complete action block of a completion (by where it closes), if any. */
export function parseTagAction(text: string): TagAction | undefined {
  let best: TagAction | undefined;
  for (const { kind, re } of PATTERNS) {
    const m = re.exec(text);
    if (!m) continue;
    const end = m.index + m[0].length;
    if (best && best.end <= end) continue;
    const body = m[1]!.trim();
    best =
      kind === 'answer'
        ? { kind, answer: body, end }
        : kind === 'search'
          ? { kind, query: body, end }
          : { kind, raw: body, end };
  }
  return best;
}

/**
 * The closing tag a server cut off: OpenAI-compatible servers drop the matched stop string from
 * the text (vLLM unless `include_stop_str_in_output`), so a completion that stopped on
 * `</search>` ends with an open `<search>` block.
 */
export function missingCloser(text: string): string | undefined {
  let best: { closer: string; at: number } | undefined;
  for (const tag of ['search', 'tool_call', 'answer']) {
    const open = text.lastIndexOf(`<${tag}>`);
    if (open < 0) continue;
    if (text.indexOf(`</${tag}>`, open) >= 0) continue;
    if (!best || open > best.at) best = { closer: `</${tag}>`, at: open };
  }
  return best?.closer;
}

/** A `<tool_call>` body: `{"name": ..., "arguments": {...}}` (ARTIST / Hermes style). */
export function parseToolCall(
  raw: string,
): { ok: true; name: string; arguments: unknown } | { ok: false; error: string } {
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch (error) {
    return { ok: false, error: `the tool call is not JSON: ${(error as Error).message}` };
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return { ok: false, error: 'the tool call must be a JSON object {"name", "arguments"}' };
  }
  const v = value as Record<string, unknown>;
  if (typeof v.name !== 'string' || v.name === '') {
    return { ok: false, error: 'the tool call has no "name"' };
  }
  return { ok: true, name: v.name, arguments: v.arguments ?? v.parameters ?? {} };
}
