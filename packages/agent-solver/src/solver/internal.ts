import { randomUUID } from 'node:crypto';
import { FlowGrpoError } from '@flowgrpo/core';
import {
  type Tool,
  ToolRegistry,
  type Workspace,
  type WorkspaceOptions,
  withWorkspace,
} from '@flowgrpo/tools';
import type { RolloutContext } from '../rollout/rollout-agent.js';

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

/** The given registry, or a new one over the listed tools. */
export function toRegistry(tools: ToolRegistry | readonly Tool[]): ToolRegistry {
  return tools instanceof ToolRegistry ? tools : new ToolRegistry(tools);
}

/**
 * Runs `fn` in a fresh workspace, removed afterwards, when `option` asks for one (`true` or the
 * workspace's options); otherwise without a workspace.
 */
export function inOptionalWorkspace<T>(
  option: boolean | WorkspaceOptions | undefined,
  fn: (workspace: Workspace | undefined) => Promise<T>,
): Promise<T> {
  if (!option) return fn(undefined);
  return withWorkspace(fn, option === true ? undefined : option);
}

/** The sampling seed of a rollout's `call`-th policy call (1-based), when the rollout has a seed. */
export function callSeed(context: RolloutContext, call: number): { seed?: number } {
  return context.seed === undefined ? {} : { seed: context.seed * 1000 + call };
}

/** The identity fields a recorded trajectory starts with; a missing queryId is made up. */
export function trajectoryHeader(
  question: string,
  context: RolloutContext,
): { queryId: string; groupId: string; question: string; groundTruth?: string } {
  const queryId = context.queryId ?? `q-${randomUUID()}`;
  return {
    queryId,
    groupId: context.groupId ?? queryId,
    question,
    ...(context.groundTruth === undefined ? {} : { groundTruth: context.groundTruth }),
  };
}
