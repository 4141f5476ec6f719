import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Trajectory } from '@flowgrpo/core';
import { FileNotFoundError, NotADirectoryError, readTrajectoriesParquet } from '@flowgrpo/core';

// Reads a run directory as any trainer writes it (the trainer's docs/trainers.md, "The output_dir"):
// config.json, metrics.jsonl, rollouts/step-<n>.parquet and checkpoint-<n>/. Only reads — the
// viewer runs beside a trainer that is still writing, so a metrics line without its newline yet (the trainer mid-append, or a
// kill) is left for the next read, and a rollouts file still being written (the writer's *.tmp)
// is not listed.

export type MetricsRecord = Record<string, number | string>;

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

  /** config.json as the trainer wrote it, or undefined before it has. */
  config(): Record<string, unknown> | undefined {
    try {
      return JSON.parse(readFileSync(join(this.dir, 'config.json'), 'utf8'));
    } catch {
      return undefined;
    }
  }

  /**
   * metrics.jsonl's complete lines (each ending in a newline), skipping any that is not JSON. A
   * line being appended right now has no newline yet and is read on the next call.
   */
  metrics(): MetricsRecord[] {
    let text: string;
    try {
      text = readFileSync(join(this.dir, 'metrics.jsonl'), 'utf8');
    } catch {
      return [];
    }
    const out: MetricsRecord[] = [];
    const complete = text.slice(0, text.lastIndexOf('\n') + 1);
    for (const line of complete.split('\n')) {
      if (!line.trim()) continue;
      try {
        out.push(JSON.parse(line) as MetricsRecord);
      } catch {
        // a line torn by a kill mid-write
      }
    }
    return out;
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

  /**
   * A tokenizer.json to show tokens as text: the newest checkpoint's (trainers copy it there),
   * else the one beside the model the run trains (config.json's `artifacts` folder). The only
   * file read outside the run directory, and only that one file, named by the run's own config.
   */
  tokenizerJson(): string | undefined {
    const artifacts = this.config()?.artifacts;
    const candidates = [
      ...this.checkpoints()
        .reverse()
        .map((c) => join(this.dir, c, 'tokenizer.json')),
      ...(typeof artifacts === 'string'
        ? [join(resolve(this.dir, artifacts), 'tokenizer.json')]
        : []),
    ];
    for (const p of candidates) if (existsSync(p)) return readFileSync(p, 'utf8');
    return undefined;
  }
}
