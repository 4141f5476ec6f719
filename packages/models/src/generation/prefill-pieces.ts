// How many prompt columns one prefill run takes, on both generation paths (the standard
// prefill/decode graphs and the fused generate graph). A run's attention scores are
// [rows, heads, columns, slots] floats: one run of 48 prompts of 1,800 tokens held 1.2 GiB per
// scores tensor on a 2-head model (and ORT's arena kept it). A batch whose scores stay within
// `prefillWholeScores` elements per head runs whole, as it always has — the same runs, so the
// same float rounding and the same samples (the demo's largest batches, 64 rows of 512 positions,
// are exactly 2^24). A larger one goes in pieces of at most `prefillChunkTokens` tokens
// (rows × columns), each piece extending the KV cache of the one before.

/** Score elements per head (rows × columns × slots) up to which a prefill runs whole. */
export const PREFILL_WHOLE_SCORES = 2 ** 24;

/** Prompt tokens (rows × columns) per piece when a prefill goes in pieces. */
export const PREFILL_CHUNK_TOKENS = 1024;

export interface PrefillLimits {
  /** Tokens (rows × columns) per piece of a prefill that goes in pieces (default 1024). */
  prefillChunkTokens?: number;
  /**
   * Score elements per head (rows × prompt columns²) up to which a prefill runs whole (default
   * 2^24); 0: every prefill of more than prefillChunkTokens tokens goes in pieces.
   */
  prefillWholeScores?: number;
}

/** Refuses limits that would admit nothing per run. */
export function checkPrefillLimits(o: PrefillLimits): void {
  const chunk = o.prefillChunkTokens;
  if (chunk !== undefined && !(Number.isInteger(chunk) && chunk >= 1))
    throw new RangeError(`prefillChunkTokens must be a positive integer, got ${chunk}`);
  const whole = o.prefillWholeScores;
  if (whole !== undefined && !(Number.isInteger(whole) && whole >= 0))
    throw new RangeError(`prefillWholeScores must be a non-negative integer, got ${whole}`);
}

/** Prompt columns per prefill run for `rows` prompts left-padded to `columns`. */
export function prefillWidth(rows: number, columns: number, o: PrefillLimits): number {
  if (rows * columns * columns <= (o.prefillWholeScores ?? PREFILL_WHOLE_SCORES)) return columns;
  const width = Math.floor((o.prefillChunkTokens ?? PREFILL_CHUNK_TOKENS) / rows);
  return Math.min(columns, Math.max(1, width));
}
