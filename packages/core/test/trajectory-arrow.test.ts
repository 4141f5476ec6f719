import { join } from 'node:path';
import { Type, tableFromArrays } from 'apache-arrow';
import { describe, expect, it } from 'vitest';
import {
  DataFormatError,
  GroupSchema,
  groupFromJson,
  groupToJson,
  readTrajectoriesArrow,
  type Trajectory,
  TrajectorySchema,
  tableToTrajectories,
  trajectoriesFromIPC,
  trajectoriesToIPC,
  trajectoriesToTable,
  trajectoryFromJson,
  trajectoryToJson,
  ValidationError,
  writeTrajectoriesArrow,
} from '../src/index.js';
import { testDir } from './temp-dir.js';

function sample(): Trajectory[] {
  return [
    // A flow rollout: two planner turns.
    TrajectorySchema.parse({
      queryId: 'q1',
      groupId: 'g1',
      turns: [
        {
          index: 0,
          promptTokens: [1, 2, 3],
          actionTokens: [10, 11],
          actionLogprobs: [-0.5, -1.25],
          promptText: '<|im_start|>user\nWhat is 2+2?',
          text: '<tool>calc</tool>',
          toolName: 'calculator',
          toolInput: { expr: '2+2', nested: [1, null] },
          toolResult: '4',
          advantage: 0.75,
        },
        {
          index: 1,
          promptTokens: new Int32Array([1, 2, 3, 10, 11, 4]),
          actionTokens: new Int32Array([12]),
          actionLogprobs: new Float32Array([Number.NEGATIVE_INFINITY]),
          text: 'garbled',
          toolInput: null,
          parsed: false,
        },
      ],
      question: 'What is 2+2?',
      groundTruth: '4',
      finalAnswer: '4',
      reward: 1,
      advantage: 0.75,
      stopReason: 'answer',
      timings: { planner: 12.5, tools: 3 },
      metadata: { step: 7, tags: ['a'] },
    }),
    // A single-policy rollout: token segments, one without logprobs.
    TrajectorySchema.parse({
      queryId: 'q1',
      groupId: 'g1',
      segments: [
        { tokens: [1, 2], trainable: false, kind: 'prompt' },
        { tokens: [5, 6, 7], logprobs: [-0.1, -0.2, -0.3], trainable: true, kind: 'action' },
        { tokens: [], trainable: false, kind: 'observation' },
      ],
      finalAnswer: '',
      reward: 0,
      stopReason: 'max_tokens',
    }),
    // No turns at all (failed before the first call), and an explicitly empty turn list.
    TrajectorySchema.parse({ queryId: 'q2', groupId: 'g2', finalAnswer: '', stopReason: 'error' }),
    TrajectorySchema.parse({
      queryId: 'q2',
      groupId: 'g2',
      turns: [],
      finalAnswer: 'x',
      stopReason: 'timeout',
    }),
  ];
}

const dir = testDir('traj');

describe('trajectories ↔ Arrow', () => {
  it('has one row per turn (or segment) with typed list columns', () => {
    const table = trajectoriesToTable(sample());
    // 2 turns + 3 segments + 1 placeholder + 1 placeholder.
    expect(table.numRows).toBe(7);
    const type = (name: string) => table.schema.fields.find((f) => f.name === name)!.type;
    expect(type('promptTokens').typeId).toBe(Type.List);
    expect(type('promptTokens').children[0]!.type.typeId).toBe(Type.Int);
    expect(type('actionLogprobs').children[0]!.type.typeId).toBe(Type.Float);
    expect(type('actionLogprobs').children[0]!.type.precision).toBe(1); // SINGLE
    // Read the cells back through Arrow's own accessors.
    const cell = (name: string, row: number) => table.getChild(name)!.get(row);
    expect(Array.from(cell('promptTokens', 1).toArray())).toEqual([1, 2, 3, 10, 11, 4]);
    expect(Array.from(cell('actionLogprobs', 0).toArray())).toEqual([-0.5, -1.25]);
    expect(cell('actionLogprobs', 1).get(0)).toBe(Number.NEGATIVE_INFINITY);
    expect(
      [0, 1, 2, 3, 4, 5, 6].map((r) => [
        cell('trajectoryIndex', r),
        cell('rowType', r),
        cell('turnIndex', r),
      ]),
    ).toEqual([
      [0, 'turn', 0],
      [0, 'turn', 1],
      [1, 'segment', 0],
      [1, 'segment', 1],
      [1, 'segment', 2],
      [2, null, null],
      [3, null, null],
    ]);
    // Trajectory-level fields repeat on every row of their trajectory.
    expect([cell('reward', 0), cell('reward', 1), cell('reward', 2), cell('reward', 5)]).toEqual([
      1,
      1,
      0,
      null,
    ]);
    expect(cell('stopReason', 4)).toBe('max_tokens');
    expect(cell('toolName', 0)).toBe('calculator');
    expect(JSON.parse(cell('toolInput', 0))).toEqual({ expr: '2+2', nested: [1, null] });
    expect(cell('toolInput', 1)).toBe('null');
    expect(cell('promptTokens', 2)).toBeNull();
    expect(Array.from(cell('segmentTokens', 3).toArray())).toEqual([5, 6, 7]);
    expect(cell('segmentLogprobs', 2)).toBeNull();
    expect([cell('turnCount', 5), cell('turnCount', 6), cell('segmentCount', 2)]).toEqual([
      null,
      0,
      3,
    ]);
  });

  it('round-trips through the table, IPC file, IPC stream and disk', async () => {
    const original = sample();
    expect(tableToTrajectories(trajectoriesToTable(original))).toEqual(original);
    expect(trajectoriesFromIPC(trajectoriesToIPC(original, 'file'))).toEqual(original);
    expect(trajectoriesFromIPC(trajectoriesToIPC(original, 'stream'))).toEqual(original);
    const path = join(dir, 'nested', 'rollouts.arrow');
    await writeTrajectoriesArrow(path, original);
    const back = await readTrajectoriesArrow(path);
    expect(back).toEqual(original);
    expect(back[0]!.turns![0]!.promptTokens).toBeInstanceOf(Int32Array);
    expect(back[0]!.turns![0]!.actionLogprobs).toBeInstanceOf(Float32Array);
    expect(trajectoriesToTable([]).numRows).toBe(0);
    expect(tableToTrajectories(trajectoriesToTable([]))).toEqual([]);
  });

  it('reads concatenated tables (several steps in one log)', () => {
    const a = sample();
    const b = sample().slice(1, 3);
    const table = trajectoriesToTable(a).concat(trajectoriesToTable(b));
    expect(tableToTrajectories(table)).toEqual([...a, ...b]);
  });

  it('rejects tables that are cut, foreign or invalid, naming the row', () => {
    const table = trajectoriesToTable(sample());
    // Cutting after the first turn of a two-turn trajectory.
    expect(() => tableToTrajectories(table.slice(0, 1))).toThrow(/row 0: .*needs 2 rows/);
    // Starting mid-trajectory (rows are numbered within the slice): row 0 is the second turn of
    // a 2-turn trajectory, so it claims 2 rows, but row 1 belongs to the next trajectory.
    expect(() => tableToTrajectories(table.slice(1))).toThrow(
      /row 1: expected row 2 of 2 of the trajectory starting at row 0/,
    );
    expect(() => tableToTrajectories(tableFromArrays({ queryId: ['q'] }))).toThrow(DataFormatError);
    const bad = sample();
    (bad[2] as { stopReason: string }).stopReason = 'bored';
    expect(() => tableToTrajectories(trajectoriesToTable(bad))).toThrow(
      /row 5: invalid trajectory \(stopReason/,
    );
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    const withCycle = sample();
    withCycle[0]!.turns![0]!.toolInput = cyclic;
    expect(() => trajectoriesToTable(withCycle)).toThrow(ValidationError);
  });
});

describe('trajectory JSON', () => {
  it('round-trips through JSON text, keeping -Infinity logprobs', () => {
    const original = sample();
    for (const t of original) {
      const text = JSON.stringify(trajectoryToJson(t));
      expect(trajectoryFromJson(JSON.parse(text))).toEqual(t);
    }
    const j = trajectoryToJson(original[0]!);
    expect(j.turns![0]!.promptTokens).toEqual([1, 2, 3]);
    expect(Array.isArray(j.turns![0]!.promptTokens)).toBe(true);
    expect(j.turns![1]!.actionLogprobs).toEqual(['-Infinity']);
    expect(j.timings).toEqual({ planner: 12.5, tools: 3 });
  });

  it('round-trips groups and reports invalid input with paths', () => {
    const group = GroupSchema.parse({ groupId: 'g1', queryId: 'q1', trajectories: sample() });
    expect(groupFromJson(JSON.parse(JSON.stringify(groupToJson(group))))).toEqual(group);
    try {
      trajectoryFromJson({ queryId: 'q', groupId: 'g', finalAnswer: 1, stopReason: 'answer' });
      expect.unreachable();
    } catch (e) {
      expect(ValidationError.isInstance(e)).toBe(true);
      expect((e as ValidationError).issues.map((i) => i.path)).toEqual(['finalAnswer']);
    }
    expect(() =>
      groupFromJson({ groupId: 'g', queryId: 'q', trajectories: [{ queryId: 'q' }] }),
    ).toThrow(ValidationError);
  });
});
