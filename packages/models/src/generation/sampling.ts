import type { Rng } from '@flowgrpo/core';

// Choosing the next token from one row of logits, and the log-probability reported for it.
//
// Temperature convention (the one the `logprobs` graph computes): the reported logprob of the
// chosen token is log softmax(logits / T)[token] over the FULL vocabulary — top-k / top-p only
// restrict which tokens may be drawn, they do not renormalise the reported number. Greedy decoding
// (T = 0) reports the logprob at T = 1.

export interface SamplingParams {
  /** 0 = greedy (argmax). Default 1. */
  temperature?: number;
  /** Keep the smallest set of most likely tokens whose probability reaches top_p (HF's rule). */
  topP?: number;
  /** Keep the k most likely tokens (0 or undefined = all). */
  topK?: number;
}

export interface SampledToken {
  token: number;
  logprob: number;
}

/** Index of the largest value; the first one on ties. */
export function argmaxOf(x: ArrayLike<number>, offset = 0, n = x.length - offset): number {
  let best = 0;
  let bv = x[offset]!;
  for (let i = 1; i < n; i++) {
    const v = x[offset + i]!;
    if (v > bv) {
      bv = v;
      best = i;
    }
  }
  return best;
}

/** log Σ exp(x[i] / t) in float64. */
function logSumExp(x: ArrayLike<number>, offset: number, n: number, t: number): number {
  let max = Number.NEGATIVE_INFINITY;
  for (let i = 0; i < n; i++) max = Math.max(max, x[offset + i]! / t);
  let s = 0;
  for (let i = 0; i < n; i++) s += Math.exp(x[offset + i]! / t - max);
  return max + Math.log(s);
}

/** log softmax(logits / t)[token] of one row. */
export function tokenLogprob(
  logits: ArrayLike<number>,
  token: number,
  t = 1,
  offset = 0,
  n = logits.length - offset,
): number {
  return logits[offset + token]! / t - logSumExp(logits, offset, n, t);
}

/** Picks a token from `logits[offset .. offset + n)` with `rng` (unused when greedy). */
export function sampleToken(
  logits: ArrayLike<number>,
  params: SamplingParams,
  rng: Rng,
  offset = 0,
  n = logits.length - offset,
): SampledToken {
  const t = params.temperature ?? 1;
  if (t < 0 || !Number.isFinite(t)) throw new RangeError(`temperature must be >= 0, got ${t}`);
  if (t === 0) {
    const token = argmaxOf(logits, offset, n);
    return { token, logprob: tokenLogprob(logits, token, 1, offset, n) };
  }
  const lse = logSumExp(logits, offset, n, t);
  const topK = params.topK && params.topK > 0 ? Math.min(params.topK, n) : n;
  const topP = params.topP ?? 1;
  if (!(topP > 0 && topP <= 1)) throw new RangeError(`top_p must be in (0, 1], got ${topP}`);
  let token: number;
  if (topK === n && topP >= 1) {
    // Inverse CDF over the whole vocabulary.
    const u = rng.next();
    let acc = 0;
    token = n - 1;
    for (let i = 0; i < n; i++) {
      acc += Math.exp(logits[offset + i]! / t - lse);
      if (u < acc) {
        token = i;
        break;
      }
    }
  } else {
    // Only candidates are sorted (a full sort of a 150k vocabulary per row and step is slow):
    // the k largest with top-k; with top-p alone, the tokens of probability ≥ (1 − top_p) / n —
    // the others hold < 1 − top_p of the mass together, so the nucleus never reaches them.
    let cand: number[];
    if (topK < n) cand = largestK(logits, offset, n, topK);
    else {
      const floor = Math.log((1 - topP) / n) + lse;
      cand = [];
      for (let i = 0; i < n; i++) if (logits[offset + i]! / t >= floor) cand.push(i);
    }
    cand.sort((a, b) => logits[offset + b]! - logits[offset + a]! || a - b);
    let kept = cand;
    const probs = kept.map((i) => Math.exp(logits[offset + i]! / t - lse));
    if (topP < 1) {
      // Renormalised over the top-k set, keep tokens until the cumulative probability reaches
      // top_p (the token that crosses it is kept, so at least one token always is).
      const total = probs.reduce((a, b) => a + b, 0);
      let acc = 0;
      let keep = 0;
      while (keep < kept.length) {
        acc += probs[keep]! / total;
        keep++;
        if (acc >= topP) break;
      }
      kept = kept.slice(0, keep);
      probs.length = keep;
    }
    const total = probs.reduce((a, b) => a + b, 0);
    const u = rng.next() * total;
    let acc = 0;
    token = kept[kept.length - 1]!;
    for (let j = 0; j < kept.length; j++) {
      acc += probs[j]!;
      if (u < acc) {
        token = kept[j]!;
        break;
      }
    }
  }
  return { token, logprob: logits[offset + token]! / t - lse };
}

/** Indices of the k largest values (any order), by a size-k min-heap. */
function largestK(x: ArrayLike<number>, offset: number, n: number, k: number): number[] {
  const heap: number[] = [];
  const v = (i: number) => x[offset + heap[i]!]!;
  const less = (i: number, j: number) => v(i) < v(j) || (v(i) === v(j) && heap[i]! > heap[j]!);
  const swap = (i: number, j: number) => {
    const t = heap[i]!;
    heap[i] = heap[j]!;
    heap[j] = t;
  };
  const down = (i: number) => {
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < heap.length && less(l, m)) m = l;
      if (r < heap.length && less(r, m)) m = r;
      if (m === i) return;
      swap(i, m);
      i = m;
    }
  };
  for (let i = 0; i < n; i++) {
    if (heap.length < k) {
      heap.push(i);
      for (let c = heap.length - 1; c > 0; ) {
        const p = (c - 1) >> 1;
        if (!less(c, p)) break;
        swap(c, p);
        c = p;
      }
    } else {
      const xi = x[offset + i]!;
      const top = x[offset + heap[0]!]!;
      // Ties keep the lower index (as a stable descending sort would).
      if (xi > top) {
        heap[0] = i;
        down(0);
      }
    }
  }
  return heap;
}
