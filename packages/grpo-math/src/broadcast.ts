import type { FloatArray, IndexArray } from './arrays.js';
import { GrpoInputError } from './errors.js';

/**
 * Flow-GRPO broadcast: every item (planner turn or token) gets the advantage of the trajectory
 * it belongs to — `out[i] = perSeq[seqIndex[i]]`. With a turn → trajectory index it gives
 * per-turn advantages; with a layout's `seqIndex` it gives per-token advantages.
 */
export function broadcastAdvantages(perSeq: FloatArray, seqIndex: IndexArray): Float64Array {
  const out = new Float64Array(seqIndex.length);
  for (let i = 0; i < seqIndex.length; i++) {
    const s = seqIndex[i];
    if (!Number.isInteger(s) || s < 0 || s >= perSeq.length) {
      throw new GrpoInputError(`value ${s} at ${i} is not an index into ${perSeq.length} values`, {
        field: 'seqIndex',
        index: i,
      });
    }
    out[i] = perSeq[s];
  }
  return out;
}

/**
 * Per-turn advantages when trajectories are given as turn counts: trajectory t's advantage
 * repeated `turnCounts[t]` times, trajectories in order.
 */
export function broadcastToTurns(perSeq: FloatArray, turnCounts: ArrayLike<number>): Float64Array {
  if (turnCounts.length !== perSeq.length) {
    throw new GrpoInputError(`length ${turnCounts.length}, expected ${perSeq.length}`, {
      field: 'turnCounts',
    });
  }
  let total = 0;
  for (let t = 0; t < turnCounts.length; t++) {
    const c = turnCounts[t];
    if (!Number.isInteger(c) || c < 0) {
      throw new GrpoInputError(`value ${c} at ${t} is not a count`, {
        field: 'turnCounts',
        index: t,
      });
    }
    total += c;
  }
  const out = new Float64Array(total);
  let k = 0;
  for (let t = 0; t < turnCounts.length; t++) {
    for (let j = 0; j < turnCounts[t]; j++) out[k++] = perSeq[t];
  }
  return out;
}
