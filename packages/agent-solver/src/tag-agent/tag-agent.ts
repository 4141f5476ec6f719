import {
  type ChatMessage,
  ConfigError,
  type FinishReason,
  type StopReason,
  type TokenSegment,
  type Trajectory,
} from '@flowgrpo/core';
import type {
  JsonValue,
  Tool,
  ToolRegistry,
  ToolResult,
  Workspace,
  WorkspaceOptions,
} from '@flowgrpo/tools';
import { LLMAbortError } from '../engines/errors.js';
import type {
  PolicyEngine,
  PolicyGenerateResult,
  PolicyTokenizer,
} from '../policy/policy-engine.js';
import type { RolloutAgent, RolloutContext } from '../rollout/rollout-agent.js';
import { float32, int32 } from '../rollout/typed-arrays.js';
import {
  callSeed,
  errorCode,
  inOptionalWorkspace,
  round,
  toRegistry,
  trajectoryHeader,
} from '../solver/internal.js';
import { ACTION_CLOSERS, missingCloser, parseTagAction, parseToolCall } from './tag-protocol.js';

// The single-policy tag agent (Search-R1 / ARTIST): one model writes `<think>`, tool calls and
// the `<answer>` into one growing token sequence. The agent keeps that sequence as segments: the
// prompt (not trained), each sampled action with its logprobs (trained), each tool observation
// (not trained: training on tool outputs teaches the model to invent them).

export type TagAgentEvent =
  | { type: 'action'; turn: number; text: string; finishReason: FinishReason; tokens: number }
  | {
      type: 'observation';
      turn: number;
      tool: string;
      input: unknown;
      result: ToolResult | undefined;
      text: string;
    }
  | { type: 'error'; turn: number; code: string; message: string }
  | { type: 'end'; stopReason: StopReason; finalAnswer: string; tokens: number };

export interface TagAgentOptions {
  policy: PolicyEngine;
  /** Encodes prompts and observations; default the policy's own. */
  tokenizer?: PolicyTokenizer;
  /** Tools reachable through `<tool_call>{"name", "arguments"}</tool_call>`. */
  tools?: ToolRegistry | readonly Tool[];
  /** Registry tool (input `{query}`) that answers `<search>query</search>`; none disables search. */
  searchTool?: string;
  /** Policy calls at most (default 10). */
  maxTurns?: number;
  /** Length limit of the whole sequence, prompt included (default 4096). */
  maxTotalTokens?: number;
  /** Tokens per policy call at most (default 512). */
  maxNewTokens?: number;
  temperature?: number;
  topP?: number;
  /** Longest observation body in tokens before it is cut (default 500). */
  maxObservationTokens?: number;
  toolTimeoutMs?: number;
  /** Builds the first prompt; default: our protocol description + the question. */
  prompt?: (question: string, tools: { search: boolean; tools: readonly Tool[] }) => ChatMessage[];
  onEvent?: (event: TagAgentEvent) => void;
  /** One scratch directory per rollout for its tool calls, removed at the end. */
  workspace?: boolean | WorkspaceOptions;
}

export class TagAgent implements RolloutAgent {
  readonly policy: PolicyEngine;
  readonly tokenizer: PolicyTokenizer;
  readonly registry: ToolRegistry;
  readonly maxTurns: number;
  readonly maxTotalTokens: number;
  readonly #o: TagAgentOptions;

  constructor(options: TagAgentOptions) {
    this.#o = options;
    this.policy = options.policy;
    const tokenizer = options.tokenizer ?? options.policy.tokenizer;
    if (!tokenizer) {
      throw new ConfigError(
        'the tag agent needs a tokenizer (options.tokenizer or policy.tokenizer)',
        {
          key: 'tokenizer',
        },
      );
    }
    this.tokenizer = tokenizer;
    this.registry = toRegistry(options.tools ?? []);
    if (options.searchTool !== undefined && !this.registry.has(options.searchTool)) {
      throw new ConfigError(`searchTool '${options.searchTool}' is not an enabled tool`, {
        key: 'searchTool',
      });
    }
    this.maxTurns = options.maxTurns ?? 10;
    this.maxTotalTokens = options.maxTotalTokens ?? 4096;
  }

  /** The first prompt as text: the chat template when the tokenizer has one. */
  renderPrompt(question: string): string {
    const messages = (this.#o.prompt ?? defaultTagPrompt)(question, {
      search: this.#o.searchTool !== undefined,
      tools: this.#callableTools(),
    });
    const template = this.tokenizer.applyChatTemplate;
    if (template) return template.call(this.tokenizer, messages, { addGenerationPrompt: true });
    return `${messages.map((m) => m.content).join('\n\n')}\n\n`;
  }

  async run(question: string, context: RolloutContext = {}): Promise<Trajectory> {
    return inOptionalWorkspace(this.#o.workspace, (workspace) =>
      this.#run(question, context, workspace),
    );
  }

  async #run(
    question: string,
    context: RolloutContext,
    workspace: Workspace | undefined,
  ): Promise<Trajectory> {
    const o = this.#o;
    const started = performance.now();
    const timings = { policy: 0, tools: 0, total: 0 };
    const promptIds = Int32Array.from(this.tokenizer.encode(this.renderPrompt(question)));
    const segments: TokenSegment[] = [{ tokens: promptIds, trainable: false, kind: 'prompt' }];
    let ids: number[] = Array.from(promptIds);
    const errors: Array<{ turn: number; code: string; message: string }> = [];
    const toolCalls: Array<{ turn: number; tool: string; input: unknown; ok: boolean }> = [];
    let stopReason: StopReason = 'max_turns';
    let finalAnswer = '';
    let turns = 0;

    const fail = (turn: number, error: unknown) => {
      const e = {
        turn,
        code: errorCode(error),
        message: error instanceof Error ? error.message : String(error),
      };
      errors.push(e);
      o.onEvent?.({ type: 'error', ...e });
    };
    const append = (text: string) => {
      const tokens = Int32Array.from(this.tokenizer.encode(text));
      segments.push({ tokens, trainable: false, kind: 'observation' });
      ids = ids.concat(Array.from(tokens));
    };

    while (true) {
      if (turns >= this.maxTurns) {
        stopReason = 'max_turns';
        break;
      }
      const room = this.maxTotalTokens - ids.length;
      if (room <= 0) {
        stopReason = 'max_tokens';
        break;
      }
      turns++;
      const start = performance.now();
      let sample: PolicyGenerateResult;
      try {
        sample = await this.policy.generate({
          promptTokens: ids,
          maxTokens: Math.min(o.maxNewTokens ?? 512, room),
          stop: [...ACTION_CLOSERS],
          ...(o.temperature === undefined ? {} : { temperature: o.temperature }),
          ...(o.topP === undefined ? {} : { topP: o.topP }),
          ...callSeed(context, turns),
          signal: context.signal,
        });
      } catch (error) {
        timings.policy += performance.now() - start;
        if (LLMAbortError.isInstance(error)) throw error;
        fail(turns, error);
        stopReason = 'error';
        break;
      }
      timings.policy += performance.now() - start;
      segments.push({
        tokens: int32(sample.actionTokens),
        logprobs: float32(sample.actionLogprobs),
        trainable: true,
        kind: 'action',
      });
      ids = ids.concat(Array.from(sample.actionTokens));
      o.onEvent?.({
        type: 'action',
        turn: turns,
        text: sample.text,
        finishReason: sample.finishReason,
        tokens: sample.actionTokens.length,
      });

      let text = sample.text;
      const closer = sample.finishReason === 'stop' ? missingCloser(text) : undefined;
      if (closer) {
        // The stop string was cut from the text. A server that also leaves out its ids gets it
        // added back (not trained: the policy did sample it, but we do not have its ids and
        // logprobs) so the context stays well formed; the local engine keeps the ids in
        // actionTokens, and adding it again would put the closer twice into the sequence.
        if (!this.tokenizer.decode(Array.from(sample.actionTokens)).endsWith(closer))
          append(closer);
        text += closer;
      }

      const action = parseTagAction(text);
      if (action?.kind === 'answer') {
        finalAnswer = action.answer;
        stopReason = 'answer';
        break;
      }
      if (action?.kind === 'search' || action?.kind === 'tool_call') {
        const toolStart = performance.now();
        const { tool, input, result, body } = await this.#observe(
          action,
          turns,
          fail,
          context.signal,
          workspace,
        );
        timings.tools += performance.now() - toolStart;
        if (result) toolCalls.push({ turn: turns, tool, input, ok: result.ok });
        const observation =
          action.kind === 'search'
            ? `\n\n<information>\n${body}\n</information>\n\n`
            : `\n<tool_response>\n${body}\n</tool_response>\n`;
        append(observation);
        o.onEvent?.({ type: 'observation', turn: turns, tool, input, result, text: observation });
        if (ids.length >= this.maxTotalTokens) {
          stopReason = 'max_tokens';
          break;
        }
        continue;
      }
      if (sample.finishReason === 'length') {
        // Cut by the per-call limit in mid-thought: let the model go on in the next call.
        continue;
      }
      // The model ended without an answer or a tool call.
      stopReason = 'parse_error';
      break;
    }

    timings.total = performance.now() - started;
    o.onEvent?.({ type: 'end', stopReason, finalAnswer, tokens: ids.length });
    return {
      ...trajectoryHeader(question, context),
      segments,
      finalAnswer,
      stopReason,
      timings: {
        policy: round(timings.policy),
        tools: round(timings.tools),
        total: round(timings.total),
      },
      metadata: {
        ...(context.index === undefined ? {} : { index: context.index }),
        turns,
        totalTokens: ids.length,
        toolCalls,
        errors,
      },
    };
  }

  #callableTools(): Tool[] {
    return this.registry.list().filter((t) => t.name !== this.#o.searchTool);
  }

  async #observe(
    action: { kind: 'search'; query: string } | { kind: 'tool_call'; raw: string },
    turn: number,
    fail: (turn: number, error: unknown) => void,
    signal: AbortSignal | undefined,
    workspace: Workspace | undefined,
  ): Promise<{ tool: string; input: unknown; result: ToolResult | undefined; body: string }> {
    let tool: string;
    let input: unknown;
    if (action.kind === 'search') {
      if (this.#o.searchTool === undefined) {
        return {
          tool: 'search',
          input: action.query,
          result: undefined,
          body: 'Error: search is not available.',
        };
      }
      tool = this.#o.searchTool;
      input = { query: action.query };
    } else {
      const call = parseToolCall(action.raw);
      if (!call.ok) {
        fail(turn, new Error(call.error));
        return {
          tool: 'tool_call',
          input: action.raw,
          result: undefined,
          body: `Error: ${call.error}`,
        };
      }
      tool = call.name;
      input = call.arguments;
    }
    const result = await this.registry.run(tool, input, {
      timeoutMs: this.#o.toolTimeoutMs,
      signal,
      ...(workspace ? { workspace } : {}),
    });
    if (!result.ok) {
      fail(
        turn,
        Object.assign(new Error(result.error ?? 'tool failed'), {
          name: result.errorCode ?? 'TOOL_EXECUTION_FAILED',
        }),
      );
    }
    return { tool, input, result, body: this.#truncate(formatToolOutput(result.output)) };
  }

  #truncate(text: string): string {
    const limit = this.#o.maxObservationTokens ?? 500;
    const tokens = this.tokenizer.encode(text);
    if (tokens.length <= limit) return text;
    return `${this.tokenizer.decode(Array.from(tokens).slice(0, limit))} ...`;
  }
}

/** Search hits (`[{title, text|contents}]`) as the seed's `<p title>` blocks; anything else as text/JSON. */
export function formatToolOutput(output: string | JsonValue): string {
  if (typeof output === 'string') return output;
  if (Array.isArray(output) && output.every(isHit)) {
    return output
      .map((h) => {
        const hit = h as { title?: JsonValue; text?: JsonValue; contents?: JsonValue };
        return `<p title="${String(hit.title ?? '')}">\n${String(hit.text ?? hit.contents ?? '')}\n</p>`;
      })
      .join('\n\n');
  }
  return JSON.stringify(output);
}

function isHit(v: JsonValue): boolean {
  return (
    typeof v === 'object' && v !== null && !Array.isArray(v) && ('text' in v || 'contents' in v)
  );
}

/**
 * The tag agent's prompt (TagAgent's default `prompt`): our protocol (Search-R1 / ARTIST tags:
 * `<think>`, `<search>`, `<tool_call>`, `<answer>`) as a system message listing the callable
 * tools, and the question as the user message. TagAgent renders it with the tokenizer's chat
 * template (`renderPrompt`); tool results come back inside `<information>` / `<tool_response>`.
 */
export function defaultTagPrompt(
  question: string,
  available: { search: boolean; tools: readonly Tool[] },
): ChatMessage[] {
  const lines = [
    'Solve the question below. Reason inside <think> ... </think> whenever you need to.',
  ];
  if (available.search) {
    lines.push(
      'To look facts up, write <search> your query </search> and stop; the results are then ' +
        'shown to you inside <information> ... </information>. Search as often as you need.',
    );
  }
  if (available.tools.length > 0) {
    lines.push(
      'To call a tool, write <tool_call>{"name": "<tool name>", "arguments": {...}}</tool_call> ' +
        'and stop; its output is then shown inside <tool_response> ... </tool_response>.',
      'Tools:',
      ...available.tools.map(
        (t) => `- ${t.name}: ${t.description} Arguments: ${JSON.stringify(t.metadata.inputTypes)}`,
      ),
    );
  }
  lines.push('When you are sure, give the final answer, short, as <answer> answer </answer>.');
  return [
    { role: 'system', content: lines.join('\n') },
    { role: 'user', content: `Question: ${question}` },
  ];
}
