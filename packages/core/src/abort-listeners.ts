import { getMaxListeners, setMaxListeners } from 'node:events';

/**
 * Every rollout running at once listens for the run's abort signal (the agent, its tools, its
 * LLM calls), so `n` listeners on one signal are the design, not a leak — but past 10 Node
 * prints a MaxListenersExceededWarning in the middle of the user's progress bars. Raises the
 * signal's limit to `n` (never lowers it; 0 means unlimited already).
 */
export function expectAbortListeners(signal: AbortSignal | undefined, n: number): void {
  if (!signal) return;
  const limit = getMaxListeners(signal);
  if (limit !== 0 && limit < n) setMaxListeners(n, signal);
}
