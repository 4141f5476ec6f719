import {
  Bool,
  type Data,
  Field,
  Float32,
  Float64,
  Int32,
  List,
  makeData,
  RecordBatch,
  Schema,
  Struct,
  Table,
  tableFromIPC,
  tableToIPC,
  Utf8,
  type Vector,
  vectorFromArray,
} from 'apache-arrow';
import { readArrowIpc, writeArrowIpc } from './datasets/arrow-ipc.js';
import { DataFormatError, ValidationError } from './errors.js';
import { type Trajectory, TrajectorySchema } from './trajectory.js';

// Rollout logs as Arrow: ONE ROW PER TURN. Flow trajectories give one row per planner turn;
// single-policy trajectories give one row per token segment (rowType 'segment'); a trajectory
// with neither gets one placeholder row (rowType null) so its reward and answer are kept.
// Trajectory-level fields repeat on each of its rows; `turnCount` / `segmentCount` (null when the
// trajectory has no such array) say how many rows belong to it, which is how the table is cut
// back into trajectories, so tables from several steps can be concatenated.
// Free-form values (toolInput, timings, metadata) are stored as JSON text.

const int32List = () => new List(new Field('item', new Int32(), false));
const float32List = () => new List(new Field('item', new Float32(), false));

export const TRAJECTORY_ARROW_SCHEMA = new Schema([
  new Field('trajectoryIndex', new Int32(), false),
  new Field('queryId', new Utf8(), false),
  new Field('groupId', new Utf8(), false),
  new Field('rowType', new Utf8(), true),
  new Field('turnIndex', new Int32(), true),
  new Field('promptTokens', int32List(), true),
  new Field('actionTokens', int32List(), true),
  new Field('actionLogprobs', float32List(), true),
  new Field('promptText', new Utf8(), true),
  new Field('text', new Utf8(), true),
  new Field('toolName', new Utf8(), true),
  new Field('toolInput', new Utf8(), true),
  new Field('toolResult', new Utf8(), true),
  new Field('parsed', new Bool(), true),
  new Field('turnAdvantage', new Float64(), true),
  new Field('segmentKind', new Utf8(), true),
  new Field('segmentTrainable', new Bool(), true),
  new Field('segmentTokens', int32List(), true),
  new Field('segmentLogprobs', float32List(), true),
  new Field('reward', new Float64(), true),
  new Field('advantage', new Float64(), true),
  new Field('stopReason', new Utf8(), false),
  new Field('finalAnswer', new Utf8(), false),
  new Field('question', new Utf8(), true),
  new Field('groundTruth', new Utf8(), true),
  new Field('timings', new Utf8(), false),
  new Field('metadata', new Utf8(), true),
  new Field('turnCount', new Int32(), true),
  new Field('segmentCount', new Int32(), true),
]);

type Cell = string | number | boolean | Int32Array | Float32Array | null;

function listData(
  type: List<Int32> | List<Float32>,
  values: readonly (Int32Array | Float32Array | null)[],
): Data {
  const n = values.length;
  const offsets = new Int32Array(n + 1);
  const validity = new Uint8Array(Math.ceil(n / 8));
  let nulls = 0;
  for (let i = 0; i < n; i++) {
    const v = values[i];
    if (v === null || v === undefined) nulls++;
    else validity[i >> 3]! |= 1 << (i & 7);
    offsets[i + 1] = offsets[i]! + (v?.length ?? 0);
  }
  const isInt = type.children[0]!.type instanceof Int32;
  const flat = isInt ? new Int32Array(offsets[n]!) : new Float32Array(offsets[n]!);
  for (let i = 0; i < n; i++) {
    const v = values[i];
    if (v) flat.set(v, offsets[i]!);
  }
  const child = makeData({
    type: isInt ? new Int32() : new Float32(),
    length: flat.length,
    data: flat,
  } as Parameters<typeof makeData>[0]);
  return makeData({
    type,
    length: n,
    nullCount: nulls,
    nullBitmap: nulls > 0 ? validity : null,
    valueOffsets: offsets,
    child,
  } as Parameters<typeof makeData>[0]);
}

function json(value: unknown, what: string): string {
  try {
    const s = JSON.stringify(value);
    if (s === undefined) throw new Error('not representable as JSON');
    return s;
  } catch (cause) {
    throw new ValidationError(
      `${what} cannot be stored as JSON: ${(cause as Error).message}`,
      { issues: [{ path: what, message: 'not JSON-serialisable' }], value },
      { cause },
    );
  }
}

/** Builds the one-row-per-turn Arrow table of some trajectories. */
export function trajectoriesToTable(trajectories: readonly Trajectory[]): Table {
  const cols = new Map<string, Cell[]>(TRAJECTORY_ARROW_SCHEMA.fields.map((f) => [f.name, []]));
  const push = (row: Record<string, Cell | undefined>) => {
    for (const [name, col] of cols) col.push(row[name] ?? null);
  };
  trajectories.forEach((t, trajectoryIndex) => {
    const shared = {
      trajectoryIndex,
      queryId: t.queryId,
      groupId: t.groupId,
      reward: t.reward,
      advantage: t.advantage,
      stopReason: t.stopReason,
      finalAnswer: t.finalAnswer,
      question: t.question,
      groundTruth: t.groundTruth,
      timings: json(t.timings ?? {}, 'timings'),
      metadata: t.metadata === undefined ? null : json(t.metadata, 'metadata'),
      turnCount: t.turns?.length,
      segmentCount: t.segments?.length,
    };
    let rows = 0;
    for (const u of t.turns ?? []) {
      push({
        ...shared,
        rowType: 'turn',
        turnIndex: u.index,
        promptTokens: u.promptTokens,
        actionTokens: u.actionTokens,
        actionLogprobs: u.actionLogprobs,
        promptText: u.promptText,
        text: u.text,
        toolName: u.toolName,
        toolInput: u.toolInput === undefined ? null : json(u.toolInput, 'toolInput'),
        toolResult: u.toolResult,
        parsed: u.parsed,
        turnAdvantage: u.advantage,
      });
      rows++;
    }
    (t.segments ?? []).forEach((s, i) => {
      push({
        ...shared,
        rowType: 'segment',
        turnIndex: i,
        segmentKind: s.kind,
        segmentTrainable: s.trainable,
        segmentTokens: s.tokens,
        segmentLogprobs: s.logprobs,
      });
      rows++;
    });
    if (rows === 0) push(shared);
  });
  const length = cols.get('trajectoryIndex')!.length;
  const children = TRAJECTORY_ARROW_SCHEMA.fields.map((f) => {
    const values = cols.get(f.name)!;
    if (f.type instanceof List) {
      return listData(f.type, values as (Int32Array | Float32Array | null)[]);
    }
    return vectorFromArray(values as never[], f.type).data[0]!;
  });
  const batch = new RecordBatch(
    TRAJECTORY_ARROW_SCHEMA,
    makeData({ type: new Struct(TRAJECTORY_ARROW_SCHEMA.fields), length, children }),
  );
  return new Table([batch]);
}

function column(table: Table, name: string): Vector {
  const col = table.getChild(name);
  const want = TRAJECTORY_ARROW_SCHEMA.fields.find((f) => f.name === name)!;
  if (col === null) {
    throw new DataFormatError(`trajectory table has no '${name}' column`);
  }
  const got = col.type;
  const same =
    got.typeId === want.type.typeId &&
    (!(want.type instanceof List) ||
      got.children?.[0]?.type.typeId === want.type.children[0]!.type.typeId);
  if (!same) {
    throw new DataFormatError(`trajectory table column '${name}' is ${got}, expected ${want.type}`);
  }
  return col;
}

/**
 * Rebuilds trajectories from a table made by `trajectoriesToTable` (or several concatenated).
 * Rows are validated against TrajectorySchema; errors name the offending row.
 */
export function tableToTrajectories(table: Table): Trajectory[] {
  const c = Object.fromEntries(
    TRAJECTORY_ARROW_SCHEMA.fields.map((f) => [f.name, column(table, f.name)]),
  ) as Record<string, Vector>;
  const get = (name: string, row: number): unknown => {
    const v = c[name]!.get(row);
    return v === null ? undefined : v;
  };
  const list = (name: string, row: number, ctor: typeof Int32Array | typeof Float32Array) => {
    const v = c[name]!.get(row) as Vector | null;
    return v === null ? undefined : ctor.from(v.toArray() as ArrayLike<number>);
  };
  const parseJson = (name: string, row: number): unknown => {
    const s = get(name, row);
    if (s === undefined) return undefined;
    try {
      return JSON.parse(s as string);
    } catch (cause) {
      throw new DataFormatError(`row ${row}: column '${name}' is not valid JSON`, {}, { cause });
    }
  };

  const out: Trajectory[] = [];
  const n = table.numRows;
  let row = 0;
  while (row < n) {
    const first = row;
    const turnCount = get('turnCount', first) as number | undefined;
    const segmentCount = get('segmentCount', first) as number | undefined;
    const rows = Math.max(1, (turnCount ?? 0) + (segmentCount ?? 0));
    if (first + rows > n) {
      throw new DataFormatError(
        `row ${first}: the trajectory needs ${rows} rows but the table ends at row ${n}`,
      );
    }
    const id = get('trajectoryIndex', first);
    for (let r = first + 1; r < first + rows; r++) {
      if (get('trajectoryIndex', r) !== id || get('groupId', r) !== get('groupId', first)) {
        throw new DataFormatError(
          `row ${r}: expected row ${r - first + 1} of ${rows} of the trajectory starting at row ${first}`,
        );
      }
    }
    const turns: unknown[] = [];
    const segments: unknown[] = [];
    for (let r = first; r < first + rows; r++) {
      const type = get('rowType', r);
      if (type === 'turn') {
        const turn: Record<string, unknown> = {
          index: get('turnIndex', r),
          promptTokens: list('promptTokens', r, Int32Array),
          actionTokens: list('actionTokens', r, Int32Array),
          actionLogprobs: list('actionLogprobs', r, Float32Array),
          promptText: get('promptText', r),
          text: get('text', r),
          toolName: get('toolName', r),
          toolInput: parseJson('toolInput', r),
          toolResult: get('toolResult', r),
          parsed: get('parsed', r),
          advantage: get('turnAdvantage', r),
        };
        // A stored JSON null is a real toolInput value; only a null cell means "absent".
        if (get('toolInput', r) === undefined) delete turn.toolInput;
        turns.push(turn);
      } else if (type === 'segment') {
        segments.push({
          kind: get('segmentKind', r),
          trainable: get('segmentTrainable', r),
          tokens: list('segmentTokens', r, Int32Array),
          logprobs: list('segmentLogprobs', r, Float32Array),
        });
      } else if (rows !== 1 || type !== undefined) {
        throw new DataFormatError(`row ${r}: unknown rowType ${JSON.stringify(type)}`);
      }
    }
    if (turns.length !== (turnCount ?? 0) || segments.length !== (segmentCount ?? 0)) {
      throw new DataFormatError(
        `row ${first}: the trajectory declares ${turnCount ?? 0} turns and ${segmentCount ?? 0} segments but has ${turns.length} and ${segments.length} rows`,
      );
    }
    const candidate = Object.fromEntries(
      Object.entries({
        queryId: get('queryId', first),
        groupId: get('groupId', first),
        turns: turnCount === undefined ? undefined : turns,
        segments: segmentCount === undefined ? undefined : segments,
        question: get('question', first),
        groundTruth: get('groundTruth', first),
        finalAnswer: get('finalAnswer', first),
        reward: get('reward', first),
        advantage: get('advantage', first),
        stopReason: get('stopReason', first),
        timings: parseJson('timings', first),
        metadata: parseJson('metadata', first),
      }).filter(([, v]) => v !== undefined),
    );
    const parsed = TrajectorySchema.safeParse(candidate);
    if (!parsed.success) {
      const issues = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
      throw new DataFormatError(`row ${first}: invalid trajectory (${issues.join('; ')})`);
    }
    out.push(stripUndefined(parsed.data));
    row = first + rows;
  }
  return out;
}

// zod keeps keys whose optional values are undefined only when present; the turn objects above
// set every key, so drop the undefined ones for a faithful round trip.
function stripUndefined(t: Trajectory): Trajectory {
  for (const u of t.turns ?? []) {
    for (const k of Object.keys(u) as (keyof typeof u)[]) if (u[k] === undefined) delete u[k];
  }
  for (const s of t.segments ?? []) if (s.logprobs === undefined) delete s.logprobs;
  return t;
}

export type TrajectoryIpcFormat = 'file' | 'stream';

/** Serialises trajectories to Arrow IPC bytes ('file' = Feather v2 / .arrow, 'stream' = .arrows). */
export function trajectoriesToIPC(
  trajectories: readonly Trajectory[],
  format: TrajectoryIpcFormat = 'file',
): Uint8Array {
  return tableToIPC(trajectoriesToTable(trajectories), format);
}

/** Parses Arrow IPC bytes (file or stream) written by `trajectoriesToIPC`. */
export function trajectoriesFromIPC(bytes: Uint8Array): Trajectory[] {
  return tableToTrajectories(tableFromIPC(bytes));
}

/** Writes trajectories as an Arrow IPC file (atomically, creating the folder). */
export async function writeTrajectoriesArrow(
  path: string,
  trajectories: readonly Trajectory[],
  format: TrajectoryIpcFormat = 'file',
): Promise<void> {
  await writeArrowIpc(path, trajectoriesToTable(trajectories), format);
}

/** Reads trajectories from an Arrow IPC file written by `writeTrajectoriesArrow`. */
export async function readTrajectoriesArrow(path: string): Promise<Trajectory[]> {
  const table = await readArrowIpc(path);
  try {
    return tableToTrajectories(table);
  } catch (e) {
    if (DataFormatError.isInstance(e)) {
      throw new DataFormatError(e.message, { file: path }, { cause: e });
    }
    throw e;
  }
}
