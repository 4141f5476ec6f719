import type { SampleRow } from '../../sample-row.js';
import { parseGsm8kAnswer } from './gsm8k.js';
import {
  copyPresent,
  makeRow,
  type NormalizeOptions,
  normalizeAll,
  openRow,
  type RowContext,
  requireText,
  rowError,
} from './row-fields.js';

// The rows a user writes by hand or exports from another trainer: `{question, answer}`, TRL's
// prompt-completion (`prompt` as text or as messages, `completion` or `answer`) and TRL's
// conversational `messages` (the last user turn asks, the last assistant turn answers). The
// reference answer is `answer` when the row has one; a GSM8K-style answer ends in `#### N`, and
// then the reference is N and the reasoning before it becomes the chain.

/** Which plain layout a row is in, or undefined when it is none of them. */
export type PlainRowShape = 'question' | 'prompt' | 'messages';

/** The plain layout of a record: `question`, TRL's `prompt`, or TRL's `messages`. */
export function plainRowShape(raw: unknown): PlainRowShape | undefined {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return undefined;
  const row = raw as Record<string, unknown>;
  if (typeof row.question === 'string') return 'question';
  if (typeof row.prompt === 'string' || Array.isArray(row.prompt)) return 'prompt';
  if (Array.isArray(row.messages)) return 'messages';
  return undefined;
}

interface Turn {
  role: string;
  content: string;
}

function turns(value: unknown, field: string, ctx: RowContext): Turn[] {
  if (!Array.isArray(value)) throw rowError(ctx, `${field} must be a list of {role, content}`);
  return value.map((m, i) => {
    const msg = m as { role?: unknown; content?: unknown } | null;
    if (typeof msg?.role !== 'string' || typeof msg.content !== 'string')
      throw rowError(ctx, `${field}[${i}] is not {role, content} with text content`);
    return { role: msg.role, content: msg.content };
  });
}

function lastOf(list: readonly Turn[], role: string): string | undefined {
  return list.findLast((t) => t.role === role)?.content;
}

/** The question and the text that holds the reference answer, by layout. */
function questionAndReference(
  row: Record<string, unknown>,
  shape: PlainRowShape,
  ctx: RowContext,
): { question: string; reference: string | undefined } {
  const answer = row.answer != null ? requireText(row, ['answer'], ctx) : undefined;
  if (shape === 'question') return { question: row.question as string, reference: answer };
  if (shape === 'prompt') {
    const question =
      typeof row.prompt === 'string'
        ? row.prompt
        : lastOf(turns(row.prompt, 'prompt', ctx), 'user');
    if (question === undefined) throw rowError(ctx, 'prompt has no user message');
    const completion =
      typeof row.completion === 'string'
        ? row.completion
        : row.completion != null
          ? lastOf(turns(row.completion, 'completion', ctx), 'assistant')
          : undefined;
    return { question, reference: answer ?? completion };
  }
  const conversation = turns(row.messages, 'messages', ctx);
  const lastAssistant = conversation.findLastIndex((t) => t.role === 'assistant');
  const question = lastOf(
    lastAssistant < 0 ? conversation : conversation.slice(0, lastAssistant),
    'user',
  );
  if (question === undefined) throw rowError(ctx, 'messages has no user message');
  return { question, reference: answer ?? conversation[lastAssistant]?.content };
}

/**
 * One plain row as a SampleRow (source 'plain'): `{question, answer}`, TRL's `prompt` (+
 * `completion` or `answer`), or TRL's `messages`. The reference answer is `answer`, else the
 * completion / the last assistant message; `#### N` at its end makes N the reference (GSM8K).
 */
export function normalizePlainRow(
  raw: unknown,
  idx: number,
  options: NormalizeOptions = {},
): SampleRow {
  const { ctx, row } = openRow('plain', raw, idx, options);
  const shape = plainRowShape(row);
  if (shape === undefined) {
    const present = Object.keys(row).join(', ') || 'none';
    throw rowError(ctx, `no 'question', 'prompt' or 'messages' (fields present: ${present})`);
  }
  const { question, reference } = questionAndReference(row, shape, ctx);
  if (reference === undefined || reference.trim() === '')
    throw rowError(
      ctx,
      shape === 'question'
        ? "no reference answer: a {question, answer} row needs 'answer'"
        : `no reference answer: a '${shape}' row needs 'answer'` +
            (shape === 'prompt' ? " or 'completion'" : ' or an assistant message'),
    );
  const gsm8k = parseGsm8kAnswer(reference);
  const extra: Record<string, unknown> = {};
  copyPresent(row, extra, { id: 'original_id' });
  if (gsm8k) extra.answer_raw = reference;
  return makeRow({
    idx,
    question: question.trim(),
    chain: gsm8k?.chain ?? '',
    result: gsm8k?.result ?? reference.trim(),
    source: options.source ?? 'plain',
    extra,
  });
}

export function normalizePlain(
  rows: Iterable<unknown>,
  options: NormalizeOptions = {},
): SampleRow[] {
  return normalizeAll(rows, options, normalizePlainRow);
}
