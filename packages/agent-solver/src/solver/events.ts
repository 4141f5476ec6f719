import type { LLMUsage, StopReason, Turn } from '@flowgrpo/core';
import type { ToolResult } from '@flowgrpo/tools';
import type { MemoryVerification, NextStep, QueryAnalysis, ToolCommand } from './schemas.js';

/** The LLM roles of a Flow run. */
export type SolverRole = 'analyzer' | 'planner' | 'executor' | 'verifier' | 'generator';
export const SOLVER_ROLES: readonly SolverRole[] = [
  'analyzer',
  'planner',
  'executor',
  'verifier',
  'generator',
];

/** A failure inside one role (or the tool call), recorded instead of thrown. */
export interface RoleError {
  role: SolverRole | 'tools';
  /** 1-based step; absent for the analysis and the final answer. */
  step?: number;
  /** The error's FlowGrpoError code, or its name for other errors. */
  code: string;
  message: string;
}

/** Everything a Flow run reports while it runs; `onEvent` receives them in order. */
export type SolverEvent =
  | { type: 'start'; question: string; tools: string[]; maxSteps: number }
  | { type: 'analysis'; analysis: QueryAnalysis; durationMs: number; usage: LLMUsage }
  | { type: 'plan'; step: number; nextStep: NextStep; durationMs: number; usage?: LLMUsage }
  | {
      type: 'command';
      step: number;
      toolName: string;
      command: ToolCommand;
      durationMs: number;
      usage: LLMUsage;
    }
  | {
      type: 'tool_result';
      step: number;
      toolName: string;
      arguments: unknown;
      result: ToolResult;
      durationMs: number;
    }
  | {
      type: 'verification';
      step: number;
      verification: MemoryVerification;
      durationMs: number;
      usage: LLMUsage;
    }
  /** A rollout recorded a planner turn. */
  | { type: 'turn'; turn: Turn }
  | { type: 'error'; error: RoleError }
  /** The final answer: `finalAnswer` parsed out of the generator's `answerText`. */
  | {
      type: 'answer';
      finalAnswer: string;
      answerText: string;
      durationMs: number;
      usage?: LLMUsage;
    }
  | { type: 'end'; stopReason: StopReason; durationMs: number };

export type SolverEventListener = (event: SolverEvent) => void;
