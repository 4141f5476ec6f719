import { GatewayError } from './errors.js';

/** A counting semaphore with a bounded queue (429 beyond it): the gateway's generation slots. */
export class Slots {
  #free: number;
  readonly #queue: (() => void)[] = [];
  readonly #maxQueue: number;
  constructor(n: number, maxQueue: number) {
    this.#free = n;
    this.#maxQueue = maxQueue;
  }
  async acquire(signal: AbortSignal): Promise<() => void> {
    if (this.#free > 0) {
      this.#free--;
      return () => this.#release();
    }
    if (this.#queue.length >= this.#maxQueue)
      throw new GatewayError(429, 'too many requests are waiting for the policy; retry later', {
        code: 'rate_limit_exceeded',
      });
    await new Promise<void>((resolve, reject) => {
      const wake = () => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      };
      const onAbort = () => {
        const i = this.#queue.indexOf(wake);
        if (i >= 0) this.#queue.splice(i, 1);
        reject(signal.reason);
      };
      this.#queue.push(wake);
      signal.addEventListener('abort', onAbort, { once: true });
    });
    return () => this.#release();
  }
  #release() {
    const next = this.#queue.shift();
    if (next) next();
    else this.#free++;
  }
}
