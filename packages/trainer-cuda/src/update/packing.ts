import type { TrainRow } from './collate.js';

// Sequence packing for SFT (TRL's `packing`): tokenized examples share rows of `max_length`
// tokens instead of each being padded to the longest row of its micro-batch. Padding-free and
// exact: each packed example keeps its own positions (0, 1, …), attends only to its own earlier
// tokens (the train_step graph builds the block-diagonal causal mask from the row's segments),
// and its first token is no target — so every target token has the log-probability, the loss and
// the gradient it has unpacked (test/train-sft-packing.test.ts checks this to float32 rounding).
//
//   bfd      best-fit decreasing (TRL's default): longest example first, each into the open row
//            with the least room that still fits it, else a new row. Examples stay whole.
//   wrapped  TRL's other strategy: the examples end to end in dataset order, cut every
//            `max_length` tokens — rows are full, but an example cut in two loses, in its second
//            part, the context of its first (each part attends to itself only here; TRL's
//            wrapped rows also attend across example boundaries).

export type PackingStrategy = 'bfd' | 'wrapped';

/**
 * Best-fit decreasing bin packing, as TRL's `pack_dataset(strategy='bfd')` does it: items by
 * length, longest first (ties in index order); each goes into the bin with the least free space
 * ≥ its length (among equally full bins, the one that reached that space first), else into a new
 * bin. Returns the item indices of each bin, in the order the bins were opened and the items
 * were placed. Every length must be in [1, capacity].
 */
export function packBestFitDecreasing(lengths: readonly number[], capacity: number): number[][] {
  if (!(Number.isInteger(capacity) && capacity >= 1))
    throw new RangeError(`capacity must be a positive integer, got ${capacity}`);
  lengths.forEach((len, i) => {
    if (!(Number.isInteger(len) && len >= 1 && len <= capacity))
      throw new RangeError(`item ${i} has length ${len}, outside [1, ${capacity}]`);
  });
  const order = lengths.map((_, i) => i).sort((a, b) => lengths[b]! - lengths[a]! || a - b);
  const bins: { items: number[]; free: number }[] = [];
  // The bins that still have room, by free space (oldest first), and those spaces ascending.
  const byFree = new Map<number, (typeof bins)[number][]>();
  const spaces: number[] = [];
  /** The index in `spaces` of the smallest free space ≥ len (spaces.length when none). */
  const lowerBound = (len: number) => {
    let lo = 0;
    let hi = spaces.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (spaces[mid]! < len) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  };
  for (const i of order) {
    const len = lengths[i]!;
    const at = lowerBound(len);
    let bin: (typeof bins)[number];
    if (at < spaces.length) {
      const free = spaces[at]!;
      const queue = byFree.get(free)!;
      bin = queue.shift()!;
      if (queue.length === 0) {
        byFree.delete(free);
        spaces.splice(at, 1);
      }
    } else {
      bin = { items: [], free: capacity };
      bins.push(bin);
    }
    bin.items.push(i);
    bin.free -= len;
    if (bin.free > 0) {
      const queue = byFree.get(bin.free);
      if (queue) queue.push(bin);
      else {
        byFree.set(bin.free, [bin]);
        spaces.splice(lowerBound(bin.free), 0, bin.free);
      }
    }
  }
  return bins.map((b) => b.items);
}

/** Concatenates rows (or parts of rows) into one packed row, one segment each. */
function concatRows(parts: readonly { row: TrainRow; start: number; end: number }[]): TrainRow {
  const n = parts.reduce((s, p) => s + p.end - p.start, 0);
  const first = parts[0]!.row;
  const out: TrainRow = {
    tokens: new Int32Array(n),
    mask: new Uint8Array(n),
    logprobs: new Float32Array(n),
    segments: new Int32Array(n),
    // Per-row fields come from the first example: packing serves per-token objectives (SFT).
    advantage: first.advantage,
    trajectory: first.trajectory,
    turn: first.turn,
  };
  let at = 0;
  parts.forEach(({ row, start, end }, s) => {
    out.tokens.set(row.tokens.subarray(start, end), at);
    out.mask.set(row.mask.subarray(start, end), at);
    out.logprobs.set(row.logprobs.subarray(start, end), at);
    out.segments!.fill(s, at, at + end - start);
    at += end - start;
  });
  return out;
}

/**
 * Packs rows (each one example, at most `maxLength` tokens for bfd) into rows of at most
 * `maxLength` tokens. Empty rows are dropped. Every token of the input appears exactly once in
 * the output.
 */
export function packRows(
  rows: readonly TrainRow[],
  maxLength: number,
  strategy: PackingStrategy = 'bfd',
): TrainRow[] {
  if (rows.some((r) => r.segments))
    throw new RangeError('packRows takes unpacked rows (one example each)');
  const kept = rows.filter((r) => r.tokens.length > 0);
  if (strategy === 'bfd')
    return packBestFitDecreasing(
      kept.map((r) => r.tokens.length),
      maxLength,
    ).map((bin) =>
      concatRows(bin.map((i) => ({ row: kept[i]!, start: 0, end: kept[i]!.tokens.length }))),
    );
  // wrapped: fill each row to maxLength, cutting the example that does not fit.
  const out: TrainRow[] = [];
  let parts: { row: TrainRow; start: number; end: number }[] = [];
  let used = 0;
  for (const row of kept)
    for (let start = 0; start < row.tokens.length; ) {
      const end = Math.min(row.tokens.length, start + maxLength - used);
      parts.push({ row, start, end });
      used += end - start;
      start = end;
      if (used === maxLength) {
        out.push(concatRows(parts));
        parts = [];
        used = 0;
      }
    }
  if (parts.length > 0) out.push(concatRows(parts));
  return out;
}
