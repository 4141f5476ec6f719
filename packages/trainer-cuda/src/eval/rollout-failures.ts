import { FlowGrpoError, type Trajectory } from '@flowgrpo/core';

// Failed rollouts, counted by error code, so that a batch whose every rollout failed (a prompt
// longer than the graphs' positions, a device that cannot decode) says so on the step's line and
// in metrics.jsonl instead of passing for "nothing to train on", and a run of such steps stops.

/** One kind of failure in a batch: how many rollouts, and the first one's words. */
export interface RolloutFailureKind {
  code: string;
  count: number;
  message: string;
  hint: string | undefined;
}

export interface RolloutFailures {
  failed: number;
  total: number;
  /** By code, most frequent first. */
  kinds: RolloutFailureKind[];
}

interface RecordedError {
  role?: string;
  code?: string;
  message?: string;
  hint?: string;
}

/**
 * The error that ended a failed rollout (stopReason 'error'): the rollout's own (an agent that
 * threw), else the last role error the agent recorded (a planner call that failed).
 */
export function rolloutFailure(
  t: Trajectory,
): { code: string; message: string; hint: string | undefined } | undefined {
  if (t.stopReason !== 'error') return undefined;
  const errors = ((t.metadata as { errors?: RecordedError[] } | undefined)?.errors ?? []).filter(
    (e) => typeof e === 'object' && e !== null,
  );
  const e = errors.find((x) => x.role === 'rollout') ?? errors.at(-1);
  return {
    code: typeof e?.code === 'string' && e.code ? e.code : 'ROLLOUT_ERROR',
    message: typeof e?.message === 'string' ? e.message : 'the rollout ended with an error',
    hint: typeof e?.hint === 'string' ? e.hint : undefined,
  };
}

/** What a thrown error says about a failed rollout (a gateway agent program's failure). */
export function thrownFailure(error: unknown): {
  code: string;
  message: string;
  hint: string | undefined;
} {
  const e = error instanceof Error ? error : new Error(String(error));
  return {
    code:
      (e as { code?: unknown }).code === undefined
        ? e.name
        : String((e as { code?: unknown }).code),
    message: e.message,
    hint: FlowGrpoError.isInstance(e) ? e.hint : undefined,
  };
}

export function countRolloutFailures(trajectories: readonly Trajectory[]): RolloutFailures {
  return tallyFailures(trajectories.map(rolloutFailure));
}

/** Failures by code; one entry per rollout, undefined for those that did not fail. */
export function tallyFailures(
  rollouts: readonly ({ code: string; message: string; hint: string | undefined } | undefined)[],
): RolloutFailures {
  const kinds = new Map<string, RolloutFailureKind>();
  let failed = 0;
  for (const f of rollouts) {
    if (!f) continue;
    failed++;
    const k = kinds.get(f.code);
    if (k) k.count++;
    else kinds.set(f.code, { ...f, count: 1 });
  }
  return {
    failed,
    total: rollouts.length,
    kinds: [...kinds.values()].sort((a, b) => b.count - a.count),
  };
}

/** `rollouts/failed` and `rollouts/failed/<CODE>` for metrics.jsonl. */
export function rolloutFailureMetrics(f: RolloutFailures): Record<string, number> {
  return {
    'rollouts/failed': f.failed,
    ...Object.fromEntries(f.kinds.map((k) => [`rollouts/failed/${k.code}`, k.count])),
  };
}

/**
 * "8/8 rollouts failed: CONTEXT_LENGTH_EXCEEDED — prompt 0 (972 tokens) + 32 … : raise
 * max_positions …", one clause per code (its first message, and its fix when known).
 */
export function describeRolloutFailures(f: RolloutFailures): string {
  const kinds = f.kinds.map(
    (k) =>
      `${k.code}${f.kinds.length > 1 ? ` ×${k.count}` : ''} — ${oneLine(k.message)}${k.hint ? `: ${oneLine(k.hint)}` : ''}`,
  );
  return `${f.failed}/${f.total} rollouts failed: ${kinds.join('; ')}`;
}

function oneLine(s: string): string {
  const line = s.replace(/\s+/g, ' ').trim();
  return line.length > 300 ? `${line.slice(0, 299)}…` : line;
}

/**
 * Every rollout of several steps in a row (or of an evaluation) failed. The fix is the first
 * failure's own when it knows one, else `options.hint` (where the failed rollouts can be read).
 */
export class RolloutsFailedError extends FlowGrpoError {
  static override readonly code = 'ROLLOUTS_FAILED';
  readonly failures: RolloutFailures;
  constructor(what: string, failures: RolloutFailures, options: { hint?: string } = {}) {
    const first = failures.kinds[0];
    super(`${what}: ${describeRolloutFailures(failures)}`, {
      hint:
        first?.hint ??
        options.hint ??
        'fix the cause above (report.html lists each failed rollout with its error; rollouts/*.parquet holds them all)',
    });
    this.failures = failures;
  }
}
