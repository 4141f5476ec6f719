import { FlowGrpoError } from '@flowgrpo/core';
import type { z } from 'zod';
import type { Workspace } from './workspace.js';

export type JsonValue =
  | string
  | number
  | boolean
  | null
  | JsonValue[]
  | { [key: string]: JsonValue };

/**
 * What a tool call produced. Failures are results too (`ok: false` with `error`), so an agent can
 * show them to the model instead of crashing the rollout.
 */
export interface ToolResult {
  ok: boolean;
  /** Text for the model, or a JSON value (the seeds' tools return `str` or `dict`). */
  output: string | JsonValue;
  /** Human-readable failure message, present when `ok` is false. */
  error?: string;
  /** Stable code of the failure (an error class's `code`), present when `ok` is false. */
  errorCode?: string;
  /** True when some of the output was cut to respect a size limit. */
  truncated?: boolean;
  durationMs: number;
}

export interface ToolContext {
  /** Aborts the call; tools pass it to their subprocesses and HTTP requests. */
  signal?: AbortSignal;
  /** Time the tool may take; the registry also enforces it from outside. */
  timeoutMs?: number;
  /** The trajectory's scratch directory (the python tool runs there). */
  workspace?: Workspace;
}

export interface ToolExample {
  /** An input that passes the tool's schema. */
  input: Record<string, JsonValue>;
  description: string;
}

/** What the planner is told about a tool besides its name and description (the seeds' metadata). */
export interface ToolMetadata {
  version: string;
  /** Input field → type and meaning, e.g. `{ query: 'str - the question to look up' }`. */
  inputTypes: Record<string, string>;
  outputType: string;
  limitations: string[];
  bestPractices: string[];
  examples: ToolExample[];
  /** True when the tool calls an LLM itself (the seeds' `require_llm_engine`). */
  requiresLlm: boolean;
}

export interface Tool<I = unknown> {
  readonly name: string;
  readonly description: string;
  readonly inputSchema: z.ZodType<I>;
  readonly metadata: ToolMetadata;
  execute(input: I, context: ToolContext): Promise<ToolResult>;
}

/** Milliseconds since `start` (a `performance.now()` reading). */
export function elapsedMs(start: number): number {
  return Math.round((performance.now() - start) * 1000) / 1000;
}

export function successResult(
  output: string | JsonValue,
  start: number,
  extra: { truncated?: boolean } = {},
): ToolResult {
  const result: ToolResult = { ok: true, output, durationMs: elapsedMs(start) };
  if (extra.truncated) result.truncated = true;
  return result;
}

/**
 * The text of anything thrown: an Error's message, else its string form — or, for a value that
 * has none (`Object.create(null)`, a throwing `toString`), its type, so that describing a bad
 * throw never throws itself.
 */
export function thrownMessage(error: unknown): string {
  if (error instanceof Error) return error.message;
  try {
    return String(error);
  } catch {
    return `a thrown ${Object.prototype.toString.call(error).slice(8, -1)} without a message`;
  }
}

/** Turns anything thrown into a failed result; the output repeats the message for the model. */
export function failureResult(
  error: unknown,
  start: number,
  output?: string | JsonValue,
): ToolResult {
  const message = thrownMessage(error);
  const errorCode = FlowGrpoError.isInstance(error)
    ? error.code
    : error instanceof Error && error.name === 'AbortError'
      ? 'ABORTED'
      : 'TOOL_EXECUTION_FAILED';
  return {
    ok: false,
    output: output ?? `Error: ${message}`,
    error: message,
    errorCode,
    durationMs: elapsedMs(start),
  };
}
