import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { Trajectory } from '@flowgrpo/core';
import { FileNotFoundError, NotADirectoryError, readTrajectoriesParquet } from '@flowgrpo/core';
import { type MetricsLines, parseMetricsLines } from './metrics-lines.js';
import { findRunTokenizer, type TokenizerLookup } from './run-tokenizer.js';

// Reads a run directory as any trainer writes it (the trainer's docs/trainers.md, "The output_dir"):
// config.json, metrics.jsonl, rollouts/step-<n>.parquet and checkpoint-<n>/. Only reads — the
// viewer runs beside a trainer that is still writing, so a metrics line without its newline yet
// (the trainer mid-append) is left for the next read, and a rollouts file still being written (the
// writer's *.tmp) is not listed.

export interface RolloutFile {
  step: number;
  /** Path relative to the run directory. */
  file: string;
}

const ROLLOUT_FILE = /^step-(\d+)\.parquet$/;

export class RunReader {
  constructor(readonly dir: string) {
    if (!existsSync(dir))
      throw new FileNotFoundError(dir, { hint: 'give the output_dir of a training run' });
    if (!statSync(dir).isDirectory())
      throw new NotADirectoryError(`${dir} is a file, not a run directory`, { path: dir });
  }

  /** config.json as the trainer wrote it, or undefined before it has (or when it is no object). */
  config(): Record<string, unknown> | undefined {
    try {
      const config: unknown = JSON.parse(readFileSync(join(this.dir, 'config.json'), 'utf8'));
      return typeof config === 'object' && config !== null && !Array.isArray(config)
        ? (config as Record<string, unknown>)
        : undefined;
    } catch {
      return undefined;
    }
  }

  /**
   * metrics.jsonl's complete lines (each ending in a newline) as records, with how many were no
   * record (metrics-lines.ts). A line being appended right now has no newline yet and is read on
   * the next call.
   */
  metrics(): MetricsLines {
    let text: string;
    try {
      text = readFileSync(join(this.dir, 'metrics.jsonl'), 'utf8');
    } catch {
      return { records: [], skipped: 0 };
    }
    return parseMetricsLines(text.slice(0, text.lastIndexOf('\n') + 1));
  }

  /** The rollouts files written so far, by step. */
  rollouts(): RolloutFile[] {
    let names: string[];
    try {
      names = readdirSync(join(this.dir, 'rollouts'));
    } catch {
      return [];
    }
    return names
      .map((n) => ({ m: ROLLOUT_FILE.exec(n), n }))
      .filter((x) => x.m !== null)
      .map((x) => ({ step: Number(x.m![1]), file: `rollouts/${x.n}` }))
      .sort((a, b) => a.step - b.step);
  }

  /** The trajectories of one step, or undefined when the run has no rollouts file for it. */
  async trajectories(step: number): Promise<Trajectory[] | undefined> {
    const f = this.rollouts().find((r) => r.step === step);
    return f ? readTrajectoriesParquet(join(this.dir, f.file)) : undefined;
  }

  /** checkpoint-<n> folders, oldest first. */
  checkpoints(): string[] {
    let names: string[];
    try {
      names = readdirSync(this.dir);
    } catch {
      return [];
    }
    return names
      .filter((n) => /^checkpoint-\d+$/.test(n))
      .sort((a, b) => Number(a.slice(11)) - Number(b.slice(11)));
  }

  /** The tokenizer.json that shows this run's tokens as text, and where else was looked. */
  tokenizer(): TokenizerLookup {
    return findRunTokenizer(this.dir, this.config(), this.checkpoints());
  }
}
