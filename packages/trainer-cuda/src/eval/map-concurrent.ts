// The rollout pool every trainer and the evaluator use: `f` over `items`, at most `concurrency`
// calls in flight, results in the items' order. Each worker takes the next unstarted item when
// its call ends, so items start in order (0, 1, 2, …) whatever their durations — a run's seeds and
// ids depend on an item's index, never on which worker ran it.

/** `f(item, index)` for every item, at most `concurrency` at once; resolves in the items' order. */
export async function mapConcurrent<T, R>(
  items: readonly T[],
  concurrency: number,
  f: (item: T, index: number) => Promise<R>,
): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    for (let k = next++; k < items.length; k = next++) out[k] = await f(items[k]!, k);
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, worker));
  return out;
}
