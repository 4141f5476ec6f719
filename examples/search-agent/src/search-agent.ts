// The pieces of the AReaL search agent, on flowgrpo's parts: a `search` tool that calls a
// /retrieve server, the prompt of the <search>/<information>/<answer> protocol (our wording), the
// TagAgent that runs it (observations are kept as non-trainable segments), and a scripted
// demonstrator whose recorded trajectories warm-start a model that does not know the protocol.
import {
  type PolicyEngine,
  type PolicyGenerateRequest,
  type PolicyGenerateResult,
  type PolicyTokenizer,
  TagAgent,
  type TagAgentEvent,
} from '@flowgrpo/agent';
import type { ChatMessage } from '@flowgrpo/core';
import { defineTool, RetrievalServerProvider, type Tool } from '@flowgrpo/tools';
import { z } from 'zod';

/** `search(query)` → the top passages as `{title, text}` (rendered as `<p title="…">` blocks). */
export function createSearchTool(url: string, topK: number): Tool {
  const provider = new RetrievalServerProvider({ url, defaultTopK: topK, returnScores: false });
  return defineTool({
    name: 'search',
    description: 'Searches a Wikipedia passage index and returns the top passages.',
    input: z.object({ query: z.string().min(1).describe('keywords or a question') }),
    async execute({ query }, context) {
      const hits = await provider.search(query, {
        topK,
        ...(context.signal && { signal: context.signal }),
      });
      return hits.map((h) => ({ title: h.title, text: h.text }));
    },
  }) as Tool;
}

/** The protocol, told to the model in a few lines (the seed's template, reworded and shorter). */
export function searchPrompt(question: string): ChatMessage[] {
  return [
    {
      role: 'system',
      content:
        'Answer the question. Think inside <think> </think>. To look something up write ' +
        '<search> query </search>; the results come back inside <information> </information>. ' +
        'Give the final answer, a few words, as <answer> answer </answer>.',
    },
    { role: 'user', content: question },
  ];
}

export interface SearchAgentOptions {
  maxTurns: number;
  maxNewTokens: number;
  maxTotalTokens: number;
  maxObservationTokens: number;
  temperature?: number;
  onEvent?: (event: TagAgentEvent) => void;
}

/** The tag agent of the seed: search through the tool, answer with <answer>. */
export function createSearchAgent(
  policy: PolicyEngine,
  search: Tool,
  o: SearchAgentOptions,
): TagAgent {
  return new TagAgent({
    policy,
    tools: [search],
    searchTool: search.name,
    prompt: (question) => searchPrompt(question),
    maxTurns: o.maxTurns,
    maxNewTokens: o.maxNewTokens,
    maxTotalTokens: o.maxTotalTokens,
    maxObservationTokens: o.maxObservationTokens,
    toolTimeoutMs: 30_000,
    ...(o.temperature !== undefined && { temperature: o.temperature }),
    ...(o.onEvent && { onEvent: o.onEvent }),
  });
}

/**
 * A scripted policy that searches for the question, then answers with the gold answer: the
 * demonstrations a tiny model is warm-started on so that it emits the protocol at all (a real
 * instruction model follows the prompt and needs no warm start). Its replies go through the real
 * TagAgent and retrieval server, so they are ordinary recorded trajectories; their logprobs are
 * 0 (nothing was sampled).
 */
export class DemonstratorPolicy implements PolicyEngine {
  readonly model = 'demonstrator';
  readonly tokenizer: PolicyTokenizer;
  readonly #answers: Map<string, string>;

  constructor(tokenizer: PolicyTokenizer, answers: ReadonlyMap<string, string>) {
    this.tokenizer = tokenizer;
    this.#answers = new Map(answers);
  }

  async generate(request: PolicyGenerateRequest): Promise<PolicyGenerateResult> {
    const prompt = this.tokenizer.decode(request.promptTokens ?? []);
    const question = [...this.#answers.keys()].find((q) => prompt.includes(q)) ?? '';
    // Results already shown (after the question: the system prompt names the tags too)?
    const searched = prompt.indexOf('<information>', prompt.indexOf(question)) >= 0;
    const text = searched
      ? `<answer> ${this.#answers.get(question) ?? ''} </answer>`
      : `<think> I need to look this up. </think>\n<search> ${question} </search>`;
    const promptTokens = Int32Array.from(request.promptTokens ?? []);
    const actionTokens = Int32Array.from(this.tokenizer.encode(text));
    return {
      text,
      promptTokens,
      actionTokens,
      actionLogprobs: new Float32Array(actionTokens.length),
      finishReason: 'stop',
      model: this.model,
    };
  }
}
