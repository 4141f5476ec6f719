import {
  addUsage,
  type ChatMessage,
  emptyUsage,
  type GenerateObjectResult,
  type GenerateTextResult,
} from '@flowgrpo/core';
import { z } from 'zod';
import {
  dropNullOptionals,
  type JsonSchema,
  toStrictJsonSchema,
  zodToJsonSchema,
} from './json-schema.js';
import { parseModelJson } from './parse-json.js';
import { StructuredOutputError } from './structured-output-error.js';

// generateObject for any engine that can generate text: build the request for the chosen
// structured-output mode, parse the reply leniently, validate it with zod, and on failure make
// one corrective call that shows the model its reply and what was wrong with it.

/**
 * How the schema reaches the server:
 * - `json_schema`: `response_format: {type: 'json_schema', json_schema: {name, strict: true, schema}}`
 *   (OpenAI, vLLM, SGLang, llama.cpp server, Ollama ≥ 0.5 via its OpenAI endpoint).
 * - `json_object`: `response_format: {type: 'json_object'}` (JSON mode) + the schema in the system prompt.
 * - `prompt`: no response_format; the schema goes into the system prompt only (any server).
 */
export type StructuredOutputMode = 'json_schema' | 'json_object' | 'prompt';

export type ResponseFormat =
  | { type: 'json_schema'; json_schema: { name: string; strict: true; schema: JsonSchema } }
  | { type: 'json_object' };

export interface StructuredOutputOptions {
  mode: StructuredOutputMode;
  schemaName?: string;
  /** Corrective calls after an invalid reply (default 1). */
  maxCorrections?: number;
}

/** One text generation with an optional response_format; provided by the engine. */
export type StructuredTextCall = (
  messages: ChatMessage[],
  responseFormat: ResponseFormat | undefined,
) => Promise<GenerateTextResult>;

export async function generateStructured<T>(
  call: StructuredTextCall,
  messages: ChatMessage[],
  schema: z.ZodType<T>,
  options: StructuredOutputOptions,
): Promise<GenerateObjectResult<T>> {
  const jsonSchema = zodToJsonSchema(schema);
  const name = schemaNameFor(options.schemaName);
  const responseFormat: ResponseFormat | undefined =
    options.mode === 'json_schema'
      ? {
          type: 'json_schema',
          json_schema: { name, strict: true, schema: toStrictJsonSchema(schema) },
        }
      : options.mode === 'json_object'
        ? { type: 'json_object' }
        : undefined;
  let conversation =
    options.mode === 'json_schema' ? [...messages] : withSchemaInstruction(messages, jsonSchema);
  const usage = emptyUsage();
  const maxCalls = 1 + (options.maxCorrections ?? 1);
  let last: { raw: string; issues?: z.core.$ZodIssue[]; parseError?: string } | undefined;
  for (let n = 1; n <= maxCalls; n++) {
    const result = await call(conversation, responseFormat);
    addUsage(usage, result.usage);
    const outcome = parseStructured(result.text, schema, jsonSchema);
    if (outcome.ok) {
      return {
        object: outcome.value,
        rawText: outcome.json,
        usage,
        finishReason: result.finishReason,
        model: result.model,
      };
    }
    last = { raw: result.text, issues: outcome.issues, parseError: outcome.parseError };
    conversation = [
      ...conversation,
      { role: 'assistant', content: result.text },
      {
        role: 'user',
        content: correctionMessage(outcome, jsonSchema, result.finishReason === 'length'),
      },
    ];
  }
  const l = last!;
  throw new StructuredOutputError(
    `the model's reply did not match the schema after ${maxCalls} call(s): ${
      l.parseError ?? z.prettifyError(new z.ZodError(l.issues ?? []))
    }`,
    { rawText: l.raw, issues: l.issues, parseError: l.parseError, attempts: maxCalls },
  );
}

export type ParseStructuredResult<T> =
  | { ok: true; value: T; json: string }
  | { ok: false; parseError?: string; issues?: z.core.$ZodIssue[] };

/**
 * Lenient JSON reading + zod validation of one reply. The JSON Schema (for undoing strict mode's
 * nulls) is derived only when the reply does not validate as it is: deriving it costs more than
 * the parse, and a trainable planner's every turn is parsed here.
 */
export function parseStructured<T>(
  text: string,
  schema: z.ZodType<T>,
  jsonSchema?: JsonSchema,
): ParseStructuredResult<T> {
  const parsed = parseModelJson(text);
  if (!parsed.ok) return { ok: false, parseError: parsed.error };
  const direct = schema.safeParse(parsed.value);
  if (direct.success) return { ok: true, value: direct.data, json: parsed.json };
  const cleaned = schema.safeParse(
    dropNullOptionals(parsed.value, jsonSchema ?? zodToJsonSchema(schema)),
  );
  if (cleaned.success) return { ok: true, value: cleaned.data, json: parsed.json };
  return { ok: false, issues: direct.error.issues };
}

/** json_schema.name must match ^[a-zA-Z0-9_-]{1,64}$. */
export function schemaNameFor(name: string | undefined): string {
  const clean = (name ?? 'response').replace(/[^a-zA-Z0-9_-]+/g, '_').slice(0, 64);
  return clean === '' ? 'response' : clean;
}

/** The system-prompt fallback: the schema as text, merged into (or prepended as) the system message. */
export function withSchemaInstruction(
  messages: ChatMessage[],
  jsonSchema: JsonSchema,
): ChatMessage[] {
  const instruction = schemaInstruction(jsonSchema);
  const i = messages.findIndex((m) => m.role === 'system');
  if (i < 0) return [{ role: 'system', content: instruction }, ...messages];
  return messages.map((m, j) =>
    j === i ? { ...m, content: `${m.content}\n\n${instruction}` } : m,
  );
}

export function schemaInstruction(jsonSchema: JsonSchema): string {
  return [
    'Answer with one JSON object only: no prose before or after it, no Markdown fences.',
    'It must validate against this JSON Schema:',
    JSON.stringify(jsonSchema),
  ].join('\n');
}

function correctionMessage(
  outcome: { parseError?: string; issues?: z.core.$ZodIssue[] },
  jsonSchema: JsonSchema,
  truncated: boolean,
): string {
  const problem = outcome.parseError
    ? `It could not be read as JSON (${outcome.parseError}).`
    : `It did not validate:\n${z.prettifyError(new z.ZodError(outcome.issues ?? []))}`;
  return [
    `Your previous reply is above. ${problem}`,
    truncated ? 'It was cut off by the token limit; be more concise.' : '',
    'Reply again with only a corrected JSON object that validates against this JSON Schema:',
    JSON.stringify(jsonSchema),
  ]
    .filter(Boolean)
    .join('\n');
}
