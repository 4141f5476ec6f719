import type { RolloutAgent } from '@flowgrpo/agent';
import {
  expectAbortListeners,
  FlowGrpoError,
  type SampleRow,
  type Trajectory,
} from '@flowgrpo/core';
import { type RewardFunction, rewardInputFromTrajectory } from '@flowgrpo/reward';
import { scoreTrajectory } from './checked-reward.js';
import { mapConcurrent } from './map-concurrent.js';
import { countRolloutFailures, RolloutsFailedError } from './rollout-failures.js';

// Evaluation of a policy inside its agent on a dataset: each question once, the reward function
// scoring the final answer. Reports what the seeds' tables report — accuracy (with a 95% Wilson
// interval), format compliance, mean turns, tool calls per trajectory, tool error rate, mean
// completion length, time — overall and per source, and renders several policies side by side.

export interface EvaluateOptions {
  /** The agent around the policy under test (greedy sampling for a deterministic score). */
  agent: RolloutAgent;
  dataset: readonly SampleRow[];
  reward: RewardFunction<object>;
  /** Rollouts at once (default 32). */
  concurrency?: number;
  /** A reward at or above this counts as correct (default 1). */
  successThreshold?: number;
  /** Rollout seeds are seed + index (default 0). */
  seed?: number;
  /** Label of the policy in tables (default 'policy'). */
  name?: string;
  signal?: AbortSignal;
  /** Called after each finished rollout with the count so far. */
  onProgress?: (done: number, total: number, correct: number) => void;
  /** Keep the trajectories in the result (default false). */
  keepTrajectories?: boolean;
}

export interface EvalSummary {
  n: number;
  accuracy: number;
  /** Wilson score interval at 95%. */
  accuracy_ci95: [number, number];
  reward_mean: number;
  /** Trajectories whose every planner turn parsed and that ended with an answer. */
  format_compliance: number;
  turns_mean: number;
  tool_calls_per_trajectory: number;
  /** Failed tool calls / tool calls. */
  tool_error_rate: number;
  /** Sampled tokens per trajectory. */
  completion_length_mean: number;
}

export interface EvalResult extends EvalSummary {
  name: string;
  time_s: number;
  /** Rollouts that ended in an error (counted as wrong), in all and per error code. */
  rollouts_failed?: number;
  rollouts_failed_by_code?: Record<string, number>;
  per_source: Record<string, EvalSummary>;
  trajectories?: Trajectory[];
}

/** Wilson score interval for k successes in n trials at z = 1.96. */
export function wilsonInterval(k: number, n: number, z = 1.959964): [number, number] {
  if (n === 0) return [0, 0];
  const p = k / n;
  const d = 1 + (z * z) / n;
  const c = (p + (z * z) / (2 * n)) / d;
  const h = (z * Math.sqrt((p * (1 - p)) / n + (z * z) / (4 * n * n))) / d;
  return [Math.max(0, c - h), Math.min(1, c + h)];
}

interface Scored {
  trajectory: Trajectory;
  reward: number;
  source: string;
}

// What a trajectory did, whichever agent recorded it: Flow rollouts record planner turns (a tool
// per turn, tool failures in metadata.errors); the tag agent records token segments and says in
// its metadata how many turns it took and which tool calls succeeded.
interface TagAgentMetadata {
  turns?: number;
  toolCalls?: { ok: boolean }[];
  errors?: { role: string }[];
}

/** eval/* metrics of an evaluation, for metrics.jsonl (a line of its own beside the step's). */
export function evalMetrics(e: EvalResult): Record<string, number> {
  return {
    'eval/accuracy': e.accuracy,
    'eval/accuracy_ci_low': e.accuracy_ci95[0],
    'eval/accuracy_ci_high': e.accuracy_ci95[1],
    'eval/reward': e.reward_mean,
    'eval/format_compliance': e.format_compliance,
    'eval/turns_mean': e.turns_mean,
    'eval/tool_calls_per_trajectory': e.tool_calls_per_trajectory,
    'eval/tool_error_rate': e.tool_error_rate,
    'eval/completion_length': e.completion_length_mean,
    'eval/time_s': e.time_s,
  };
}

/** Policy turns of a trajectory. */
export function trajectoryTurns(t: Trajectory): number {
  if (t.turns) return t.turns.length;
  const tagTurns = (t.metadata as TagAgentMetadata | undefined)?.turns;
  if (tagTurns !== undefined) return tagTurns;
  // A recorded single-chain rollout (the gateway's segments): one turn per sampled action.
  return (t.segments ?? []).filter((s) => s.kind === 'action').length;
}

/** Tool calls of a trajectory. */
export function trajectoryToolCalls(t: Trajectory): number {
  if (t.turns)
    return t.turns.filter((u) => u.toolName !== undefined && u.toolName !== 'None').length;
  return (t.metadata as TagAgentMetadata | undefined)?.toolCalls?.length ?? 0;
}

/** Failed tool calls of a trajectory. */
export function trajectoryToolErrors(t: Trajectory): number {
  const m = t.metadata as TagAgentMetadata | undefined;
  if (!t.turns && m?.toolCalls) return m.toolCalls.filter((c) => !c.ok).length;
  return (m?.errors ?? []).filter((e) => e.role === 'tools').length;
}

const toolCalls = trajectoryToolCalls;
const toolErrors = trajectoryToolErrors;

/**
 * Every planner turn parsed and the rollout ended with an answer (the tables' "format"): the
 * policy answered, or the verifier stopped the run. A run cut at max_turns or max_tokens, or one
 * that failed, is not well-formed, whatever a final-answer step made of it afterwards — an
 * untrained tag agent that never writes <answer> would otherwise count as 100% format.
 */
export function formatCompliant(t: Trajectory): boolean {
  const parsed = (t.turns ?? []).every((u) => u.parsed !== false);
  return parsed && (t.stopReason === 'answer' || t.stopReason === 'verifier_stop');
}

/** Sampled tokens of a trajectory (its turns' actions, or its trainable segments). */
export function trajectoryCompletionLength(t: Trajectory): number {
  if (t.turns) return t.turns.reduce((s, u) => s + u.actionTokens.length, 0);
  return (t.segments ?? []).filter((s) => s.trainable).reduce((s, g) => s + g.tokens.length, 0);
}

function summarize(items: readonly Scored[], threshold: number): EvalSummary {
  const n = items.length;
  const mean = (f: (s: Scored) => number) =>
    n === 0 ? 0 : items.reduce((a, s) => a + f(s), 0) / n;
  const correct = items.filter((s) => s.reward >= threshold).length;
  const calls = items.reduce((a, s) => a + toolCalls(s.trajectory), 0);
  const errors = items.reduce((a, s) => a + toolErrors(s.trajectory), 0);
  return {
    n,
    accuracy: n === 0 ? 0 : correct / n,
    accuracy_ci95: wilsonInterval(correct, n),
    reward_mean: mean((s) => s.reward),
    format_compliance: mean((s) => (formatCompliant(s.trajectory) ? 1 : 0)),
    turns_mean: mean((s) => trajectoryTurns(s.trajectory)),
    tool_calls_per_trajectory: mean((s) => toolCalls(s.trajectory)),
    tool_error_rate: calls === 0 ? 0 : errors / calls,
    completion_length_mean: mean((s) => trajectoryCompletionLength(s.trajectory)),
  };
}

/**
 * Runs the agent once per row and scores it. A failed rollout counts as wrong and is counted by
 * its error code; when every rollout failed there is no score to report: RolloutsFailedError.
 */
export async function evaluate(o: EvaluateOptions): Promise<EvalResult> {
  const start = performance.now();
  const threshold = o.successThreshold ?? 1;
  let done = 0;
  let correct = 0;
  const width = Math.max(1, Math.min(o.concurrency ?? 32, o.dataset.length));
  expectAbortListeners(o.signal, 4 * width);
  const results = await mapConcurrent(o.dataset, width, async (row, i): Promise<Scored> => {
    o.signal?.throwIfAborted();
    const trajectory = await runOne(o.agent, row, (o.seed ?? 0) + i, o.signal);
    const reward = (
      await scoreTrajectory(o.reward, rewardInputFromTrajectory(trajectory), trajectory)
    ).score;
    // The trajectory carries its score like a training rollout's: report.html, eval --out and
    // the rollouts Parquet read it there (without it a correct answer showed as "reward 0").
    trajectory.reward = reward;
    done++;
    if (reward >= threshold) correct++;
    o.onProgress?.(done, o.dataset.length, correct);
    return { trajectory, reward, source: row.source };
  });
  const failures = countRolloutFailures(results.map((r) => r.trajectory));
  if (failures.total > 0 && failures.failed === failures.total)
    // An evaluation writes no rollouts/*.parquet and no results: the message is the account.
    throw new RolloutsFailedError(`evaluation '${o.name ?? 'policy'}'`, failures, {
      hint: 'fix the cause named above (the first message of each error code), then evaluate again',
    });
  const perSource: Record<string, EvalSummary> = {};
  for (const source of [...new Set(results.map((r) => r.source))].sort())
    perSource[source] = summarize(
      results.filter((r) => r.source === source),
      threshold,
    );
  return {
    name: o.name ?? 'policy',
    ...summarize(results, threshold),
    time_s: (performance.now() - start) / 1000,
    rollouts_failed: failures.failed,
    rollouts_failed_by_code: Object.fromEntries(failures.kinds.map((k) => [k.code, k.count])),
    per_source: perSource,
    ...(o.keepTrajectories && { trajectories: results.map((r) => r.trajectory) }),
  };
}

/** One rollout of a dataset row; an agent that throws gives an 'error' trajectory. */
export async function runOne(
  agent: RolloutAgent,
  row: SampleRow,
  seed: number,
  signal?: AbortSignal,
  ids: { queryId?: string; groupId?: string; index?: number } = {},
): Promise<Trajectory> {
  const queryId = ids.queryId ?? String(row.id);
  const groupId = ids.groupId ?? queryId;
  try {
    return await agent.run(row.question, {
      queryId,
      groupId,
      groundTruth: row.result,
      seed,
      ...(ids.index !== undefined && { index: ids.index }),
      ...(signal && { signal }),
    });
  } catch (e) {
    if (signal?.aborted) throw e;
    const error = e instanceof Error ? e : new Error(String(e));
    return {
      queryId,
      groupId,
      question: row.question,
      groundTruth: row.result,
      turns: [],
      finalAnswer: '',
      stopReason: 'error',
      timings: {},
      metadata: {
        rolloutError: { name: error.name, message: error.message },
        errors: [
          {
            role: 'rollout',
            code: (error as { code?: string }).code ?? error.name,
            message: error.message,
            ...(FlowGrpoError.isInstance(error) && error.hint ? { hint: error.hint } : {}),
          },
        ],
      },
    };
  }
}

/** Base / SFT / GRPO side by side: a text table (for a terminal) and the rows as JSON. */
export function comparisonTable(results: readonly EvalResult[]): string {
  const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
  const header = [
    'policy',
    'accuracy [95% CI]',
    'format',
    'turns',
    'tool calls',
    'tool errors',
    'tokens',
    'time',
  ];
  const rows = results.map((r) => [
    r.name,
    `${pct(r.accuracy)} [${(100 * r.accuracy_ci95[0]).toFixed(1)}, ${(100 * r.accuracy_ci95[1]).toFixed(1)}]`,
    pct(r.format_compliance),
    r.turns_mean.toFixed(2),
    r.tool_calls_per_trajectory.toFixed(2),
    pct(r.tool_error_rate),
    r.completion_length_mean.toFixed(1),
    `${r.time_s.toFixed(1)} s`,
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n');
}
