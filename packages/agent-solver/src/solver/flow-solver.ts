import type { LLMEngine, StopReason } from '@flowgrpo/core';
import type { Tool, ToolRegistry, ToolResult, Workspace, WorkspaceOptions } from '@flowgrpo/tools';
import type { MemoryAction } from '../memory/memory.js';
import { SolveFailedError } from './errors.js';
import { type RoleError, SOLVER_ROLES, type SolverEventListener } from './events.js';
import {
  FlowRun,
  type ResolvedEngines,
  type RoleGenerateOptions,
  resolveEngines,
  type SolverEngines,
  type SolveTimings,
  type SolveUsage,
} from './flow-run.js';
import { inOptionalWorkspace, toRegistry } from './internal.js';
import {
  isFinalAnswerStep,
  type MemoryVerification,
  type NextStep,
  type QueryAnalysis,
  type ToolCommand,
} from './schemas.js';

// The Flow solver (AgentFlow's inference loop): analyze the query once, then per step plan →
// generate tool arguments → run the tool → verify, until the verifier says stop, the planner
// chooses no tool, or max steps; then write the final answer from memory. Role failures are
// recorded and the run degrades (no analysis, a failed step in memory, "continue", the loop
// ends) instead of throwing — unless no LLM call succeeded at all: a dead server must not look
// like an empty answer, so that rejects with SolveFailedError (see SolveOptions.throwOnError).

export interface FlowSolverOptions {
  /** One engine for every role (shorthand for `engines.default`). */
  engine?: LLMEngine;
  engines?: SolverEngines;
  /** The enabled tools: a registry (its enabled tools are used) or a list. */
  tools: ToolRegistry | readonly Tool[];
  /** Plan/execute/verify rounds at most (default 5, as the seed). */
  maxSteps?: number;
  /** Time limit of one tool call (default: the registry's). */
  toolTimeoutMs?: number;
  /** Show the executor the steps so far, so sub-goals may refer to earlier results (default false). */
  executorSeesMemory?: boolean;
  /** Longest string kept in a memory entry (default 2000, as the seed). */
  maxValueLength?: number;
  /** Sampling options per role. */
  generation?: RoleGenerateOptions;
  onEvent?: SolverEventListener;
  /**
   * One scratch directory per solve, shared by its tool calls (files the python tool writes in
   * one step are there in the next) and removed at the end. Default false: each python call gets
   * its own temporary directory.
   */
  workspace?: boolean | WorkspaceOptions;
}

export interface SolveOptions {
  signal?: AbortSignal;
  /** Called with this run's events, after the solver's own listener. */
  onEvent?: SolverEventListener;
  /**
   * When no LLM call of the solve succeeded: reject with SolveFailedError (default true), or
   * resolve with the partial result (`false`; its `errors` say what failed). Solves where some
   * call succeeded always resolve, failed roles recorded in `errors`.
   */
  throwOnError?: boolean;
}

/** One plan/execute/verify round. */
export interface SolveStep {
  /** 1-based. */
  step: number;
  nextStep?: NextStep;
  /** The executor's output (absent when no tool ran or the executor failed). */
  command?: ToolCommand;
  toolName?: string;
  arguments?: unknown;
  result?: ToolResult;
  /** The entry written to memory ("Action Step N"). */
  memory?: MemoryAction;
  verification?: MemoryVerification;
  /** True when this step's plan ended the loop with a final answer. */
  final?: boolean;
  errors: RoleError[];
}

export interface SolveResult {
  question: string;
  /**
   * The answer alone, parsed out of the generator's text (`parseFinalAnswer`: "Answer: **144**"
   * → "144"): what to compare with a gold answer. '' when the generator failed (see `errors`).
   */
  finalAnswer: string;
  /** The generator's whole reply (its reasoning and the answer line); '' when it failed. */
  answerText: string;
  analysis?: QueryAnalysis;
  steps: SolveStep[];
  memory: Record<string, MemoryAction>;
  /**
   * - `verifier_stop`: the verifier's stop_signal;
   * - `answer`: the planner chose no tool / "Final Answer";
   * - `max_turns`: maxSteps rounds ran without a stop;
   * - `error`: the planner or the generator failed (the answer may still be present).
   */
  stopReason: StopReason;
  timings: SolveTimings;
  usage: SolveUsage;
  errors: RoleError[];
}

export class FlowSolver {
  readonly registry: ToolRegistry;
  readonly engines: ResolvedEngines;
  readonly maxSteps: number;
  readonly #options: FlowSolverOptions;

  constructor(options: FlowSolverOptions) {
    this.#options = options;
    this.registry = toRegistry(options.tools);
    this.engines = resolveEngines(
      { ...options.engines, default: options.engines?.default ?? options.engine },
      SOLVER_ROLES,
    );
    this.maxSteps = options.maxSteps ?? 5;
    if (!Number.isInteger(this.maxSteps) || this.maxSteps < 1) {
      throw new RangeError(`maxSteps must be a positive integer, got ${this.maxSteps}`);
    }
  }

  async solve(question: string, options: SolveOptions = {}): Promise<SolveResult> {
    return inOptionalWorkspace(this.#options.workspace, (workspace) =>
      this.#solve(question, options, workspace),
    );
  }

  async #solve(
    question: string,
    options: SolveOptions,
    workspace: Workspace | undefined,
  ): Promise<SolveResult> {
    const listeners = [this.#options.onEvent, options.onEvent].filter(
      (l): l is SolverEventListener => l !== undefined,
    );
    const run = new FlowRun({
      question,
      engines: this.engines,
      registry: this.registry,
      maxSteps: this.maxSteps,
      generation: this.#options.generation,
      toolTimeoutMs: this.#options.toolTimeoutMs,
      executorSeesMemory: this.#options.executorSeesMemory,
      maxValueLength: this.#options.maxValueLength,
      signal: options.signal,
      ...(workspace ? { workspace } : {}),
      onEvent: (event) => {
        for (const l of listeners) l(event);
      },
    });
    run.start();

    await run.analyze();
    const steps: SolveStep[] = [];
    let stopReason: StopReason = 'max_turns';
    for (let step = 1; step <= this.maxSteps; step++) {
      const record: SolveStep = { step, errors: [] };
      steps.push(record);
      const errorsBefore = run.errors.length;
      const collect = () => {
        record.errors = run.errors.slice(errorsBefore);
      };

      const next = await run.plan(step);
      if (!next) {
        collect();
        stopReason = 'error';
        break;
      }
      record.nextStep = next;
      if (isFinalAnswerStep(next)) {
        record.final = true;
        collect();
        stopReason = 'answer';
        break;
      }

      const outcome = await run.execute(step, next);
      record.toolName = outcome.toolName;
      record.command = outcome.command;
      record.arguments = outcome.command?.arguments;
      record.result = outcome.result;
      record.memory = outcome.memoryEntry;

      const verification = await run.verify(step);
      record.verification = verification;
      collect();
      if (verification?.stop_signal) {
        stopReason = 'verifier_stop';
        break;
      }
    }

    const answer = await run.generate();
    if (answer === undefined) stopReason = 'error';
    run.end(stopReason);
    const result: SolveResult = {
      question,
      finalAnswer: answer?.finalAnswer ?? '',
      answerText: answer?.answerText ?? '',
      ...(run.analysis ? { analysis: run.analysis } : {}),
      steps,
      memory: run.memory.getActions(),
      stopReason,
      timings: run.timings,
      usage: run.usage,
      errors: run.errors,
    };
    if (run.llmCallsSucceeded === 0 && (options.throwOnError ?? true)) {
      throw new SolveFailedError(result);
    }
    return result;
  }
}
