import type { z } from 'zod';

// The contract between code that needs an LLM (reward judges, tools, agent roles) and the engines
// that provide one (@flowgrpo/agent's OpenAI-compatible and local engines). It lives in core so
// packages below the agent can depend on the interface without depending on an implementation.

export type ChatRole = 'system' | 'user' | 'assistant' | 'tool';

export interface ChatMessage {
  role: ChatRole;
  content: string;
  name?: string;
}

export interface LLMUsage {
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
}

export type FinishReason = 'stop' | 'length' | 'content_filter' | 'tool_calls' | 'other';

export interface GenerateOptions {
  temperature?: number;
  topP?: number;
  maxTokens?: number;
  stop?: string[];
  seed?: number;
  signal?: AbortSignal;
  /** Per-call timeout in milliseconds; engines also have a default. */
  timeoutMs?: number;
}

export interface GenerateTextResult {
  text: string;
  usage: LLMUsage;
  finishReason: FinishReason;
  model: string;
}

export interface GenerateObjectOptions extends GenerateOptions {
  /** Name of the schema as sent to the server (json_schema.name). */
  schemaName?: string;
}

export interface GenerateObjectResult<T> extends Omit<GenerateTextResult, 'text'> {
  object: T;
  /** The model's text the object was parsed from (after any repair). */
  rawText: string;
}

export interface LLMEngine {
  readonly model: string;
  generateText(messages: ChatMessage[], options?: GenerateOptions): Promise<GenerateTextResult>;
  generateObject<T>(
    messages: ChatMessage[],
    schema: z.ZodType<T>,
    options?: GenerateObjectOptions,
  ): Promise<GenerateObjectResult<T>>;
}

export function emptyUsage(): LLMUsage {
  return { promptTokens: 0, completionTokens: 0, totalTokens: 0 };
}

export function addUsage(into: LLMUsage, add: LLMUsage): LLMUsage {
  into.promptTokens += add.promptTokens;
  into.completionTokens += add.completionTokens;
  into.totalTokens += add.totalTokens;
  return into;
}
