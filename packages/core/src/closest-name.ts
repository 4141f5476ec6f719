// "Did you mean …?" for a mistyped option, key or command: the known name nearest to the given
// one by edit distance, when it is near enough to be the likely intent.

/** Edits (insert, delete, substitute, swap neighbours) from `a` to `b`. */
function editDistance(a: string, b: string): number {
  let before: number[] = [];
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++)
      row[j] = Math.min(
        prev[j]! + 1,
        row[j - 1]! + 1,
        prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1),
        // a swap of two neighbours ("lenght") counts as one edit
        i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]
          ? before[j - 2]! + 1
          : Number.POSITIVE_INFINITY,
      );
    before = prev;
    prev = row;
  }
  return prev[b.length]!;
}

/** The known name closest to `given` (case-insensitive), if within a third of its length. */
export function closestName(given: string, known: Iterable<string>): string | undefined {
  let best: string | undefined;
  let bestDistance = Number.POSITIVE_INFINITY;
  for (const name of known) {
    const d = editDistance(given.toLowerCase(), name.toLowerCase());
    if (d < bestDistance) [best, bestDistance] = [name, d];
  }
  return bestDistance <= Math.max(1, Math.floor(given.length / 3)) ? best : undefined;
}

/** " (did you mean X?)" or "". */
export function didYouMean(given: string, known: Iterable<string>, prefix = ''): string {
  const name = closestName(given, known);
  return name === undefined ? '' : ` (did you mean ${prefix}${name}?)`;
}
