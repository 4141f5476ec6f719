import { ConfigError } from '@flowgrpo/core';

// A counting semaphore for capping concurrent requests. Waiters are served first-in first-out,
// and a waiter whose AbortSignal fires leaves the queue without taking a slot.

export class Semaphore {
  readonly limit: number;
  #active = 0;
  #waiters: Array<{ grant: () => void }> = [];

  constructor(limit: number) {
    if (!Number.isInteger(limit) || limit < 1) {
      throw new ConfigError(`concurrency limit must be a positive integer, got ${limit}`, {
        key: 'maxConcurrency',
      });
    }
    this.limit = limit;
  }

  /** Slots currently held. */
  get active(): number {
    return this.#active;
  }

  /** Callers waiting for a slot. */
  get waiting(): number {
    return this.#waiters.length;
  }

  /** Waits for a slot; resolves to a release function that must be called exactly once. */
  async acquire(signal?: AbortSignal): Promise<() => void> {
    signal?.throwIfAborted();
    if (this.#active < this.limit) {
      this.#active++;
      return this.#releaser();
    }
    return new Promise((resolve, reject) => {
      const waiter = {
        grant: () => {
          signal?.removeEventListener('abort', onAbort);
          this.#active++;
          resolve(this.#releaser());
        },
      };
      const onAbort = () => {
        const i = this.#waiters.indexOf(waiter);
        if (i >= 0) this.#waiters.splice(i, 1);
        reject(signal?.reason);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#waiters.push(waiter);
    });
  }

  /** Runs `fn` while holding a slot. */
  async run<T>(fn: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    const release = await this.acquire(signal);
    try {
      return await fn();
    } finally {
      release();
    }
  }

  #releaser(): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#active--;
      this.#waiters.shift()?.grant();
    };
  }
}
