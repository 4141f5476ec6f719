import { randomUUID } from 'node:crypto';
import type { Group, Trajectory } from '@flowgrpo/core';
import { Semaphore } from '../engines/semaphore.js';

/** Per-rollout identifiers and controls. */
export interface RolloutContext {
  queryId?: string;
  groupId?: string;
  groundTruth?: string;
  signal?: AbortSignal;
  /** Sampling seed of this rollout; policy calls derive their seeds from it. */
  seed?: number;
  /** Position of this rollout in its group. */
  index?: number;
}

/** Anything that turns a question into one recorded trajectory (FlowRollout, TagAgent). */
export interface RolloutAgent {
  run(question: string, context?: RolloutContext): Promise<Trajectory>;
}

export interface RolloutGroupOptions {
  agent: RolloutAgent;
  /** Rollouts running at once (default: all G). */
  concurrency?: number;
  queryId?: string;
  groupId?: string;
  groundTruth?: string;
  /** Rollout i gets seed + i. */
  seed?: number;
  signal?: AbortSignal;
}

/**
 * G rollouts of one question (a GRPO group), at most `concurrency` at a time. Trajectories come
 * back in index order whatever order they finish in. An agent's own failures are recorded in its
 * trajectories; only a thrown error (an abort) rejects the group.
 */
export async function rolloutGroup(
  question: string,
  G: number,
  options: RolloutGroupOptions,
): Promise<Group> {
  if (!Number.isInteger(G) || G < 1) throw new RangeError(`G must be a positive integer, got ${G}`);
  const queryId = options.queryId ?? `q-${randomUUID()}`;
  const groupId = options.groupId ?? `${queryId}/group-${randomUUID().slice(0, 8)}`;
  const semaphore = new Semaphore(Math.max(1, Math.min(G, options.concurrency ?? G)));
  const trajectories = await Promise.all(
    Array.from({ length: G }, async (_, index) => {
      const release = await semaphore.acquire(options.signal);
      try {
        return await options.agent.run(question, {
          queryId,
          groupId,
          groundTruth: options.groundTruth,
          signal: options.signal,
          index,
          ...(options.seed === undefined ? {} : { seed: options.seed + index }),
        });
      } finally {
        release();
      }
    }),
  );
  return { groupId, queryId, trajectories };
}
