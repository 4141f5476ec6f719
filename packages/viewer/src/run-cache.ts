import { statSync } from 'node:fs';
import { join } from 'node:path';
import type { Trajectory } from '@flowgrpo/core';
import type { RunReader } from './run-reader.js';
import { type TokenPieces, tokenPieces } from './token-pieces.js';
import { trajectoryError, trajectoryRoles } from './trajectory-html.js';

// The decoded rollouts of a run, kept while their files are unchanged: a rollouts file is written
// once per step (renamed into place whole), so a step is decoded once however often the page
// asks; a file rewritten by a resumed run has a new mtime and is decoded again.

/** What the rollouts list shows of one trajectory. */
export interface TrajectorySummary {
  index: number;
  queryId: string;
  groupId: string;
  question: string | undefined;
  reward: number | null;
  advantage: number | null;
  stopReason: string;
  error: { code: string; message: string } | null;
  roles: string[];
  turns: number;
}

const finite = (x: number | undefined) => (x !== undefined && Number.isFinite(x) ? x : null);

export function summarize(t: Trajectory, index: number): TrajectorySummary {
  return {
    index,
    queryId: t.queryId,
    groupId: t.groupId,
    question: t.question,
    reward: finite(t.reward),
    advantage: finite(t.advantage),
    stopReason: t.stopReason,
    error: trajectoryError(t) ?? null,
    roles: trajectoryRoles(t),
    turns: t.turns?.length ?? t.segments?.length ?? 0,
  };
}

export class RunCache {
  readonly #steps = new Map<number, { mtimeMs: number; trajectories: Trajectory[] }>();
  #pieces: { checkpoint: string | undefined; pieces: TokenPieces } | undefined;

  constructor(readonly reader: RunReader) {}

  /** The trajectories of `step` (undefined when the run has no rollouts for it). */
  async step(step: number): Promise<Trajectory[] | undefined> {
    const f = this.reader.rollouts().find((r) => r.step === step);
    if (!f) return undefined;
    const mtimeMs = statSync(join(this.reader.dir, f.file)).mtimeMs;
    const hit = this.#steps.get(step);
    if (hit && hit.mtimeMs === mtimeMs) return hit.trajectories;
    const trajectories = (await this.reader.trajectories(step)) ?? [];
    this.#steps.set(step, { mtimeMs, trajectories });
    return trajectories;
  }

  /** Token id → text from the newest checkpoint's tokenizer (re-read when a newer one appears). */
  pieces(): TokenPieces {
    const newest = this.reader.checkpoints().at(-1);
    if (!this.#pieces || this.#pieces.checkpoint !== newest)
      this.#pieces = { checkpoint: newest, pieces: tokenPieces(this.reader.tokenizerJson()) };
    return this.#pieces.pieces;
  }
}
