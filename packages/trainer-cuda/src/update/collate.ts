import { ConfigError, type Trajectory } from '@flowgrpo/core';
import {
  ATTENTION_MASK,
  INPUT_IDS,
  POSITION_IDS,
  SEGMENT_IDS,
  TARGET_IDS,
  TARGET_POSITIONS,
} from '@flowgrpo/models';
import * as ort from 'onnxruntime-node';

// Token-exact collation: recorded turns become training rows from the very ids the policy saw
// and sampled — never decoded and re-tokenized (retokenization drift is the most reported bug
// of RL-for-LLM stacks: the text round trip changes token boundaries, and the policy gradient is
// then taken on tokens that were never sampled).
//
//   Flow rollouts  one row per planner turn: prompt tokens (no loss) + action tokens (loss),
//                  each carrying its trajectory's advantage (Flow-GRPO's single-turn updates)
//   tag agent      one row per trajectory: its segments end to end, loss on the trainable
//                  (action) segments only, observations masked
//
// Rows are right-padded into micro-batches under a token budget. The loss graph reads targets:
// the token at row position i ≥ 1 is predicted by the hidden state at i − 1. A packed row (SFT's
// `packing`, packing.ts) holds several examples: `segments` says which token belongs to which,
// positions restart at 0 per example, attention stays inside an example, and the first token of
// an example is no target (nothing of its own precedes it) — so every target has exactly the
// log-probability and the weight it has unpacked.

export interface TrainRow {
  /** Every token of the row, as sampled / as the model saw it. */
  tokens: Int32Array;
  /** Per token: 1 = trainable (carries loss). */
  mask: Uint8Array;
  /** Per token: the sampling policy's log-probability (NaN where unknown, e.g. prompt). */
  logprobs: Float32Array;
  /** The trajectory's advantage (broadcast to every turn). */
  advantage: number;
  /** The trajectory's index in the batch. */
  trajectory: number;
  /** The turn's index within its trajectory (0 for a tag-agent row). */
  turn: number;
  /**
   * A packed row: per token, the index (0, 1, …, non-decreasing) of the example it belongs to.
   * Absent: the row is one example.
   */
  segments?: Int32Array;
}

/** Per token of a row: its position within its own example (0 at each example's first token). */
export function positionsOf(row: TrainRow): Int32Array {
  const n = row.tokens.length;
  const pos = new Int32Array(n);
  const seg = row.segments;
  for (let i = 1; i < n; i++) pos[i] = seg && seg[i] !== seg[i - 1] ? 0 : pos[i - 1]! + 1;
  return pos;
}

/** Rows of one batch of trajectories; `advantages[i]` belongs to `trajectories[i]`. */
export function rowsFromTrajectories(
  trajectories: readonly Trajectory[],
  advantages: ArrayLike<number>,
): TrainRow[] {
  const rows: TrainRow[] = [];
  trajectories.forEach((t, ti) => {
    const advantage = advantages[ti]!;
    if (t.turns && t.segments)
      throw new ConfigError(
        `trajectory ${t.queryId} has both turns and segments; a rollout records one of them`,
      );
    t.turns?.forEach((turn, k) => {
      const n = turn.promptTokens.length;
      const m = turn.actionTokens.length;
      if (turn.actionLogprobs.length !== m)
        throw new ConfigError(
          `trajectory ${t.queryId} turn ${k}: ${m} action tokens but ${turn.actionLogprobs.length} logprobs`,
        );
      if (m === 0) return; // nothing sampled, nothing to train
      const tokens = new Int32Array(n + m);
      tokens.set(turn.promptTokens, 0);
      tokens.set(turn.actionTokens, n);
      const mask = new Uint8Array(n + m);
      mask.fill(1, n);
      const logprobs = new Float32Array(n + m).fill(Number.NaN);
      logprobs.set(turn.actionLogprobs, n);
      rows.push({ tokens, mask, logprobs, advantage, trajectory: ti, turn: k });
    });
    if (t.segments && t.segments.length > 0) {
      const total = t.segments.reduce((s, g) => s + g.tokens.length, 0);
      const tokens = new Int32Array(total);
      const mask = new Uint8Array(total);
      const logprobs = new Float32Array(total).fill(Number.NaN);
      let at = 0;
      for (const seg of t.segments) {
        tokens.set(seg.tokens, at);
        if (seg.trainable) {
          mask.fill(1, at, at + seg.tokens.length);
          if (seg.logprobs) {
            if (seg.logprobs.length !== seg.tokens.length)
              throw new ConfigError(
                `trajectory ${t.queryId}: a trainable segment has ${seg.tokens.length} tokens but ${seg.logprobs.length} logprobs`,
              );
            logprobs.set(seg.logprobs, at);
          }
        }
        at += seg.tokens.length;
      }
      if (mask.some((v) => v === 1))
        rows.push({ tokens, mask, logprobs, advantage, trajectory: ti, turn: 0 });
    }
  });
  return rows;
}

/**
 * The trainable tokens of a set of rows, flattened in row order: target j is token
 * `rows[row[j]].tokens[pos[j] + 1]`, predicted at position `pos[j]`. A trainable first token (of
 * the row, or of a packed example) has no prefix to be predicted from and is left out.
 */
export interface Targets {
  count: number;
  row: Int32Array;
  pos: Int32Array;
  id: Int32Array;
  sampleLogprob: Float32Array;
  advantage: Float32Array;
  trajectory: Int32Array;
  turn: Int32Array;
  /** Per row: its first target index and count (targets of a row are contiguous). */
  rowStart: Int32Array;
  rowCount: Int32Array;
}

export function targetsOf(rows: readonly TrainRow[]): Targets {
  // Token i is a target when trainable and not the first of its example.
  const isTarget = (r: TrainRow, i: number) =>
    r.mask[i] === 1 && (!r.segments || r.segments[i] === r.segments[i - 1]);
  let count = 0;
  for (const r of rows) for (let i = 1; i < r.tokens.length; i++) if (isTarget(r, i)) count++;
  const t: Targets = {
    count,
    row: new Int32Array(count),
    pos: new Int32Array(count),
    id: new Int32Array(count),
    sampleLogprob: new Float32Array(count),
    advantage: new Float32Array(count),
    trajectory: new Int32Array(count),
    turn: new Int32Array(count),
    rowStart: new Int32Array(rows.length),
    rowCount: new Int32Array(rows.length),
  };
  let j = 0;
  rows.forEach((r, ri) => {
    t.rowStart[ri] = j;
    for (let i = 1; i < r.tokens.length; i++) {
      if (!isTarget(r, i)) continue;
      t.row[j] = ri;
      t.pos[j] = i - 1;
      t.id[j] = r.tokens[i]!;
      t.sampleLogprob[j] = r.logprobs[i]!;
      t.advantage[j] = r.advantage;
      t.trajectory[j] = r.trajectory;
      t.turn[j] = r.turn;
      j++;
    }
    t.rowCount[ri] = j - t.rowStart[ri]!;
  });
  return t;
}

/** Rows that go through the graph together, right-padded to `seqLen` tokens and `numTargets`. */
export interface MicroBatch {
  rows: number[];
  seqLen: number;
  numTargets: number;
}

/**
 * Rows sorted by length (ties in row order), then packed greedily: a micro-batch grows while
 * (rows × longest row) stays within `maxTokens` — padding counts, since the graph computes it,
 * and attention costs the square of the longest row, so rows of similar length go together. A
 * row longer than the budget goes alone; rows with no target are skipped. The split changes no
 * result: the loss weights are the whole batch's, so micro-batches only add up.
 */
export function packMicroBatches(
  rows: readonly TrainRow[],
  targets: Targets,
  maxTokens: number,
): MicroBatch[] {
  if (!(maxTokens >= 1)) throw new RangeError(`maxTokens must be ≥ 1, got ${maxTokens}`);
  const out: MicroBatch[] = [];
  let cur: MicroBatch | undefined;
  const order = rows
    .map((_, i) => i)
    .sort((a, b) => rows[a]!.tokens.length - rows[b]!.tokens.length || a - b);
  for (const ri of order) {
    const r = rows[ri]!;
    const k = targets.rowCount[ri]!;
    if (k === 0) continue;
    const len = r.tokens.length;
    if (cur && (cur.rows.length + 1) * Math.max(cur.seqLen, len) <= maxTokens) {
      cur.rows.push(ri);
      cur.seqLen = Math.max(cur.seqLen, len);
      cur.numTargets = Math.max(cur.numTargets, k);
    } else {
      cur = { rows: [ri], seqLen: len, numTargets: k };
      out.push(cur);
    }
  }
  return out;
}

const int64 = (values: ArrayLike<number>, dims: number[]) => {
  const data = new BigInt64Array(values.length);
  for (let i = 0; i < values.length; i++) data[i] = BigInt(values[i]!);
  return new ort.Tensor('int64', data, dims);
};

/**
 * The token feeds of a micro-batch (ids, mask, positions, target positions and ids), and with
 * `segments` (the train_step graph) the segment ids of packed rows — 0 throughout for an unpacked
 * row and for padding (which attention_mask already hides). Graphs without segment_ids (logprobs)
 * cannot tell packed examples apart: packed rows are refused there.
 */
export function tokenFeeds(
  mb: MicroBatch,
  rows: readonly TrainRow[],
  targets: Targets,
  options: { segments?: boolean } = {},
): Record<string, ort.Tensor> {
  const B = mb.rows.length;
  const T = mb.seqLen;
  const K = mb.numTargets;
  const ids = new Int32Array(B * T);
  const mask = new Int32Array(B * T);
  const pos = new Int32Array(B * T);
  const seg = new Int32Array(B * T);
  const tpos = new Int32Array(B * K);
  const tids = new Int32Array(B * K);
  mb.rows.forEach((ri, b) => {
    const r = rows[ri]!;
    if (r.segments && !options.segments)
      throw new RangeError('a packed row needs a graph with segment_ids (train_step)');
    ids.set(r.tokens, b * T);
    mask.fill(1, b * T, b * T + r.tokens.length);
    pos.set(positionsOf(r), b * T);
    if (r.segments) seg.set(r.segments, b * T);
    const start = targets.rowStart[ri]!;
    for (let k = 0; k < targets.rowCount[ri]!; k++) {
      tpos[b * K + k] = targets.pos[start + k]!;
      tids[b * K + k] = targets.id[start + k]!;
    }
  });
  return {
    [INPUT_IDS]: int64(ids, [B, T]),
    [ATTENTION_MASK]: int64(mask, [B, T]),
    [POSITION_IDS]: int64(pos, [B, T]),
    ...(options.segments && { [SEGMENT_IDS]: int64(seg, [B, T]) }),
    [TARGET_POSITIONS]: int64(tpos, [B, K]),
    [TARGET_IDS]: int64(tids, [B, K]),
  };
}

/** A per-target array laid out [B, K] for a micro-batch (padding = `fill`). */
export function perTargetFeed(
  mb: MicroBatch,
  targets: Targets,
  values: ArrayLike<number>,
  fill = 0,
): ort.Tensor {
  const B = mb.rows.length;
  const K = mb.numTargets;
  const data = new Float32Array(B * K).fill(fill);
  mb.rows.forEach((ri, b) => {
    const start = targets.rowStart[ri]!;
    for (let k = 0; k < targets.rowCount[ri]!; k++) data[b * K + k] = values[start + k]!;
  });
  return new ort.Tensor('float32', data, [B, K]);
}

/** Reads a [B, K] output back into per-target order. */
export function scatterTargets(
  mb: MicroBatch,
  targets: Targets,
  tensor: ort.Tensor,
  into: Float32Array,
): void {
  const data = tensor.data as Float32Array;
  const K = mb.numTargets;
  mb.rows.forEach((ri, b) => {
    const start = targets.rowStart[ri]!;
    for (let k = 0; k < targets.rowCount[ri]!; k++) into[start + k] = data[b * K + k]!;
  });
}
