// One abort signal shared by every concurrent rollout: the trainer raises its listener limit so
// that Node's MaxListenersExceededWarning (printed past 10) does not appear mid-run, as it did in
// `flowgrpo demo` with 64 rollouts in flight.
import { getMaxListeners } from 'node:events';
import { describe, expect, it } from 'vitest';
import { expectAbortListeners } from '../src/abort-listeners.js';

describe('expectAbortListeners', () => {
  it('raises the limit so that n listeners add without a warning, and never lowers it', async () => {
    const warnings: Error[] = [];
    const onWarning = (w: Error) => warnings.push(w);
    process.on('warning', onWarning);
    try {
      const signal = new AbortController().signal;
      expect(getMaxListeners(signal)).toBe(10); // Node's default for EventTarget
      expectAbortListeners(signal, 256);
      expect(getMaxListeners(signal)).toBe(256);
      for (let i = 0; i < 200; i++) signal.addEventListener('abort', () => {});
      expectAbortListeners(signal, 20);
      expect(getMaxListeners(signal)).toBe(256);
      // Node emits the warning on a later tick.
      await new Promise((r) => setImmediate(r));
    } finally {
      process.off('warning', onWarning);
    }
    expect(warnings.filter((w) => w.name === 'MaxListenersExceededWarning')).toEqual([]);
  });
});
