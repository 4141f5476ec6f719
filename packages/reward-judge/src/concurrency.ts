/** At most `limit` tasks run at once; the rest wait in arrival order. */
export function createLimiter(limit: number): <T>(task: () => Promise<T>) => Promise<T> {
  let active = 0;
  const queue: (() => void)[] = [];
  return async <T>(task: () => Promise<T>): Promise<T> => {
    if (active >= limit) await new Promise<void>((resolve) => queue.push(resolve));
    else active++;
    // A woken waiter inherits the finished task's slot, so `active` is not incremented again.
    try {
      return await task();
    } finally {
      if (queue.length > 0) queue.shift()!();
      else active--;
    }
  };
}
