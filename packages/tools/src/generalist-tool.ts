import type { ChatMessage, LLMEngine } from '@flowgrpo/core';
import { z } from 'zod';
import {
  failureResult,
  successResult,
  type Tool,
  type ToolContext,
  type ToolResult,
} from './tool.js';

export interface GeneralistToolOptions {
  engine: LLMEngine;
  name?: string;
  /** Optional system message; the seeds send the query alone. */
  systemPrompt?: string;
  temperature?: number;
  maxTokens?: number;
}

export interface GeneralistToolInput {
  query: string;
}

/** The seeds' generalist: the query goes straight to an LLM, which answers step by step. */
export function createGeneralistTool(options: GeneralistToolOptions): Tool<GeneralistToolInput> {
  return {
    name: options.name ?? 'Generalist_Solution_Generator_Tool',
    description:
      'A general-purpose assistant: give it a question or sub-task and it answers step by step ' +
      'from its own knowledge and reasoning.',
    inputSchema: z.object({ query: z.string().min(1, 'query must not be empty') }),
    metadata: {
      version: '1.0.0',
      inputTypes: { query: 'str - the question or sub-task, with all context it needs' },
      outputType: 'str - the answer with its reasoning',
      limitations: [
        'May give hallucinated or incorrect answers; it has no tools, search or code execution.',
      ],
      bestPractices: [
        'Use it for general reasoning, summaries and explanations.',
        'Verify important facts and numbers with another tool.',
      ],
      examples: [
        {
          input: { query: 'Summarize the key steps to prove that sqrt(2) is irrational.' },
          description: 'General reasoning',
        },
      ],
      requiresLlm: true,
    },
    async execute(input: GeneralistToolInput, context: ToolContext): Promise<ToolResult> {
      const start = performance.now();
      const messages: ChatMessage[] = [];
      if (options.systemPrompt) messages.push({ role: 'system', content: options.systemPrompt });
      messages.push({ role: 'user', content: input.query });
      try {
        const result = await options.engine.generateText(messages, {
          temperature: options.temperature ?? 0,
          ...(options.maxTokens !== undefined && { maxTokens: options.maxTokens }),
          ...(context.signal && { signal: context.signal }),
          ...(context.timeoutMs !== undefined && { timeoutMs: context.timeoutMs }),
        });
        const out = successResult(result.text, start);
        // A reply cut at max tokens is still shown, flagged as truncated.
        if (result.finishReason === 'length') out.truncated = true;
        return out;
      } catch (error) {
        return failureResult(error, start);
      }
    },
  };
}
