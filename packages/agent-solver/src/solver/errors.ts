import { FlowGrpoError, type FlowGrpoErrorOptions } from '@flowgrpo/core';
import type { RoleError, SolverRole } from './events.js';
import type { SolveResult } from './flow-solver.js';

/** The trainable planner's reply is not a NextStep object (recorded, never thrown out of a rollout). */
export class PlannerParseError extends FlowGrpoError {
  static override readonly code = 'PLANNER_PARSE_ERROR';
}

/**
 * No LLM call of a solve succeeded (a dead or wrong server, a bad key or model name): thrown by
 * `FlowSolver.solve` instead of resolving with an empty answer. `errors` lists each failed role
 * call in order; `result` is the partial result `solve(q, { throwOnError: false })` resolves with.
 */
export class SolveFailedError extends FlowGrpoError {
  static override readonly code = 'SOLVE_FAILED';
  readonly errors: readonly RoleError[];
  readonly result: SolveResult;
  constructor(result: SolveResult, options?: FlowGrpoErrorOptions) {
    const llm = result.errors.filter((e) => e.role !== 'tools');
    const roles = [...new Set(llm.map((e) => e.role))].join(', ');
    const reasons = [...new Set(llm.map((e) => `${e.message} [${e.code}]`))].join('; ');
    super(`every LLM call of the solve failed (${roles}): ${reasons}`, options);
    this.errors = result.errors;
    this.result = result;
  }

  /** The failures of one role, e.g. `byRole('planner')`. */
  byRole(role: SolverRole | 'tools'): RoleError[] {
    return this.errors.filter((e) => e.role === role);
  }
}
