import { statSync } from 'node:fs';
import { join } from 'node:path';
import type { Trajectory } from '@flowgrpo/core';
import { displayAnswer } from './final-answer.js';
import type { RunReader } from './run-reader.js';
import type { TokenizerTried } from './run-tokenizer.js';
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
  /** The final answer without tag fragments (final-answer.ts). */
  answer: string;
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
    answer: displayAnswer(t.finalAnswer).answer,
    reward: finite(t.reward),
    advantage: finite(t.advantage),
    stopReason: t.stopReason,
    error: trajectoryError(t) ?? null,
    roles: trajectoryRoles(t),
    turns: t.turns?.length ?? t.segments?.length ?? 0,
  };
}

/** What shows the run's tokens as text: the found tokenizer's path, or every place looked in. */
export type TokenizerNote = { path: string; from: string } | { missing: TokenizerTried[] };

export class RunCache {
  readonly #steps = new Map<number, { mtimeMs: number; trajectories: Trajectory[] }>();
  #pieces: { checkpoint: string | undefined; pieces: TokenPieces; note: TokenizerNote } | undefined;

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

  /**
   * Token id → text from the run's tokenizer (run-tokenizer.ts), and which one it is. A found one
   * is kept until a newer checkpoint appears; while none is found, every call looks again.
   */
  pieces(): { pieces: TokenPieces; note: TokenizerNote } {
    const newest = this.reader.checkpoints().at(-1);
    if (this.#pieces && this.#pieces.checkpoint === newest) return this.#pieces;
    const { found, tried } = this.reader.tokenizer();
    const result = found
      ? { pieces: tokenPieces(found.json), note: { path: found.path, from: found.from } }
      : { pieces: tokenPieces(undefined), note: { missing: tried } };
    if (found) this.#pieces = { checkpoint: newest, ...result };
    return result;
  }
}
