import {
  expectOptional,
  firstChoice,
  isRecord,
  isString,
  isTokenIdArray,
  type JsonRecord,
  type ReplyContext,
} from '../engines/reply-shape.js';

// The replies of vLLM's (and SGLang's) /v1/completions and /v1/chat/completions as the policy
// engine reads them, and the shape checks that make them safe to read. A check failure is a
// malformed reply (retried, then LLMMalformedReplyError): a field of the wrong type — logprobs that
// are not a list, ids that are not non-negative integers — would otherwise throw a TypeError or be
// silently turned into token 0 by Int32Array.from. What is well formed but missing (no logprobs at
// all, no way to know the ids) stays the engine's PolicyResponseError: retrying will not add it.

interface WireUsage {
  prompt_tokens?: number;
  completion_tokens?: number;
  total_tokens?: number;
}

export interface WireCompletion {
  model?: string;
  usage?: WireUsage | null;
  choices: Array<{
    text?: string | null;
    finish_reason?: string | null;
    logprobs?: { tokens?: string[] | null; token_logprobs?: Array<number | null> | null } | null;
    token_ids?: number[] | null;
    prompt_token_ids?: number[] | null;
  }>;
  prompt_token_ids?: number[] | null;
}

export interface WireChat {
  model?: string;
  usage?: WireUsage | null;
  prompt_token_ids?: number[] | null;
  choices: Array<{
    message?: { content?: string | null; refusal?: string | null } | null;
    finish_reason?: string | null;
    logprobs?: { content?: Array<{ token: string; logprob: number | null }> | null } | null;
    token_ids?: number[] | null;
    prompt_token_ids?: number[] | null;
  }>;
}

const isLogprob = (v: unknown) => v === null || typeof v === 'number';
const ids = 'an array of token ids (non-negative integers)';

/** Checks what the engine reads of a /v1/completions reply. */
export function checkCompletion(body: unknown, context: ReplyContext): WireCompletion {
  const choice = firstChoice(body, context);
  const expect = (value: unknown, check: (v: unknown) => boolean, what: string, field: string) =>
    expectOptional(value, check, what, field, body, context);
  expect(choice.text, isString, 'a string', 'choices[0].text');
  expect(choice.logprobs, isRecord, 'an object', 'choices[0].logprobs');
  const lp = (choice.logprobs ?? {}) as JsonRecord;
  expect(
    lp.tokens,
    (v) => Array.isArray(v) && v.every(isString),
    'an array of strings',
    'choices[0].logprobs.tokens',
  );
  expect(
    lp.token_logprobs,
    (v) => Array.isArray(v) && v.every(isLogprob),
    'an array of numbers',
    'choices[0].logprobs.token_logprobs',
  );
  checkIds(body, choice, context);
  return body as WireCompletion;
}

/** Checks what the engine reads of a /v1/chat/completions reply. */
export function checkChat(body: unknown, context: ReplyContext): WireChat {
  const choice = firstChoice(body, context);
  const expect = (value: unknown, check: (v: unknown) => boolean, what: string, field: string) =>
    expectOptional(value, check, what, field, body, context);
  expect(choice.message, isRecord, 'an object', 'choices[0].message');
  const message = (choice.message ?? {}) as JsonRecord;
  expect(message.content, isString, 'a string', 'choices[0].message.content');
  expect(choice.logprobs, isRecord, 'an object', 'choices[0].logprobs');
  const lp = (choice.logprobs ?? {}) as JsonRecord;
  expect(
    lp.content,
    (v) =>
      Array.isArray(v) && v.every((c) => isRecord(c) && isString(c.token) && isLogprob(c.logprob)),
    'an array of {token: string, logprob: number}',
    'choices[0].logprobs.content',
  );
  checkIds(body, choice, context);
  return body as WireChat;
}

function checkIds(body: unknown, choice: JsonRecord, context: ReplyContext): void {
  const top = body as JsonRecord;
  for (const [value, field] of [
    [choice.token_ids, 'choices[0].token_ids'],
    [choice.prompt_token_ids, 'choices[0].prompt_token_ids'],
    [top.prompt_token_ids, 'prompt_token_ids'],
  ] as const) {
    expectOptional(value, isTokenIdArray, ids, field, body, context);
  }
}
