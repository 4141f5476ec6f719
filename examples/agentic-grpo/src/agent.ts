// The ReAct agent: TagAgent (one policy writes tool calls and the answer into one token
// sequence; tool outputs are spliced in as non-trainable observations), built per rollout around
// that rollout's own tool environment and workspace, and a scripted demonstrator whose runs
// through the same agent are the SFT warm start's data.
import {
  type PolicyEngine,
  type PolicyGenerateRequest,
  type PolicyGenerateResult,
  type PolicyTokenizer,
  type RolloutAgent,
  type RolloutContext,
  TagAgent,
  type TagAgentEvent,
} from '@flowgrpo/agent';
import type { ChatMessage, Trajectory } from '@flowgrpo/core';
import type { WorkspaceOptions } from '@flowgrpo/tools';
import { createShopTools, type WorkspaceVisit } from './environment.js';
import { type Shop, type ShopQuestion, UNAVAILABLE } from './shop.js';

export const SYSTEM_PROMPT =
  'You are a shop assistant. Tools: price(item) gives the price per kg; calc(expression) does ' +
  'arithmetic. Call one as <tool_call>{"name": ..., "arguments": {...}}</tool_call>. If a price ' +
  `is not available, answer ${UNAVAILABLE}. Give the answer as <answer>...</answer>.`;

export function shopPrompt(question: string): ChatMessage[] {
  return [
    { role: 'system', content: SYSTEM_PROMPT },
    { role: 'user', content: question },
  ];
}

export interface AgentSettings {
  maxTurns: number;
  /** Tokens per policy call at most. */
  maxNewTokens: number;
  /** The whole sequence at most (the artifacts' position limit). */
  maxTotalTokens: number;
  /** A tool output longer than this many tokens is cut (the seed's max_tool_output_tokens). */
  maxObservationTokens: number;
  toolTimeoutMs: number;
  temperature?: number;
  /** Where the per-rollout workspaces are made (default the OS temp dir). */
  workspaceDir?: string;
  supplierDelayMs?: number;
}

/** What the agent reports while a rollout runs, tagged with the rollout it came from. */
export interface RolloutListener {
  started?(context: RolloutContext): void;
  event?(context: RolloutContext, event: TagAgentEvent): void;
  visit?(context: RolloutContext, visit: WorkspaceVisit): void;
  finished?(context: RolloutContext, trajectory: Trajectory | undefined): void;
}

/**
 * A RolloutAgent that builds, for every rollout, a fresh tool environment and a TagAgent with
 * its own workspace, and reports the rollout's events to `listener` as they happen.
 */
export class ShopAgent implements RolloutAgent {
  readonly #policy: PolicyEngine;
  readonly #shop: Shop;
  readonly #s: AgentSettings;
  readonly #listener: RolloutListener;

  constructor(
    policy: PolicyEngine,
    shop: Shop,
    settings: AgentSettings,
    listener: RolloutListener = {},
  ) {
    this.#policy = policy;
    this.#shop = shop;
    this.#s = settings;
    this.#listener = listener;
  }

  async run(question: string, context: RolloutContext = {}): Promise<Trajectory> {
    const s = this.#s;
    const l = this.#listener;
    const workspace: WorkspaceOptions = {
      prefix: 'rollout-',
      ...(s.workspaceDir && { parentDir: s.workspaceDir }),
    };
    const agent = new TagAgent({
      policy: this.#policy,
      tools: createShopTools(this.#shop, {
        ...(s.supplierDelayMs !== undefined && { supplierDelayMs: s.supplierDelayMs }),
        onVisit: (v) => l.visit?.(context, v),
      }),
      prompt: (q) => shopPrompt(q),
      maxTurns: s.maxTurns,
      maxNewTokens: s.maxNewTokens,
      maxTotalTokens: s.maxTotalTokens,
      maxObservationTokens: s.maxObservationTokens,
      toolTimeoutMs: s.toolTimeoutMs,
      workspace,
      ...(s.temperature !== undefined && { temperature: s.temperature }),
      onEvent: (e) => l.event?.(context, e),
    });
    l.started?.(context);
    let trajectory: Trajectory | undefined;
    try {
      trajectory = await agent.run(question, context);
      return trajectory;
    } finally {
      l.finished?.(context, trajectory);
    }
  }
}

/** The action a perfect assistant takes next, given the transcript so far. */
export function demonstratedAction(q: ShopQuestion, transcript: string): string {
  const responses = [...transcript.matchAll(/<tool_response>\n([\s\S]*?)\n<\/tool_response>/g)].map(
    (m) => m[1]!,
  );
  const call = (name: string, args: object) =>
    `<tool_call>${JSON.stringify({ name, arguments: args })}</tool_call>`;
  if (responses.length === 0) return call('price', { item: q.item });
  if (responses.length === 1) {
    // Read the price off the (cut) product sheet, as the model has to.
    const price = new RegExp(`^${q.item}: (\\d+) coins/kg`).exec(responses[0]!)?.[1];
    if (price === undefined) return `<answer>${UNAVAILABLE}</answer>`;
    return call('calc', { expression: `${q.qty}*${price}` });
  }
  return `<answer>${responses.at(-1)!.trim()}</answer>`;
}

/**
 * A scripted policy that plays the perfect assistant on known questions. Its actions go through
 * the real TagAgent, tools, timeouts and workspaces, so its runs are ordinary recorded
 * trajectories (logprobs 0: nothing was sampled) — the demonstrations a tiny model created from a
 * seed is warm-started on, since it would otherwise never write a tool call.
 */
export class DemonstratorPolicy implements PolicyEngine {
  readonly model = 'demonstrator';
  readonly tokenizer: PolicyTokenizer;
  readonly #questions: Map<string, ShopQuestion>;

  constructor(tokenizer: PolicyTokenizer, questions: readonly ShopQuestion[]) {
    this.tokenizer = tokenizer;
    this.#questions = new Map(questions.map((q) => [q.question, q]));
  }

  async generate(request: PolicyGenerateRequest): Promise<PolicyGenerateResult> {
    const transcript = this.tokenizer.decode(request.promptTokens ?? []);
    const q = [...this.#questions.values()].find((x) => transcript.includes(x.question));
    const text = q ? demonstratedAction(q, transcript) : `<answer>${UNAVAILABLE}</answer>`;
    const actionTokens = Int32Array.from(this.tokenizer.encode(text));
    return {
      text,
      promptTokens: Int32Array.from(request.promptTokens ?? []),
      actionTokens,
      actionLogprobs: new Float32Array(actionTokens.length),
      finishReason: 'stop',
      model: this.model,
    };
  }
}
