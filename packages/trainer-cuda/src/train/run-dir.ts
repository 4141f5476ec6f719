import {
  appendFileSync,
  existsSync,
  mkdirSync,
  readFileSync,
  renameSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { type Trajectory, writeTrajectoriesParquet } from '@flowgrpo/core';

// The run directory (DESIGN.md §5.9): config.json, metrics.jsonl (one JSON line per logged step,
// TRL's metric names plus flowgrpo's), rollouts/step-<n>.parquet (one row per turn), eval/*.json,
// checkpoint-<n>/ (checkpoint.ts) and report.html (report.ts).

export const METRICS_FILE = 'metrics.jsonl';
export const CONFIG_FILE = 'config.json';

export type MetricsRecord = Record<string, number | string>;

export class RunDirectory {
  constructor(readonly dir: string) {
    mkdirSync(dir, { recursive: true });
  }

  writeJson(name: string, value: unknown): string {
    const path = join(this.dir, name);
    mkdirSync(join(path, '..'), { recursive: true });
    const tmp = `${path}.tmp-${process.pid}`;
    writeFileSync(tmp, `${JSON.stringify(value, null, 2)}\n`);
    renameSync(tmp, path);
    return path;
  }

  /** Appends one record to metrics.jsonl. */
  logMetrics(record: MetricsRecord): void {
    appendFileSync(join(this.dir, METRICS_FILE), `${JSON.stringify(record)}\n`);
  }

  /** Every record of metrics.jsonl (a torn last line from a kill is skipped). */
  readMetrics(): MetricsRecord[] {
    const path = join(this.dir, METRICS_FILE);
    if (!existsSync(path)) return [];
    const out: MetricsRecord[] = [];
    for (const line of readFileSync(path, 'utf8').split('\n')) {
      if (!line.trim()) continue;
      try {
        out.push(JSON.parse(line) as MetricsRecord);
      } catch {
        // a line cut by a kill mid-write
      }
    }
    return out;
  }

  /** Keeps the records of steps ≤ `step` (resume: the steps after it are logged again). */
  truncateMetrics(step: number): void {
    const kept = this.readMetrics().filter((r) => Number(r.step) <= step);
    const path = join(this.dir, METRICS_FILE);
    const tmp = `${path}.tmp-${process.pid}`;
    writeFileSync(tmp, kept.map((r) => `${JSON.stringify(r)}\n`).join(''));
    renameSync(tmp, path);
  }

  /** rollouts/step-<n>.parquet: the batch's trajectories, one row per turn. */
  async writeRollouts(step: number, trajectories: readonly Trajectory[]): Promise<string> {
    const path = join(this.dir, 'rollouts', `step-${String(step).padStart(6, '0')}.parquet`);
    mkdirSync(join(this.dir, 'rollouts'), { recursive: true });
    await writeTrajectoriesParquet(path, trajectories);
    return path;
  }
}
