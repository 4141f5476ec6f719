/** Options shared by the rule-based rewards that compare against several golds. */
export interface GoldSplitOptions {
  /**
   * Separator of alternatives inside a string ground truth. The seeds' NQ preparation joins the
   * answer list with `'; '`; `null` keeps the string whole.
   */
  goldSeparator?: string | null;
}

/**
 * The list of alternative gold answers. Arrays are used as given; strings are split on the
 * separator (default `'; '`). Empty alternatives are dropped, but an all-empty input keeps one
 * empty gold so the matchers still return a defined score of 0.
 */
export function splitGoldAnswers(
  groundTruth: string | readonly string[],
  options: GoldSplitOptions = {},
): string[] {
  const separator = options.goldSeparator === undefined ? '; ' : options.goldSeparator;
  const raw =
    typeof groundTruth === 'string'
      ? separator === null || separator === ''
        ? [groundTruth]
        : groundTruth.split(separator)
      : [...groundTruth];
  const kept = raw.filter((g) => g.trim() !== '');
  return kept.length > 0 ? kept : [''];
}

/** max over golds of `score(gold)`, with the index of the first gold reaching it. */
export function maxOverGolds(
  golds: readonly string[],
  score: (gold: string) => number,
): { score: number; goldIndex: number } {
  let best = Number.NEGATIVE_INFINITY;
  let goldIndex = -1;
  golds.forEach((g, i) => {
    const s = score(g);
    if (s > best) {
      best = s;
      goldIndex = i;
    }
  });
  return { score: goldIndex < 0 ? 0 : best, goldIndex };
}
