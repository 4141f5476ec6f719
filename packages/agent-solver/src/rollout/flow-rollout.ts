import type { ChatMessage, LLMEngine, StopReason, Trajectory, Turn } from '@flowgrpo/core';
import type { Tool, ToolRegistry, Workspace, WorkspaceOptions } from '@flowgrpo/tools';
import type { PolicyEngine, PolicyGenerateResult } from '../policy/policy-engine.js';
import { PlannerParseError } from '../solver/errors.js';
import type { SolverEventListener, SolverRole } from '../solver/events.js';
import { parseFinalAnswer } from '../solver/final-answer.js';
import {
  FlowRun,
  type GeneratedAnswer,
  type ResolvedEngines,
  type RoleGenerateOptions,
  resolveEngines,
  type SolverEngines,
} from '../solver/flow-run.js';
import {
  callSeed,
  inOptionalWorkspace,
  round,
  toRegistry,
  trajectoryHeader,
  valueText,
} from '../solver/internal.js';
import { type PromptContext, policyPlannerMessages } from '../solver/prompts.js';
import { isFinalAnswerStep, LooseNextStepSchema, type NextStep } from '../solver/schemas.js';
import { parseStructured } from '../structured/structured-output.js';
import type { RolloutAgent, RolloutContext } from './rollout-agent.js';
import { float32, int32 } from './typed-arrays.js';

// Flow rollouts for training (the seed's AgenticSystem.run_trajectory): the planner is the
// trainable PolicyEngine and every planner call becomes a core Turn with its prompt ids, sampled
// ids and their logprobs; executor, verifier and final-answer generator are fixed LLMEngines.
// A planner reply that is not a NextStep object is kept as a turn (parsed: false) and, as in the
// seed, read as "Final Answer" with no tool: the rollout ends with a final-answer attempt.

/** The NextStep the seed substitutes for an unparseable planner reply. */
export const PARSE_FAILED_STEP: NextStep = {
  justification: 'Parse failed',
  context: '',
  sub_goal: 'Final Answer',
  tool_name: 'None',
};

export interface PolicySampling {
  /** Default 512 (the seed's max_new_tokens). */
  maxTokens?: number;
  /** Default 0.7 (the seed's rollout temperature). */
  temperature?: number;
  /** Default 0.9. */
  topP?: number;
  stop?: string[];
  timeoutMs?: number;
}

export interface FlowRolloutOptions {
  /** The trainable planner. */
  policy: PolicyEngine;
  /** One fixed engine for executor, verifier, generator (and analyzer). */
  engine?: LLMEngine;
  /** Per-role fixed engines; `planner` is ignored (the policy plans). */
  engines?: Omit<SolverEngines, 'planner'>;
  tools: ToolRegistry | readonly Tool[];
  /** Planner turns at most (default 5, the seed's max_turns). */
  maxTurns?: number;
  sampling?: PolicySampling;
  /** Run the query analyzer (fixed engine) first and show its analysis to the planner (default false, as the seed's training loop). */
  analyzeQuery?: boolean;
  /**
   * After maxTurns without a stop, still let the generator answer from memory (default true);
   * false gives an empty final answer, which a judge scores as wrong.
   */
  answerAtMaxTurns?: boolean;
  toolTimeoutMs?: number;
  /** Show the executor the steps so far, so sub-goals may refer to earlier results (default false). */
  executorSeesMemory?: boolean;
  maxValueLength?: number;
  generation?: RoleGenerateOptions;
  onEvent?: SolverEventListener;
  /**
   * Builds the planner's prompt (default `policyPlannerMessages`). Chat messages go to the policy
   * as `messages`; a string goes as a raw text prompt (models without a chat template, e.g. the
   * embedded tiny planner, which also wants a short prompt such as `compactPlannerPrompt`).
   */
  plannerPrompt?: (
    context: PromptContext,
    turn: number,
    maxTurns: number,
  ) => ChatMessage[] | string;
  /** One scratch directory per rollout for its tool calls, removed at the end (seed 002's environment isolation). */
  workspace?: boolean | WorkspaceOptions;
}

const FIXED_ROLES: readonly SolverRole[] = ['executor', 'verifier', 'generator'];

export class FlowRollout implements RolloutAgent {
  readonly policy: PolicyEngine;
  readonly registry: ToolRegistry;
  readonly engines: ResolvedEngines;
  readonly maxTurns: number;
  readonly #o: FlowRolloutOptions;

  constructor(options: FlowRolloutOptions) {
    this.#o = options;
    this.policy = options.policy;
    this.registry = toRegistry(options.tools);
    const roles = options.analyzeQuery ? [...FIXED_ROLES, 'analyzer' as const] : FIXED_ROLES;
    const engines = { ...options.engines, default: options.engines?.default ?? options.engine };
    // The planner slot is never called here; fill it so the resolved table is complete.
    const anyEngine =
      engines.default ??
      engines.executor ??
      engines.verifier ??
      engines.generator ??
      engines.plannerFixed;
    this.engines = resolveEngines({ ...engines, planner: anyEngine }, roles);
    this.maxTurns = options.maxTurns ?? 5;
    if (!Number.isInteger(this.maxTurns) || this.maxTurns < 1) {
      throw new RangeError(`maxTurns must be a positive integer, got ${this.maxTurns}`);
    }
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
    const run = new FlowRun({
      question,
      engines: this.engines,
      registry: this.registry,
      maxSteps: this.maxTurns,
      generation: o.generation,
      toolTimeoutMs: o.toolTimeoutMs,
      executorSeesMemory: o.executorSeesMemory,
      maxValueLength: o.maxValueLength,
      signal: context.signal,
      onEvent: o.onEvent,
      ...(workspace ? { workspace } : {}),
    });
    run.start();
    if (o.analyzeQuery) await run.analyze();

    const turns: Turn[] = [];
    let stopReason: StopReason = 'max_turns';
    let answer: GeneratedAnswer | undefined;
    for (let t = 1; t <= this.maxTurns; t++) {
      const prompt = (o.plannerPrompt ?? policyPlannerMessages)(run.context(), t, this.maxTurns);
      const start = performance.now();
      let sample: PolicyGenerateResult;
      try {
        sample = await this.policy.generate({
          ...(typeof prompt === 'string' ? { prompt } : { messages: prompt }),
          maxTokens: o.sampling?.maxTokens ?? 512,
          temperature: o.sampling?.temperature ?? 0.7,
          topP: o.sampling?.topP ?? 0.9,
          ...(o.sampling?.stop ? { stop: o.sampling.stop } : {}),
          ...(o.sampling?.timeoutMs ? { timeoutMs: o.sampling.timeoutMs } : {}),
          ...callSeed(context, t),
          signal: context.signal,
        });
      } catch (error) {
        run.account('planner', round(performance.now() - start));
        run.fail('planner', error, t);
        stopReason = 'error';
        break;
      }
      run.account('planner', round(performance.now() - start), sample.usage);

      const parsed = parseStructured(sample.text, LooseNextStepSchema);
      const next: NextStep = parsed.ok ? parsed.value : PARSE_FAILED_STEP;
      if (!parsed.ok) {
        run.fail(
          'planner',
          new PlannerParseError(parsed.parseError ?? 'the reply is not a NextStep object'),
          t,
        );
      }
      run.emit({
        type: 'plan',
        step: t,
        nextStep: next,
        durationMs: round(performance.now() - start),
        ...(sample.usage ? { usage: sample.usage } : {}),
      });
      const turn: Turn = {
        index: turns.length,
        promptTokens: int32(sample.promptTokens),
        actionTokens: int32(sample.actionTokens),
        actionLogprobs: float32(sample.actionLogprobs),
        promptText: typeof prompt === 'string' ? prompt : this.#render(prompt),
        text: sample.text,
        parsed: parsed.ok,
      };

      if (isFinalAnswerStep(next)) {
        turns.push(turn);
        run.emit({ type: 'turn', turn });
        // The policy's own answer when it wrote one, else the generator's attempt from memory.
        const own = parsed.ok ? next.context.trim() : '';
        if (own) {
          answer = { finalAnswer: parseFinalAnswer(own).answer, answerText: own };
          run.emit({ type: 'answer', ...answer, durationMs: 0 });
        } else {
          answer = await run.generate();
        }
        stopReason = parsed.ok ? 'answer' : 'parse_error';
        break;
      }

      const outcome = await run.execute(t, next);
      turn.toolName = outcome.toolName;
      if (outcome.command) turn.toolInput = outcome.command.arguments;
      turn.toolResult = valueText(outcome.memoryEntry.result);
      turns.push(turn);
      run.emit({ type: 'turn', turn });

      const verification = await run.verify(t);
      if (verification?.stop_signal) {
        stopReason = 'verifier_stop';
        answer = await run.generate();
        break;
      }
    }
    if (stopReason === 'max_turns' && (o.answerAtMaxTurns ?? true)) {
      answer = await run.generate();
      if (answer === undefined) stopReason = 'error';
    } else if (answer === undefined && stopReason !== 'max_turns') {
      stopReason = 'error';
    }

    run.end(stopReason);
    return {
      ...trajectoryHeader(question, context),
      turns,
      // The parsed answer is what rewards compare with the gold (RewardInput.finalAnswer); the
      // whole reply stays in metadata.answerText.
      finalAnswer: answer?.finalAnswer ?? '',
      stopReason,
      timings: { ...run.timings },
      metadata: {
        ...(context.index === undefined ? {} : { index: context.index }),
        ...(run.analysis ? { analysis: run.analysis } : {}),
        ...(answer ? { answerText: answer.answerText } : {}),
        memory: run.memory.getActions(),
        errors: run.errors,
        usage: run.usage,
      },
    };
  }

  #render(messages: ChatMessage[]): string {
    const template = this.policy.tokenizer?.applyChatTemplate;
    if (template)
      return template.call(this.policy.tokenizer, messages, { addGenerationPrompt: true });
    return messages.map((m) => `${m.role}: ${m.content}`).join('\n\n');
  }
}
