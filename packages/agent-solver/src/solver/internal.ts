import { FlowGrpoError } from '@flowgrpo/core';

// Small helpers shared by the solver, the rollout recorder and the tag agent (not public API).

export function errorCode(error: unknown): string {
  if (FlowGrpoError.isInstance(error)) return error.code;
  if (error instanceof Error) return error.name;
  return 'UNKNOWN_ERROR';
}

/** Milliseconds rounded to microseconds. */
export function round(ms: number): number {
  return Math.round(ms * 1000) / 1000;
}

/** Text of a memory value, for logs and Turn.toolResult. */
export function valueText(value: unknown): string {
  return typeof value === 'string' ? value : JSON.stringify(value);
}
