// The GSM8K calculator agent as a RolloutAgent of our own (the trainer takes any): one policy
// call that thinks and calls the calculator, the calculator run for real, its result spliced in
// as a non-trainable observation, and one more policy call that states the answer. The whole
// sequence is kept as token segments — the same record the TagAgent makes — so GRPO trains on
// the model's own tokens only.
import type {
  PolicyEngine,
  PolicyGenerateRequest,
  PolicyGenerateResult,
  PolicyTokenizer,
  RolloutAgent,
  RolloutContext,
} from '@flowgrpo/agent';
import type { StopReason, TokenSegment, Trajectory } from '@flowgrpo/core';
import { lastNumber } from '@flowgrpo/reward';
import { createCalculatorTool, ToolRegistry } from '@flowgrpo/tools';
import {
  type AgentDemonstration,
  parseCalculatorCall,
  promptMessages,
  toolResponse,
} from './agent-format.js';

export interface CalculatorAgentOptions {
  policy: PolicyEngine;
  /** Default: the policy's own. */
  tokenizer?: PolicyTokenizer;
  /** Tokens of the thinking + tool-call turn at most. */
  maxNewTokens: number;
  /** Tokens of the answer turn at most. */
  maxAnswerTokens?: number;
  /** The whole sequence (prompt included) at most: the artifacts' position limit. */
  maxTotalTokens: number;
  temperature?: number;
  toolTimeoutMs?: number;
}

export class CalculatorAgent implements RolloutAgent {
  readonly #o: CalculatorAgentOptions;
  readonly #tok: PolicyTokenizer;
  readonly #tools = new ToolRegistry([createCalculatorTool()]);

  constructor(o: CalculatorAgentOptions) {
    this.#o = o;
    const tok = o.tokenizer ?? o.policy.tokenizer;
    if (!tok) throw new Error('the calculator agent needs a tokenizer');
    this.#tok = tok;
  }

  renderPrompt(question: string): string {
    const messages = promptMessages(question);
    return this.#tok.applyChatTemplate
      ? this.#tok.applyChatTemplate(messages, { addGenerationPrompt: true })
      : `${messages.map((m) => m.content).join('\n\n')}\n\n`;
  }

  async run(question: string, context: RolloutContext = {}): Promise<Trajectory> {
    const o = this.#o;
    const started = performance.now();
    const queryId = context.queryId ?? question.slice(0, 32);
    const prompt = Int32Array.from(this.#tok.encode(this.renderPrompt(question)));
    const segments: TokenSegment[] = [{ tokens: prompt, trainable: false, kind: 'prompt' }];
    let ids = Array.from(prompt);
    let transcript = '';
    const errors: { role: string; code: string; message: string }[] = [];
    const toolCalls: { tool: string; input: unknown; ok: boolean }[] = [];
    const timings = { policy: 0, tools: 0, total: 0 };

    const sample = async (maxTokens: number, stop: string[], call: number) => {
      const t = performance.now();
      const request: PolicyGenerateRequest = {
        promptTokens: ids,
        maxTokens: Math.max(1, Math.min(maxTokens, o.maxTotalTokens - ids.length)),
        stop,
        ...(o.temperature !== undefined && { temperature: o.temperature }),
        ...(context.seed !== undefined && { seed: context.seed * 1000 + call }),
        ...(context.signal && { signal: context.signal }),
      };
      const r: PolicyGenerateResult = await o.policy.generate(request);
      timings.policy += performance.now() - t;
      segments.push({
        tokens: Int32Array.from(r.actionTokens),
        logprobs: Float32Array.from(r.actionLogprobs),
        trainable: true,
        kind: 'action',
      });
      ids = ids.concat(Array.from(r.actionTokens));
      transcript += r.text;
      return r;
    };
    const observe = (text: string) => {
      const tokens = Int32Array.from(this.#tok.encode(text));
      segments.push({ tokens, trainable: false, kind: 'observation' });
      ids = ids.concat(Array.from(tokens));
      transcript += text;
    };

    let stopReason: StopReason = 'answer';
    const first = await sample(o.maxNewTokens, ['</tool_call>'], 1);
    // OpenAI-compatible servers drop the stop string: put it back (not trained) so it parses.
    if (
      first.finishReason === 'stop' &&
      first.text.includes('<tool_call>') &&
      !first.text.includes('</tool_call>')
    )
      observe('</tool_call>');
    const expression = parseCalculatorCall(transcript);
    if (expression !== undefined) {
      const t = performance.now();
      const result = await this.#tools.run(
        'calculator',
        { expression },
        {
          ...(o.toolTimeoutMs && { timeoutMs: o.toolTimeoutMs }),
          ...(context.signal && { signal: context.signal }),
        },
      );
      timings.tools += performance.now() - t;
      toolCalls.push({ tool: 'calculator', input: { expression }, ok: result.ok });
      if (!result.ok)
        errors.push({
          role: 'tools',
          code: result.errorCode ?? 'TOOL_FAILED',
          message: result.error ?? '',
        });
      observe(toolResponse(result.ok ? String(result.output) : `Error: ${result.error}`));
      if (ids.length < o.maxTotalTokens) await sample(o.maxAnswerTokens ?? 32, [], 2);
      else stopReason = 'max_tokens';
    } else if (first.finishReason === 'length') stopReason = 'max_tokens';

    const finalAnswer = lastNumber(transcript) ?? '';
    if (finalAnswer === '' && stopReason === 'answer') stopReason = 'parse_error';
    timings.total = performance.now() - started;
    return {
      queryId,
      groupId: context.groupId ?? queryId,
      question,
      ...(context.groundTruth !== undefined && { groundTruth: context.groundTruth }),
      segments,
      finalAnswer,
      stopReason,
      timings,
      metadata: {
        // What the multi-dimension reward reads: everything after the prompt.
        completion: transcript,
        toolCalls,
        errors,
        ...(context.index !== undefined && { index: context.index }),
      },
    };
  }
}

/**
 * A scripted policy that writes each question's demonstration (the SFT data): run through the
 * same agent, its turns meet the real calculator and become ordinary recorded trajectories.
 */
export class DemonstrationPolicy implements PolicyEngine {
  readonly model = 'demonstration';
  readonly tokenizer: PolicyTokenizer;
  readonly #byQuestion: Map<string, AgentDemonstration>;

  constructor(tokenizer: PolicyTokenizer, demos: ReadonlyMap<string, AgentDemonstration>) {
    this.tokenizer = tokenizer;
    this.#byQuestion = new Map(demos);
  }

  async generate(request: PolicyGenerateRequest): Promise<PolicyGenerateResult> {
    const prompt = this.tokenizer.decode(request.promptTokens ?? []);
    let demo: AgentDemonstration | undefined;
    for (const [q, d] of this.#byQuestion) if (prompt.includes(q)) demo = d;
    const answered = prompt.includes('<tool_response>');
    const text = !demo ? '' : answered ? demo.final : demo.first;
    // The answer ends the sequence: after the answer turn, or a direct answer without a tool.
    const ends = answered || demo?.expression === undefined;
    const eos = this.tokenizer.eosTokenId;
    const actionTokens = Int32Array.from([
      ...Array.from(this.tokenizer.encode(text)),
      ...(ends && eos !== undefined ? [eos] : []),
    ]);
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
