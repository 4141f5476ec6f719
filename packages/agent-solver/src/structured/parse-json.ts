import { jsonrepair } from 'jsonrepair';

// Turning a model's reply into a JSON value. Models wrap JSON in ``` fences, put prose around
// it, leave trailing commas or single quotes, or get cut off by max_tokens. We try, in order:
// the text as is; the fenced block; each balanced {...} / [...] found in the text (from its first
// opening bracket; an unclosed one runs to the end, as after truncation) — each candidate parsed
// as is and then through jsonrepair; finally jsonrepair over the whole text.

export type ParseJsonResult =
  | { ok: true; value: unknown /** The JSON text that parsed. */; json: string; repaired: boolean }
  | { ok: false; error: string };

const MAX_CANDIDATES = 16;

export function parseModelJson(text: string): ParseJsonResult {
  const trimmed = text.trim();
  if (trimmed === '') return { ok: false, error: 'the reply is empty' };
  const direct = tryParse(trimmed);
  if (direct.ok) return { ok: true, value: direct.value, json: trimmed, repaired: false };

  const candidates: string[] = [];
  const fenced = /```[a-zA-Z0-9_-]*[ \t]*\r?\n?([\s\S]*?)(?:```|$)/.exec(trimmed);
  if (fenced?.[1]?.trim()) candidates.push(fenced[1].trim());
  for (const slice of bracketSlices(trimmed, MAX_CANDIDATES)) candidates.push(slice);

  for (const candidate of candidates) {
    const parsed = tryParse(candidate);
    if (parsed.ok && isContainer(parsed.value)) {
      return { ok: true, value: parsed.value, json: candidate, repaired: false };
    }
  }
  for (const candidate of [...candidates, trimmed]) {
    const repaired = tryRepair(candidate);
    if (repaired && isContainer(repaired.value)) {
      return { ok: true, value: repaired.value, json: repaired.json, repaired: true };
    }
  }
  return { ok: false, error: `no JSON object could be read from the reply: ${direct.error}` };
}

function tryParse(text: string): { ok: true; value: unknown } | { ok: false; error: string } {
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch (error) {
    return { ok: false, error: error instanceof Error ? error.message : String(error) };
  }
}

function tryRepair(text: string): { value: unknown; json: string } | undefined {
  try {
    const json = jsonrepair(text);
    return { value: JSON.parse(json), json };
  } catch {
    return undefined;
  }
}

function isContainer(value: unknown): boolean {
  return typeof value === 'object' && value !== null;
}

/**
 * Slices of `text` that start at an opening bracket and end at its matching closer (string
 * literals and escapes respected), or at the end of the text when it never closes.
 */
export function bracketSlices(text: string, limit: number): string[] {
  const out: string[] = [];
  let from = 0;
  while (out.length < limit) {
    const start = findOpener(text, from);
    if (start < 0) break;
    const end = matchingClose(text, start);
    out.push(text.slice(start, end === -1 ? text.length : end + 1));
    // An unclosed bracket swallows the rest of the text: nothing after it is a new candidate
    // that this slice does not already contain.
    if (end === -1) break;
    from = start + 1;
  }
  return out;
}

function findOpener(text: string, from: number): number {
  for (let i = from; i < text.length; i++) {
    const c = text[i];
    if (c === '{' || c === '[') return i;
  }
  return -1;
}

function matchingClose(text: string, start: number): number {
  const stack: string[] = [];
  let inString = false;
  for (let i = start; i < text.length; i++) {
    const c = text[i]!;
    if (inString) {
      if (c === '\\') i++;
      else if (c === '"') inString = false;
      continue;
    }
    if (c === '"') inString = true;
    else if (c === '{') stack.push('}');
    else if (c === '[') stack.push(']');
    else if (c === '}' || c === ']') {
      if (stack.pop() !== c) return -1;
      if (stack.length === 0) return i;
    }
  }
  return -1;
}
