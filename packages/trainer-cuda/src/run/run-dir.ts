import {
  appendFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { basename, join, relative } from 'node:path';
import { pathInside, type Trajectory, writeTrajectoriesParquet } from '@flowgrpo/core';
import { parseMetricsLines } from '@flowgrpo/viewer';
import { RunAlarms } from './run-alarms.js';
import { asRunWriteError } from './run-write-error.js';

// The run directory (packages/trainer-cuda/docs/trainers.md): config.json, metrics.jsonl (one JSON line per logged step,
// TRL's metric names plus flowgrpo's), rollouts/step-<n>.parquet (one row per turn), eval/*.json,
// checkpoint-<n>/ (checkpoint.ts) and report.html (report.ts). A write the file system refuses
// (full disk, permissions) is a RunWriteError naming the file and the last complete checkpoint.
// Every write is checked to land inside the folder on its real path: a symbolic link on the way
// (placed while the run goes on: output-dir-checks.ts refuses those there before) is refused.

export const METRICS_FILE = 'metrics.jsonl';
export const CONFIG_FILE = 'config.json';

export type MetricsRecord = Record<string, number | string>;

export class RunDirectory {
  /** Reward-integrity alarms, added to each step's record as it is appended (run-alarms.ts). */
  readonly #alarms: RunAlarms;

  constructor(
    readonly dir: string,
    options: { warn?: (line: string) => void } = {},
  ) {
    mkdirSync(dir, { recursive: true });
    this.#alarms = new RunAlarms(this, options.warn);
  }

  /**
   * `rel`'s path in the run directory, checked for a write: inside it on the real path, no
   * symbolic link on the way (SymlinkRefusedError, PathOutsideFolderError).
   */
  path(rel: string): string {
    return pathInside(this.dir, rel, 'the run');
  }

  /**
   * Runs a write of `path` (in the run directory: checked as `path()` does), turning the file
   * system's refusals into a RunWriteError.
   */
  guard<T>(path: string, write: () => T): T {
    this.path(relative(this.dir, path));
    try {
      const result = write();
      if (result instanceof Promise)
        return result.catch((e: unknown) => {
          throw asRunWriteError(e, this.dir, path);
        }) as T;
      return result;
    } catch (e) {
      throw asRunWriteError(e, this.dir, path);
    }
  }

  writeJson(name: string, value: unknown): string {
    const path = this.path(name);
    return this.guard(path, () => {
      mkdirSync(join(path, '..'), { recursive: true });
      const tmp = `${path}.tmp-${process.pid}`;
      try {
        writeFileSync(tmp, `${JSON.stringify(value, null, 2)}\n`);
      } catch (e) {
        rmSync(tmp, { force: true });
        throw e;
      }
      renameSync(tmp, path);
      return path;
    });
  }

  /**
   * Appends one record to metrics.jsonl (a line torn by a full disk is skipped when read), with
   * the alarms computed from the history so far when it is a training step's record; returns
   * the record as written.
   */
  logMetrics(record: MetricsRecord): MetricsRecord {
    const path = join(this.dir, METRICS_FILE);
    const full = this.#alarms.add(record);
    this.guard(path, () => appendFileSync(path, `${JSON.stringify(full)}\n`));
    return full;
  }

  /**
   * Every record of metrics.jsonl; a line that is none (torn by a kill, or a `null` written by
   * something else) is skipped, as the viewer and report.html skip it (@flowgrpo/viewer's
   * metrics-lines.ts).
   */
  readMetrics(): MetricsRecord[] {
    const path = join(this.dir, METRICS_FILE);
    if (!existsSync(path)) return [];
    return parseMetricsLines(readFileSync(path, 'utf8')).records;
  }

  /**
   * Keeps the records of steps ≤ `step` (resume: the steps after it are logged again). With no
   * metrics.jsonl there is nothing to keep: none is made (the first record makes it).
   */
  truncateMetrics(step: number): void {
    const path = join(this.dir, METRICS_FILE);
    this.#alarms.reset();
    if (!existsSync(path)) return;
    const kept = this.readMetrics().filter((r) => Number(r.step) <= step);
    this.guard(path, () => {
      const tmp = `${path}.tmp-${process.pid}`;
      try {
        writeFileSync(tmp, kept.map((r) => `${JSON.stringify(r)}\n`).join(''));
      } catch (e) {
        rmSync(tmp, { force: true });
        throw e;
      }
      renameSync(tmp, path);
    });
  }

  /** rollouts/step-<n>.parquet: the batch's trajectories, one row per turn. */
  async writeRollouts(step: number, trajectories: readonly Trajectory[]): Promise<string> {
    const path = join(this.dir, 'rollouts', `step-${String(step).padStart(6, '0')}.parquet`);
    return this.guard(path, async () => {
      mkdirSync(join(this.dir, 'rollouts'), { recursive: true });
      try {
        await writeTrajectoriesParquet(path, trajectories);
      } catch (e) {
        // A half-written Parquet file is unreadable; so is the writer's temporary file.
        const dir = join(this.dir, 'rollouts');
        for (const name of readdirSync(dir))
          if (
            name === basename(path) ||
            (name.startsWith(`${basename(path)}.`) && name.endsWith('.tmp'))
          )
            rmSync(join(dir, name), { force: true });
        throw e;
      }
      return path;
    });
  }
}
