import type { RolloutRecorder } from './recorder.js';
import type { WireMessage } from './wire.js';

/** Whether two JSON texts hold the same value (key order aside). */
function sameJson(a: string, b: string): boolean {
  const canon = (v: unknown): unknown =>
    Array.isArray(v)
      ? v.map(canon)
      : v !== null && typeof v === 'object'
        ? Object.fromEntries(
            Object.keys(v)
              .sort()
              .map((k) => [k, canon((v as Record<string, unknown>)[k])]),
          )
        : v;
  try {
    return JSON.stringify(canon(JSON.parse(a))) === JSON.stringify(canon(JSON.parse(b)));
  } catch {
    return false;
  }
}

/**
 * Tool calls this rollout was served come back in later requests' history; SDKs may re-serialise
 * their arguments (the Vercel AI SDK sends JSON.stringify of the parsed input). When a call's id
 * is one the gateway issued and its arguments are the same JSON, the model's own text is put
 * back, so the prompt shows the tokens the model sampled and continuity holds.
 */
export function restoreToolArguments(
  recorder: RolloutRecorder,
  messages: WireMessage[],
  rolloutId: string,
): WireMessage[] {
  const issued = new Map<string, string>();
  for (const c of recorder.get(rolloutId)?.calls ?? [])
    for (const tc of c.toolCalls ?? []) issued.set(tc.id, tc.function.arguments);
  if (issued.size === 0) return messages;
  return messages.map((m) => {
    if (m.role !== 'assistant' || !m.tool_calls?.length) return m;
    return {
      ...m,
      tool_calls: m.tool_calls.map((tc) => {
        const raw = tc.id === undefined ? undefined : issued.get(tc.id);
        return raw !== undefined &&
          raw !== tc.function.arguments &&
          sameJson(raw, tc.function.arguments)
          ? { ...tc, function: { ...tc.function, arguments: raw } }
          : tc;
      }),
    };
  });
}
