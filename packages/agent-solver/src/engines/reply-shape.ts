import { LLMMalformedReplyError } from './errors.js';

// What a 200 reply of an OpenAI-compatible server must look like before anyone reads it. The
// `openai` client hands back whatever JSON arrived, typed as if it were a ChatCompletion: a proxy
// that answers `null`, `[]` or `"ok"`, or a server that drops `choices` or sends `content: 42`,
// would otherwise surface as a TypeError deep inside the caller (or, worse, as an empty answer or
// ids silently converted to 0). These checks run inside each attempt, so the retry loop treats a
// malformed reply like a garbled body — retried, then raised as LLMMalformedReplyError.

export interface ReplyContext {
  /** What was asked, for messages ("chat completion (model)"). */
  what: string;
  baseURL?: string | undefined;
}

export type JsonRecord = Record<string, unknown>;

/** 'null', 'an array', 'a string', ... — how a JSON value is named in messages. */
export function describeJson(value: unknown): string {
  if (value === null) return 'null';
  if (value === undefined) return 'missing';
  if (Array.isArray(value)) return 'an array';
  return `${/^[aeiou]/.test(typeof value) ? 'an' : 'a'} ${typeof value}`;
}

export function isRecord(value: unknown): value is JsonRecord {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The error a malformed reply is reported with (retryable: another attempt may get a good one). */
export function malformedReply(
  problem: string,
  body: unknown,
  context: ReplyContext,
): LLMMalformedReplyError {
  return new LLMMalformedReplyError(
    `${context.what} got a malformed reply${context.baseURL ? ` from ${context.baseURL}` : ''}: ${problem}`,
    { status: 200, body, attempts: 1, retryable: true, baseURL: context.baseURL },
    {
      hint:
        'check that the base URL points at an OpenAI-compatible server (…/v1), not a proxy or ' +
        'another API that answers 200 with a different body',
    },
  );
}

/** The reply's first choice: the body must be an object with a non-empty `choices` array. */
export function firstChoice(body: unknown, context: ReplyContext): JsonRecord {
  if (body === undefined || body === '') throw malformedReply('the body is empty', body, context);
  if (!isRecord(body)) {
    throw malformedReply(`the body is ${describeJson(body)}, not a JSON object`, body, context);
  }
  const choices = body.choices;
  if (!Array.isArray(choices)) {
    throw malformedReply(
      `\`choices\` is ${describeJson(choices)}, not an array of choices`,
      body,
      context,
    );
  }
  if (choices.length === 0) throw malformedReply('`choices` is empty', body, context);
  const choice: unknown = choices[0];
  if (!isRecord(choice)) {
    throw malformedReply(`\`choices[0]\` is ${describeJson(choice)}, not an object`, body, context);
  }
  return choice;
}

/** Throws unless `value` is absent (undefined or null) or passes `check`. */
export function expectOptional(
  value: unknown,
  check: (v: unknown) => boolean,
  expected: string,
  field: string,
  body: unknown,
  context: ReplyContext,
): void {
  if (value === undefined || value === null || check(value)) return;
  throw malformedReply(`\`${field}\` is ${describeJson(value)}, not ${expected}`, body, context);
}

export const isString = (v: unknown): v is string => typeof v === 'string';

/** Token ids as ONNX and the trainer hold them: non-negative int32. */
export function isTokenId(v: unknown): v is number {
  return typeof v === 'number' && Number.isInteger(v) && v >= 0 && v < 2 ** 31;
}

export const isTokenIdArray = (v: unknown): v is number[] => Array.isArray(v) && v.every(isTokenId);
