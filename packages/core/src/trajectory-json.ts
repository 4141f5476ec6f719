import { ValidationError } from './errors.js';
import {
  type Group,
  GroupSchema,
  type StopReason,
  type Trajectory,
  TrajectorySchema,
} from './trajectory.js';

// JSON forms of rollout records: typed arrays become number arrays, and non-finite floats
// (a -Infinity logprob is legitimate) become the strings 'NaN' / 'Infinity' / '-Infinity',
// which JSON.stringify would otherwise turn into null. Logprob arrays read back non-finite
// values; scalar fields (reward, advantage, timings) must be finite, as the schema requires.

export type JsonFloat = number | 'NaN' | 'Infinity' | '-Infinity';

export interface TokenSegmentJson {
  tokens: number[];
  logprobs?: JsonFloat[];
  trainable: boolean;
  kind: 'prompt' | 'action' | 'observation';
}

export interface TurnJson {
  index: number;
  promptTokens: number[];
  actionTokens: number[];
  actionLogprobs: JsonFloat[];
  promptText?: string;
  text: string;
  toolName?: string;
  toolInput?: unknown;
  toolResult?: string;
  parsed: boolean;
  advantage?: JsonFloat;
}

export interface TrajectoryJson {
  queryId: string;
  groupId: string;
  turns?: TurnJson[];
  segments?: TokenSegmentJson[];
  question?: string;
  groundTruth?: string;
  finalAnswer: string;
  reward?: JsonFloat;
  advantage?: JsonFloat;
  stopReason: StopReason;
  timings: Record<string, JsonFloat>;
  metadata?: Record<string, unknown>;
}

export interface GroupJson {
  groupId: string;
  queryId: string;
  trajectories: TrajectoryJson[];
}

export function floatToJson(x: number): JsonFloat {
  if (Number.isFinite(x)) return x;
  return Number.isNaN(x) ? 'NaN' : x > 0 ? 'Infinity' : '-Infinity';
}

function isNonFiniteName(x: unknown): boolean {
  return x === 'NaN' || x === 'Infinity' || x === '-Infinity';
}

function floatFromJson(x: unknown): unknown {
  if (x === 'NaN') return Number.NaN;
  if (x === 'Infinity') return Number.POSITIVE_INFINITY;
  if (x === '-Infinity') return Number.NEGATIVE_INFINITY;
  return x;
}

function optFloat(x: number | undefined): JsonFloat | undefined {
  return x === undefined ? undefined : floatToJson(x);
}

function withoutUndefined<T extends object>(o: T): T {
  for (const k of Object.keys(o) as (keyof T)[]) if (o[k] === undefined) delete o[k];
  return o;
}

export function trajectoryToJson(t: Trajectory): TrajectoryJson {
  return withoutUndefined({
    queryId: t.queryId,
    groupId: t.groupId,
    turns: t.turns?.map((u) =>
      withoutUndefined({
        index: u.index,
        promptTokens: Array.from(u.promptTokens),
        actionTokens: Array.from(u.actionTokens),
        actionLogprobs: Array.from(u.actionLogprobs, floatToJson),
        promptText: u.promptText,
        text: u.text,
        toolName: u.toolName,
        toolInput: u.toolInput,
        toolResult: u.toolResult,
        parsed: u.parsed,
        advantage: optFloat(u.advantage),
      }),
    ),
    segments: t.segments?.map((s) =>
      withoutUndefined({
        tokens: Array.from(s.tokens),
        logprobs: s.logprobs === undefined ? undefined : Array.from(s.logprobs, floatToJson),
        trainable: s.trainable,
        kind: s.kind,
      }),
    ),
    question: t.question,
    groundTruth: t.groundTruth,
    finalAnswer: t.finalAnswer,
    reward: optFloat(t.reward),
    advantage: optFloat(t.advantage),
    stopReason: t.stopReason,
    timings: Object.fromEntries(Object.entries(t.timings).map(([k, v]) => [k, floatToJson(v)])),
    metadata: t.metadata,
  });
}

function reviveFloats(value: unknown): unknown {
  if (typeof value !== 'object' || value === null) return value;
  const t = { ...(value as Record<string, unknown>) };
  // Logprob arrays go straight to Float32Array: the schema's number-array branch (zod 4's
  // z.number()) rejects non-finite values, while a Float32Array may hold -Infinity or NaN.
  const arr = (x: unknown) =>
    Array.isArray(x) && x.every((v) => typeof v === 'number' || isNonFiniteName(v))
      ? Float32Array.from(x, (v) => floatFromJson(v) as number)
      : x;
  t.reward = floatFromJson(t.reward);
  t.advantage = floatFromJson(t.advantage);
  if (typeof t.timings === 'object' && t.timings !== null) {
    t.timings = Object.fromEntries(
      Object.entries(t.timings as Record<string, unknown>).map(([k, v]) => [k, floatFromJson(v)]),
    );
  }
  if (Array.isArray(t.turns)) {
    t.turns = t.turns.map((u: unknown) =>
      typeof u === 'object' && u !== null
        ? {
            ...u,
            actionLogprobs: arr((u as Record<string, unknown>).actionLogprobs),
            advantage: floatFromJson((u as Record<string, unknown>).advantage),
          }
        : u,
    );
  }
  if (Array.isArray(t.segments)) {
    t.segments = t.segments.map((s: unknown) =>
      typeof s === 'object' && s !== null
        ? { ...s, logprobs: arr((s as Record<string, unknown>).logprobs) }
        : s,
    );
  }
  for (const k of ['reward', 'advantage'] as const) if (t[k] === undefined) delete t[k];
  return t;
}

function issuesOf(error: {
  issues: readonly { path: readonly PropertyKey[]; message: string }[];
}): { path: string; message: string }[] {
  return error.issues.map((i) => ({ path: i.path.map(String).join('.'), message: i.message }));
}

/** Validates a JSON trajectory (number arrays, string non-finite floats) into a Trajectory. */
export function trajectoryFromJson(value: unknown): Trajectory {
  const parsed = TrajectorySchema.safeParse(reviveFloats(value));
  if (!parsed.success) {
    throw new ValidationError('invalid trajectory JSON', { issues: issuesOf(parsed.error), value });
  }
  return parsed.data;
}

export function groupToJson(g: Group): GroupJson {
  return {
    groupId: g.groupId,
    queryId: g.queryId,
    trajectories: g.trajectories.map(trajectoryToJson),
  };
}

export function groupFromJson(value: unknown): Group {
  const v = value as { trajectories?: unknown } | null;
  const revived =
    typeof v === 'object' && v !== null && Array.isArray(v.trajectories)
      ? { ...v, trajectories: v.trajectories.map(reviveFloats) }
      : value;
  const parsed = GroupSchema.safeParse(revived);
  if (!parsed.success) {
    throw new ValidationError('invalid group JSON', { issues: issuesOf(parsed.error), value });
  }
  return parsed.data;
}
