// A bounded comparison of two tensors: a failing assertion prints the worst error and the first
// few mismatching elements, never the whole tensor (a 12 MB diff helps nobody).

export interface Mismatch {
  what: string;
  /** Elements compared, and how many exceed the tolerance. */
  size: number;
  mismatches: number;
  maxAbsDiff: number;
  /** The tolerance used: rtol · max(1, max|want|). */
  tolerance: number;
  /** The first mismatching elements (at most 5). */
  first: { index: number; got: number; want: number }[];
}

interface Comparable {
  readonly shape?: readonly number[];
  readonly dims?: readonly number[];
  readonly data: ArrayLike<number | bigint | boolean>;
}

/**
 * undefined when `got` and `want` have the same shape and every |got − want| ≤ rtol ·
 * max(1, max|want|); otherwise a short summary. Accepts graph HostTensors, ORT tensors
 * (`dims`) or plain arrays. Use as `expect(tensorMismatch(got, want)).toBeUndefined()`.
 */
export function tensorMismatch(
  got: Comparable | ArrayLike<number>,
  want: Comparable | ArrayLike<number>,
  rtol = 1e-5,
  what = 'tensor',
): Mismatch | { what: string; shape: { got: number[]; want: number[] } } | undefined {
  const shapeOf = (t: Comparable | ArrayLike<number>) =>
    'data' in t ? [...(t.shape ?? t.dims ?? [t.data.length])] : [t.length];
  const dataOf = (t: Comparable | ArrayLike<number>) => ('data' in t ? t.data : t);
  const gs = shapeOf(got);
  const ws = shapeOf(want);
  if (gs.join() !== ws.join()) return { what, shape: { got: gs, want: ws } };
  const g = dataOf(got);
  const w = dataOf(want);
  let scale = 1;
  for (let i = 0; i < w.length; i++) scale = Math.max(scale, Math.abs(Number(w[i])));
  const tolerance = rtol * scale;
  let maxAbsDiff = 0;
  let mismatches = 0;
  const first: Mismatch['first'] = [];
  for (let i = 0; i < w.length; i++) {
    const a = Number(g[i]);
    const b = Number(w[i]);
    const d = Math.abs(a - b);
    // NaN on either side is a mismatch (d is NaN, and NaN > tolerance is false).
    if (!(d <= tolerance)) {
      mismatches++;
      if (first.length < 5) first.push({ index: i, got: a, want: b });
    }
    if (d > maxAbsDiff || Number.isNaN(d)) maxAbsDiff = Number.isNaN(d) ? Number.NaN : d;
  }
  return mismatches === 0
    ? undefined
    : { what, size: w.length, mismatches, maxAbsDiff, tolerance, first };
}
