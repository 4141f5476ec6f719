import {
  LLMMalformedReplyError,
  type PolicyEngine,
  type PolicyGenerateResult,
} from '@flowgrpo/agent';
import {
  type ChatMessage,
  emptyUsage,
  type GenerateObjectResult,
  type GenerateOptions,
  type GenerateTextResult,
  type LLMEngine,
  type Turn,
} from '@flowgrpo/core';
import type { z } from 'zod';
import { field, jsonAfter } from './roles.js';

// The verifier as a model: an LLMEngine in FlowRollout's verifier slot that reads the verifier
// prompt FlowRun sends (question, steps so far), asks a PolicyEngine — the tiny trained model, or
// the scripted teacher — with a prompt as short as the planner's, and answers the verifier
// schema (MemoryVerification: analysis, stop_signal). The model writes only the decision,
// `{"stop_signal":true}` or `{"stop_signal":false}`; the analysis is filled in here.
//
// Through the policy gateway the PolicyEngine is an HTTP client of the role's served adapter, so
// the gateway records every verifier call token-exactly for the multi-role trainer.

/** The verifier model's prompt: the question, the steps so far one per line, and "Stop?". */
export function demoVerifierPrompt(
  question: string,
  steps: readonly { tool_name: string; sub_goal: string; result: unknown }[],
): string {
  const lines = [`Q: ${question}`];
  steps.forEach((a, i) => {
    const result = typeof a.result === 'string' ? a.result : JSON.stringify(a.result);
    lines.push(`${i + 1} ${a.tool_name}: ${a.sub_goal} -> ${result}`);
  });
  lines.push('Stop?');
  return `${lines.join('\n')}\n`;
}

/** The verifier model's reply for a decision. */
export function verifierReply(stop: boolean): string {
  return JSON.stringify({ stop_signal: stop });
}

/** The decision in a verifier model's reply; undefined when it is not one. */
export function parseVerifierReply(text: string): boolean | undefined {
  try {
    const v = JSON.parse(text.trim()) as { stop_signal?: unknown };
    return typeof v?.stop_signal === 'boolean' ? v.stop_signal : undefined;
  } catch {
    return undefined;
  }
}

export interface PolicyVerifierOptions {
  /** Sampling of the verifier's calls (a gateway's training rollouts force their own). */
  temperature?: number;
  maxTokens?: number;
  /** Every call's prompt and sampled tokens, in order (the demonstrations of a teacher). */
  record?: Turn[];
}

/** FlowRollout's verifier over a PolicyEngine (see the file comment). */
export class PolicyVerifierEngine implements LLMEngine {
  readonly model: string;
  readonly #policy: PolicyEngine;
  readonly #o: PolicyVerifierOptions;

  constructor(policy: PolicyEngine, o: PolicyVerifierOptions = {}) {
    this.model = policy.model;
    this.#policy = policy;
    this.#o = o;
  }

  async generateText(): Promise<GenerateTextResult> {
    throw new Error(`${this.model} is a verifier: it answers with objects only`);
  }

  async generateObject<T>(
    messages: ChatMessage[],
    schema: z.ZodType<T>,
    options: GenerateOptions = {},
  ): Promise<GenerateObjectResult<T>> {
    const user = messages
      .filter((m) => m.role === 'user')
      .map((m) => m.content)
      .join('\n');
    const steps = Object.values(jsonAfter(user, 'Steps taken and their results:')) as {
      tool_name: string;
      sub_goal: string;
      result: unknown;
    }[];
    const prompt = demoVerifierPrompt(field(user, 'Question') ?? '', steps);
    const sample: PolicyGenerateResult = await this.#policy.generate({
      prompt,
      maxTokens: this.#o.maxTokens ?? 32,
      temperature: this.#o.temperature ?? 1,
      topP: 1,
      ...(options.seed !== undefined && { seed: options.seed }),
      ...(options.signal && { signal: options.signal }),
    });
    this.#o.record?.push({
      index: this.#o.record.length,
      promptTokens: Int32Array.from(sample.promptTokens),
      actionTokens: Int32Array.from(sample.actionTokens),
      actionLogprobs: Float32Array.from(sample.actionLogprobs),
      promptText: prompt,
      text: sample.text,
      parsed: true,
    });
    const stop = parseVerifierReply(sample.text);
    if (stop === undefined)
      throw new LLMMalformedReplyError(
        `the verifier model's reply is not {"stop_signal":true|false}: ${JSON.stringify(sample.text.slice(0, 80))}`,
        { attempts: 1, retryable: false },
      );
    const value = {
      analysis: stop ? 'The steps so far answer the question.' : 'More steps are needed.',
      stop_signal: stop,
    };
    return {
      object: schema.parse(value),
      rawText: sample.text,
      usage: sample.usage ?? emptyUsage(),
      finishReason: 'stop',
      model: this.model,
    };
  }
}
