/**
 * The stop string that occurs earliest in `text` (the first listed wins a tie), with where it
 * starts: generation ends there and the text is cut before it. Both decode paths (the standard
 * loop and the continuous batcher) check each row's decoded text with it.
 */
export function firstStop(
  text: string,
  stops: readonly string[],
): { stop: string; index: number } | undefined {
  let best: { stop: string; index: number } | undefined;
  for (const stop of stops) {
    const index = text.indexOf(stop);
    if (index >= 0 && (!best || index < best.index)) best = { stop, index };
  }
  return best;
}
