import {
  addUsage,
  ConfigError,
  emptyUsage,
  type GenerateOptions,
  type LLMEngine,
  type LLMUsage,
  type StopReason,
} from '@flowgrpo/core';
import {
  type Tool,
  ToolAbortedError,
  ToolNotFoundError,
  type ToolRegistry,
  type ToolResult,
  type Workspace,
} from '@flowgrpo/tools';
import { LLMAbortError } from '../engines/errors.js';
import { Memory, type MemoryAction } from '../memory/memory.js';
import type { RoleError, SolverEvent, SolverEventListener, SolverRole } from './events.js';
import { parseFinalAnswer } from './final-answer.js';
import { errorCode, round } from './internal.js';
import {
  analyzerMessages,
  executorMessages,
  generatorMessages,
  type PromptContext,
  plannerMessages,
  verifierMessages,
} from './prompts.js';
import {
  type MemoryVerification,
  MemoryVerificationSchema,
  type NextStep,
  nextStepSchema,
  type QueryAnalysis,
  QueryAnalysisSchema,
  SCHEMA_NAMES,
  type ToolCommand,
  toolCommandSchema,
} from './schemas.js';

// The mechanics shared by the solver and the rollout recorder: one object per run that owns the
// memory, calls each role with its engine, times it, adds up its token usage, and turns a role's
// failure into a recorded RoleError (a caller's abort is the only thing that propagates).

/** Engines per role. Unset roles fall back as the seed wires them (see `resolveEngines`). */
export interface SolverEngines {
  /** Used for every role that has no engine of its own. */
  default?: LLMEngine;
  /** The seed's planner_main: plans each step. */
  planner?: LLMEngine;
  /** The seed's planner_fixed: the query analysis (and the final answer unless `generator`). */
  plannerFixed?: LLMEngine;
  executor?: LLMEngine;
  verifier?: LLMEngine;
  generator?: LLMEngine;
}

export type ResolvedEngines = Record<SolverRole, LLMEngine>;

export function resolveEngines(
  engines: SolverEngines,
  roles: readonly SolverRole[],
): ResolvedEngines {
  const d = engines.default;
  const fixed = engines.plannerFixed ?? d;
  const table: Record<SolverRole, LLMEngine | undefined> = {
    analyzer: fixed,
    planner: engines.planner ?? d,
    executor: engines.executor ?? d,
    verifier: engines.verifier ?? d,
    generator: engines.generator ?? fixed,
  };
  for (const role of roles) {
    if (!table[role]) {
      throw new ConfigError(
        `no LLM engine for the ${role} role: pass engines.${role} or engines.default`,
        {
          key: `engines.${role}`,
        },
      );
    }
  }
  return table as ResolvedEngines;
}

/** Sampling options per role (e.g. temperature 0 for the fixed roles). */
export type RoleGenerateOptions = Partial<Record<SolverRole, Omit<GenerateOptions, 'signal'>>>;

/** Time spent per role and in tools, plus the whole run (milliseconds). */
export type SolveTimings = Record<SolverRole | 'tools' | 'total', number>;

export interface SolveUsage {
  byRole: Record<SolverRole, LLMUsage>;
  total: LLMUsage;
}

/** The generator's reply: the whole text and the answer parsed out of it. */
export interface GeneratedAnswer {
  /** The answer alone (parseFinalAnswer), e.g. "144" from "… Answer: **144**". */
  finalAnswer: string;
  /** The generator's whole reply. */
  answerText: string;
}

/** What happened to a planned tool call. */
export interface ExecutionOutcome {
  /** The tool's canonical name (the planner may have written a built-in alias). */
  toolName: string;
  command?: ToolCommand;
  result: ToolResult;
  memoryEntry: MemoryAction;
}

export interface FlowRunOptions {
  question: string;
  engines: ResolvedEngines;
  registry: ToolRegistry;
  maxSteps: number;
  generation?: RoleGenerateOptions;
  toolTimeoutMs?: number;
  maxValueLength?: number;
  signal?: AbortSignal;
  onEvent?: SolverEventListener;
  /** Scratch directory shared by this run's tool calls. */
  workspace?: Workspace;
  /** Show the executor the steps so far (see executorMessages). Default false, as the seeds. */
  executorSeesMemory?: boolean;
}

export class FlowRun {
  readonly question: string;
  readonly memory: Memory;
  readonly toolNames: string[];
  readonly toolMetadata: Record<string, unknown>;
  readonly errors: RoleError[] = [];
  readonly timings: SolveTimings = {
    analyzer: 0,
    planner: 0,
    executor: 0,
    verifier: 0,
    generator: 0,
    tools: 0,
    total: 0,
  };
  readonly usage: SolveUsage = {
    byRole: {
      analyzer: emptyUsage(),
      planner: emptyUsage(),
      executor: emptyUsage(),
      verifier: emptyUsage(),
      generator: emptyUsage(),
    },
    total: emptyUsage(),
  };
  analysis: QueryAnalysis | undefined;
  /**
   * Role calls (analyzer, planner, executor, verifier, generator) that returned a reply. Zero at
   * the end of a run means no model was reached at all (see SolveFailedError).
   */
  llmCallsSucceeded = 0;
  readonly #o: FlowRunOptions;
  readonly #started = performance.now();

  constructor(options: FlowRunOptions) {
    this.#o = options;
    this.question = options.question;
    this.memory = new Memory({ maxValueLength: options.maxValueLength });
    this.toolNames = options.registry.names();
    this.toolMetadata = options.registry.metadataForPlanner();
  }

  get maxSteps(): number {
    return this.#o.maxSteps;
  }

  get registry(): ToolRegistry {
    return this.#o.registry;
  }

  get signal(): AbortSignal | undefined {
    return this.#o.signal;
  }

  emit(event: SolverEvent): void {
    this.#o.onEvent?.(event);
  }

  context(): PromptContext {
    return {
      question: this.question,
      toolNames: this.toolNames,
      toolMetadata: this.toolMetadata,
      analysis: this.analysis,
      actions: this.memory.getActions(),
    };
  }

  /** Adds a role's usage and time to the run's totals. */
  account(role: SolverRole | 'tools', ms: number, usage?: LLMUsage): void {
    this.timings[role] += ms;
    if (usage && role !== 'tools') {
      addUsage(this.usage.byRole[role], usage);
      addUsage(this.usage.total, usage);
    }
  }

  /** Records a role failure; rethrows it when it is the caller's abort. */
  fail(role: SolverRole | 'tools', error: unknown, step?: number): RoleError {
    if (isAbort(error, this.#o.signal)) throw error;
    const recorded: RoleError = {
      role,
      ...(step === undefined ? {} : { step }),
      code: errorCode(error),
      message: error instanceof Error ? error.message : String(error),
    };
    this.errors.push(recorded);
    this.emit({ type: 'error', error: recorded });
    return recorded;
  }

  finish(): void {
    this.timings.total = round(performance.now() - this.#started);
  }

  /** Announces the run: the 'start' event with the question, tools and step limit. */
  start(): void {
    this.emit({
      type: 'start',
      question: this.question,
      tools: this.toolNames,
      maxSteps: this.maxSteps,
    });
  }

  /** Stops the clock (`finish`) and announces how the run ended: the 'end' event. */
  end(stopReason: StopReason): void {
    this.finish();
    this.emit({ type: 'end', stopReason, durationMs: this.timings.total });
  }

  #options(role: SolverRole): GenerateOptions {
    return { ...this.#o.generation?.[role], signal: this.#o.signal };
  }

  /**
   * One role call: timed, usage counted, a failure recorded (undefined returned). Events are
   * emitted by the callers after this returns, so a throwing listener is never mistaken for a
   * role failure.
   */
  async #call<T>(
    role: SolverRole,
    step: number | undefined,
    fn: () => Promise<{ value: T; usage: LLMUsage }>,
  ): Promise<{ value: T; usage: LLMUsage; ms: number } | undefined> {
    const start = performance.now();
    let r: { value: T; usage: LLMUsage };
    try {
      r = await fn();
    } catch (error) {
      this.account(role, round(performance.now() - start));
      this.fail(role, error, step);
      return undefined;
    }
    const ms = round(performance.now() - start);
    this.account(role, ms, r.usage);
    this.llmCallsSucceeded++;
    return { ...r, ms };
  }

  async analyze(): Promise<QueryAnalysis | undefined> {
    const r = await this.#call('analyzer', undefined, async () => {
      const o = await this.#o.engines.analyzer.generateObject(
        analyzerMessages(this.context()),
        QueryAnalysisSchema,
        { ...this.#options('analyzer'), schemaName: SCHEMA_NAMES.analyzer },
      );
      return { value: o.object, usage: o.usage };
    });
    if (!r) return undefined;
    this.analysis = r.value;
    this.emit({ type: 'analysis', analysis: r.value, durationMs: r.ms, usage: r.usage });
    return r.value;
  }

  /** The planner role over an LLMEngine with structured output. */
  async plan(step: number): Promise<NextStep | undefined> {
    const r = await this.#call('planner', step, async () => {
      const o = await this.#o.engines.planner.generateObject(
        plannerMessages(this.context(), step, this.#o.maxSteps),
        nextStepSchema(this.toolNames),
        { ...this.#options('planner'), schemaName: SCHEMA_NAMES.planner },
      );
      return { value: o.object, usage: o.usage };
    });
    if (!r) return undefined;
    this.emit({ type: 'plan', step, nextStep: r.value, durationMs: r.ms, usage: r.usage });
    return r.value;
  }

  /**
   * Executor + tool for one planned step; the outcome always lands in memory, failures included,
   * so the next planner call sees them (as the seed stores "Execution Error: …" results).
   */
  async execute(step: number, next: NextStep): Promise<ExecutionOutcome> {
    const registry = this.#o.registry;
    if (!registry.has(next.tool_name)) {
      const e = this.fail('tools', new ToolNotFoundError(next.tool_name, registry.names()), step);
      const result = failed(`Error: ${e.message}`, e);
      const memoryEntry = this.memory.addAction(
        step,
        next.tool_name,
        next.sub_goal,
        null,
        result.output,
      );
      this.emit({
        type: 'tool_result',
        step,
        toolName: next.tool_name,
        arguments: null,
        result,
        durationMs: 0,
      });
      return { toolName: next.tool_name, result, memoryEntry };
    }
    const tool: Tool = registry.get(next.tool_name);

    const r = await this.#call('executor', step, async () => {
      const o = await this.#o.engines.executor.generateObject(
        executorMessages(this.context(), next, this.toolMetadata[tool.name], {
          showMemory: this.#o.executorSeesMemory ?? false,
        }),
        toolCommandSchema(tool),
        { ...this.#options('executor'), schemaName: SCHEMA_NAMES.executor },
      );
      return { value: o.object, usage: o.usage };
    });
    if (!r) {
      const e = this.errors.at(-1)!;
      const result = failed(`Error: no valid arguments for ${tool.name}: ${e.message}`, e);
      const memoryEntry = this.memory.addAction(
        step,
        tool.name,
        next.sub_goal,
        null,
        result.output,
      );
      return { toolName: tool.name, result, memoryEntry };
    }
    const command = r.value;
    this.emit({
      type: 'command',
      step,
      toolName: tool.name,
      command,
      durationMs: r.ms,
      usage: r.usage,
    });

    const toolStart = performance.now();
    const result = await registry.run(tool.name, command.arguments, {
      signal: this.#o.signal,
      timeoutMs: this.#o.toolTimeoutMs,
      ...(this.#o.workspace ? { workspace: this.#o.workspace } : {}),
    });
    if (result.errorCode === ToolAbortedError.code && this.#o.signal?.aborted) {
      throw this.#o.signal.reason ?? new ToolAbortedError(tool.name);
    }
    const toolMs = round(performance.now() - toolStart);
    this.account('tools', toolMs);
    if (!result.ok) {
      this.errors.push({
        role: 'tools',
        step,
        code: result.errorCode ?? 'TOOL_EXECUTION_FAILED',
        message: result.error ?? 'the tool failed',
      });
    }
    const memoryEntry = this.memory.addAction(
      step,
      tool.name,
      next.sub_goal,
      command.arguments,
      result.output,
    );
    this.emit({
      type: 'tool_result',
      step,
      toolName: tool.name,
      arguments: command.arguments,
      result,
      durationMs: toolMs,
    });
    return { toolName: tool.name, command, result, memoryEntry };
  }

  async verify(step: number): Promise<MemoryVerification | undefined> {
    const r = await this.#call('verifier', step, async () => {
      const o = await this.#o.engines.verifier.generateObject(
        verifierMessages(this.context()),
        MemoryVerificationSchema,
        { ...this.#options('verifier'), schemaName: SCHEMA_NAMES.verifier },
      );
      return { value: o.object, usage: o.usage };
    });
    if (!r) return undefined;
    this.emit({
      type: 'verification',
      step,
      verification: r.value,
      durationMs: r.ms,
      usage: r.usage,
    });
    return r.value;
  }

  /**
   * The final answer from everything in memory: the generator's text and the answer parsed out
   * of it (parseFinalAnswer); undefined when the generator failed.
   */
  async generate(): Promise<GeneratedAnswer | undefined> {
    const r = await this.#call('generator', undefined, async () => {
      const o = await this.#o.engines.generator.generateText(
        generatorMessages(this.context()),
        this.#options('generator'),
      );
      return { value: o.text, usage: o.usage };
    });
    if (!r) return undefined;
    const finalAnswer = parseFinalAnswer(r.value).answer;
    this.emit({
      type: 'answer',
      finalAnswer,
      answerText: r.value,
      durationMs: r.ms,
      usage: r.usage,
    });
    return { finalAnswer, answerText: r.value };
  }
}

function failed(output: string, e: RoleError): ToolResult {
  return { ok: false, output, error: e.message, errorCode: e.code, durationMs: 0 };
}

function isAbort(error: unknown, signal: AbortSignal | undefined): boolean {
  return (
    LLMAbortError.isInstance(error) ||
    (signal?.aborted === true && (ToolAbortedError.isInstance(error) || error === signal.reason))
  );
}
