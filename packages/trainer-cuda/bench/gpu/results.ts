// results.json of a GPU measurement (scripts/gpu/run.sh): one object, rewritten after every step,
// so a step that hangs or crashes loses only itself. run.sh runs each step as its own process
// with a time limit; the step writes its figures to a JSON file of its own, and `record` merges
// that file (or, when the step wrote none, its exit status and the end of its log) into
// results.json under the step's name, with the GPU memory sampled while it ran.

import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';

export const RESULTS_FORMAT = 'flowgrpo-gpu-measurement';

export interface GpuMemory {
  /** Most device memory in use while the step ran (nvidia-smi memory.used, MiB). */
  peakMiB: number;
  /** In use just before the step started (other processes, the driver). */
  baselineMiB: number;
  samples: number;
}

export interface StepRecord {
  ok: boolean;
  /** Wall-clock seconds of the step's process. */
  seconds: number;
  /** Why the step failed or was skipped (a skip is ok: false with `skipped`). */
  error?: string;
  skipped?: string;
  gpuMemory?: GpuMemory;
  [figure: string]: unknown;
}

export interface Results {
  format: typeof RESULTS_FORMAT;
  version: 1;
  mode: 'gpu' | 'cpu-smoke';
  startedAt: string;
  updatedAt: string;
  steps: Record<string, StepRecord>;
}

function writeAtomically(path: string, value: unknown): void {
  const tmp = `${path}.tmp-${process.pid}`;
  writeFileSync(tmp, `${JSON.stringify(value, null, 2)}\n`);
  renameSync(tmp, path);
}

export function initResults(path: string, mode: Results['mode']): void {
  const now = new Date().toISOString();
  writeAtomically(path, {
    format: RESULTS_FORMAT,
    version: 1,
    mode,
    startedAt: now,
    updatedAt: now,
    steps: {},
  } satisfies Results);
}

export function readResults(path: string): Results {
  return JSON.parse(readFileSync(path, 'utf8')) as Results;
}

/**
 * Peak and baseline of the sampler's `epochMs MiB` lines over [start, end]; undefined without
 * samples (no nvidia-smi: the CPU smoke run).
 */
export function gpuMemoryDuring(
  samplesFile: string,
  startMs: number,
  endMs: number,
): GpuMemory | undefined {
  if (!existsSync(samplesFile)) return undefined;
  let baseline: number | undefined;
  let peak = Number.NEGATIVE_INFINITY;
  let n = 0;
  for (const line of readFileSync(samplesFile, 'utf8').split('\n')) {
    const [t, mib] = line.trim().split(/\s+/).map(Number);
    if (!Number.isFinite(t) || !Number.isFinite(mib)) continue;
    if (t! < startMs) baseline = mib;
    else if (t! <= endMs) {
      peak = Math.max(peak, mib!);
      n++;
    }
  }
  if (n === 0) return undefined;
  return { peakMiB: peak, baselineMiB: baseline ?? peak, samples: n };
}

/** Merges one step's outcome into results.json. */
export function recordStep(
  resultsPath: string,
  step: {
    name: string;
    outFile: string;
    exitCode: number;
    startMs: number;
    endMs: number;
    logTail: string;
    gpuSamples?: string;
  },
): StepRecord {
  const seconds = Math.round(step.endMs - step.startMs) / 1000;
  let record: StepRecord;
  let figures: Record<string, unknown> | undefined;
  try {
    figures = JSON.parse(readFileSync(step.outFile, 'utf8')) as Record<string, unknown>;
  } catch {
    figures = undefined;
  }
  if (figures) {
    record = { ok: false, ...figures, seconds } as StepRecord;
    if (step.exitCode !== 0 && record.ok) {
      record.ok = false;
      record.error = `exit code ${step.exitCode} after writing its figures`;
    }
  } else {
    const how =
      step.exitCode === 124 || step.exitCode === 137
        ? `timed out (exit code ${step.exitCode})`
        : `exit code ${step.exitCode}`;
    record = {
      ok: false,
      seconds,
      error: `the step wrote no results: ${how}; its log ends: ${step.logTail.slice(-1500)}`,
    };
  }
  const mem = step.gpuSamples
    ? gpuMemoryDuring(step.gpuSamples, step.startMs, step.endMs)
    : undefined;
  if (mem) record.gpuMemory = mem;
  const results = readResults(resultsPath);
  results.steps[step.name] = record;
  results.updatedAt = new Date().toISOString();
  writeAtomically(resultsPath, results);
  return record;
}

/** Writes a step's own figures (ok unless the step says otherwise). */
export function writeStep(outFile: string, figures: Record<string, unknown>): void {
  writeAtomically(outFile, { ok: true, ...figures });
}
