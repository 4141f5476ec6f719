import { readFileSync } from 'node:fs';
import { extname } from 'node:path';
import {
  DataFormatError,
  plainRowShape,
  readJsonlAll,
  readParquetFields,
  readParquetRows,
  readSampleRows,
  readTrajectoriesParquet,
  type Trajectory,
} from '@flowgrpo/core';

// What `flowgrpo data inspect` says about a file: any file the project reads or writes — a data
// set (SampleRows, plain rows, SFT rows), a run's rollouts Parquet, its metrics.jsonl, an eval
// result — is recognised from its columns and described (kind, rows, fields, a short summary,
// the first rows), instead of being held to one format and rejected.

/** What a file is and holds, ready to print. */
export interface FileDescription {
  kind: string;
  /** How many `unit`s it holds. */
  rows: number;
  /** What a row is: a table's rows, a rollouts file's trajectories, an eval result's policies. */
  unit: 'rows' | 'trajectories' | 'policies';
  /** Its columns or top-level keys. */
  fields: string[];
  /** A few lines that say what is in it (rows per source, reward, metrics first → last, …). */
  summary: string[];
  /** The first rows (shortened where a row is a whole trajectory). */
  first: unknown[];
}

type Rec = Record<string, unknown>;

/** Describes the file at `path`; `n` is how many rows to keep in `first`. */
export async function describeFile(path: string, n: number): Promise<FileDescription> {
  const ext = extname(path).toLowerCase();
  if (ext === '.parquet') return describeParquet(path, n);
  if (ext === '.jsonl') return describeRecords(path, await readJsonlAll<Rec>(path), n);
  if (ext === '.json') return describeJson(path, n);
  throw new DataFormatError(
    `unknown extension '${ext}' (data inspect reads .parquet, .jsonl and .json)`,
    { file: path },
    { hint: 'give a data set, a rollouts .parquet, a metrics.jsonl or an eval .json' },
  );
}

async function describeParquet(path: string, n: number): Promise<FileDescription> {
  const fields = (await readParquetFields(path)).map((f) => f.name);
  if (fields.includes('trajectoryIndex') && fields.includes('rowType'))
    return describeRollouts(await readTrajectoriesParquet(path), fields, n);
  return describeRecords(path, (await readParquetRows(path)) as Rec[], n, fields);
}

/** A table of records (.jsonl, or a Parquet file that is not rollouts), by its first row. */
async function describeRecords(
  path: string,
  records: Rec[],
  n: number,
  columns?: string[],
): Promise<FileDescription> {
  const first = records[0];
  const fields = columns ?? fieldsOf(records);
  const base = { rows: records.length, unit: 'rows' as const, fields, first: records.slice(0, n) };
  if (first === undefined) return { ...base, kind: 'empty table', summary: [] };
  if (isObject(first.extra_info) && 'result' in first) {
    // SampleRows are validated as the trainer reads them, so a broken one is named here too.
    const rows = await readSampleRows(path);
    return {
      ...base,
      kind: 'SampleRows (GRPO / eval data)',
      summary: ['rows per source:', ...countTable(rows.map((r) => r.source))],
      first: rows.slice(0, n),
    };
  }
  if (records.every((r) => typeof r.step === 'number'))
    return { ...base, kind: 'training metrics (metrics.jsonl)', summary: metricsSummary(records) };
  const shape = plainRowShape(first);
  if (shape === 'question')
    return {
      ...base,
      kind: 'plain rows {question, answer} (GRPO / eval data, data_format "plain")',
      summary: [],
    };
  if (shape === 'prompt' || shape === 'messages')
    return {
      ...base,
      kind:
        `TRL ${shape === 'prompt' ? 'prompt-completion' : 'conversational (messages)'} rows ` +
        '(SFT data; GRPO / eval read them as plain rows)',
      summary: [],
    };
  if (typeof first.text === 'string')
    return { ...base, kind: 'TRL text rows (SFT data)', summary: [] };
  return { ...base, kind: 'table of records (not a format flowgrpo trains on)', summary: [] };
}

function describeRollouts(
  trajectories: Trajectory[],
  fields: string[],
  n: number,
): FileDescription {
  const rewards = trajectories.map((t) => t.reward ?? 0);
  const mean = rewards.reduce((a, b) => a + b, 0) / Math.max(1, rewards.length);
  const groups = new Set(trajectories.map((t) => t.groupId ?? t.queryId)).size;
  return {
    kind: 'rollouts (trajectories the trainer or eval --trajectories recorded, one row per turn)',
    rows: trajectories.length,
    unit: 'trajectories',
    fields,
    summary: [
      `groups of questions: ${groups}`,
      `reward: mean ${mean.toFixed(3)}, ≥ 1 in ${rewards.filter((r) => r >= 1).length}`,
      ...countTable(trajectories.map((t) => t.stopReason ?? 'unknown')).map(
        (line) => `stop reason ${line.trim()}`,
      ),
    ],
    first: trajectories.slice(0, n).map((t) => ({
      queryId: t.queryId,
      question: t.question,
      groundTruth: t.groundTruth,
      finalAnswer: t.finalAnswer,
      reward: t.reward,
      stopReason: t.stopReason,
      turns: t.turns?.length,
      segments: t.segments?.length,
    })),
  };
}

function describeJson(path: string, n: number): FileDescription {
  let value: unknown;
  try {
    value = JSON.parse(readFileSync(path, 'utf8'));
  } catch (error) {
    throw new DataFormatError(`not JSON: ${(error as Error).message}`, { file: path });
  }
  if (!isObject(value))
    return {
      kind: `JSON ${Array.isArray(value) ? `array of ${value.length}` : typeof value}`,
      rows: Array.isArray(value) ? value.length : 1,
      unit: 'rows',
      fields: [],
      summary: [],
      first: Array.isArray(value) ? value.slice(0, n) : [value],
    };
  const fields = Object.keys(value);
  const policies = Array.isArray(value.results) ? value.results.filter(isEvalResult) : [];
  if (policies.length > 0)
    return {
      kind: 'eval results (flowgrpo eval --out)',
      rows: policies.length,
      unit: 'policies',
      fields,
      summary: [`questions: ${value.n}`, ...policies.map(policyLine)],
      first: [],
    };
  if (isEvalResult(value))
    return {
      kind: "eval result (a run's eval/<name>.json)",
      rows: 1,
      unit: 'policies',
      fields,
      summary: [policyLine(value)],
      first: [],
    };
  if (value.trainer === 'grpo' || value.trainer === 'sft')
    return {
      kind: `${value.trainer} run config`,
      rows: 1,
      unit: 'rows',
      fields,
      summary: [],
      first: [value],
    };
  return { kind: 'JSON object', rows: 1, unit: 'rows', fields, summary: [], first: [value] };
}

interface EvalLike {
  name: string;
  n: number;
  accuracy: number;
  reward_mean?: number;
}

function isEvalResult(value: unknown): value is EvalLike {
  return (
    isObject(value) &&
    typeof value.name === 'string' &&
    typeof value.n === 'number' &&
    typeof value.accuracy === 'number'
  );
}

function policyLine(r: EvalLike): string {
  const reward = r.reward_mean === undefined ? '' : `, reward mean ${r.reward_mean.toFixed(3)}`;
  return `${r.name}: accuracy ${(100 * r.accuracy).toFixed(1)}% of ${r.n}${reward}`;
}

/** Steps first → last, and the first and last value of the headline metrics. */
function metricsSummary(records: Rec[]): string[] {
  const steps = records.map((r) => r.step as number);
  const lines = [`steps ${Math.min(...steps)} → ${Math.max(...steps)} (${records.length} lines)`];
  for (const key of ['loss', 'reward', 'kl', 'eval/accuracy', 'eval_loss']) {
    const values = records.map((r) => r[key]).filter((v) => typeof v === 'number') as number[];
    if (values.length > 0)
      lines.push(`${key}: ${fmt(values[0]!)} → ${fmt(values[values.length - 1]!)}`);
  }
  return lines;
}

function fmt(v: number): string {
  return Number.isInteger(v) ? String(v) : v.toPrecision(4);
}

/** `  value  count` lines, values sorted. */
function countTable(values: string[]): string[] {
  const counts = new Map<string, number>();
  for (const v of values) counts.set(v, (counts.get(v) ?? 0) + 1);
  return [...counts]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([v, k]) => `    ${v.padEnd(12)} ${String(k).padStart(7)}`);
}

/** Keys of the records, in order of first appearance. */
function fieldsOf(records: Rec[]): string[] {
  const seen = new Set<string>();
  for (const r of records) for (const k of Object.keys(r)) seen.add(k);
  return [...seen];
}

function isObject(value: unknown): value is Rec {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
