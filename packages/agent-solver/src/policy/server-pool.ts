import { ConfigError } from '@flowgrpo/core';

// Several inference servers behind one engine. Each request goes to the healthy server with the
// fewest requests in flight (ties broken round-robin), or strictly round-robin. A server whose
// request failed in a way that points at the server (connection refused or reset, timeout, 5xx)
// is skipped for `cooldownMs`, then tried again; if every server is cooling down, the one that
// recovers first is used rather than failing outright.

export type BalanceStrategy = 'least-in-flight' | 'round-robin';

export interface PooledServer<C> {
  readonly baseURL: string;
  readonly client: C;
  inFlight: number;
  /** Epoch ms until which the server is skipped; 0 when healthy. */
  downUntil: number;
  /** Consecutive failures. */
  failures: number;
  /** Requests answered successfully. */
  served: number;
}

export interface ServerPoolOptions {
  strategy?: BalanceStrategy;
  /** How long a failed server is skipped (default 10 s); doubles per consecutive failure, ≤ 8×. */
  cooldownMs?: number;
  now?: () => number;
}

export class ServerPool<C> {
  readonly servers: PooledServer<C>[];
  readonly strategy: BalanceStrategy;
  readonly cooldownMs: number;
  #cursor = 0;
  #now: () => number;

  constructor(servers: Array<{ baseURL: string; client: C }>, options: ServerPoolOptions = {}) {
    if (servers.length === 0)
      throw new ConfigError('a server pool needs at least one server', { key: 'baseURLs' });
    this.servers = servers.map((s) => ({
      ...s,
      inFlight: 0,
      downUntil: 0,
      failures: 0,
      served: 0,
    }));
    this.strategy = options.strategy ?? 'least-in-flight';
    this.cooldownMs = options.cooldownMs ?? 10_000;
    this.#now = options.now ?? Date.now;
  }

  /** The server for the next request. */
  pick(): PooledServer<C> {
    const now = this.#now();
    const n = this.servers.length;
    const healthy: PooledServer<C>[] = [];
    for (let k = 0; k < n; k++) {
      const s = this.servers[(this.#cursor + k) % n]!;
      if (s.downUntil <= now) healthy.push(s);
    }
    let chosen: PooledServer<C>;
    if (healthy.length === 0) {
      chosen = this.servers.reduce((a, b) => (b.downUntil < a.downUntil ? b : a));
    } else if (this.strategy === 'round-robin') {
      chosen = healthy[0]!;
    } else {
      chosen = healthy.reduce((a, b) => (b.inFlight < a.inFlight ? b : a));
    }
    this.#cursor = (this.servers.indexOf(chosen) + 1) % n;
    return chosen;
  }

  /** Runs `fn` against a picked server, counting it in flight. */
  async use<T>(fn: (server: PooledServer<C>) => Promise<T>): Promise<T> {
    const server = this.pick();
    server.inFlight++;
    try {
      const result = await fn(server);
      this.markOk(server);
      return result;
    } finally {
      server.inFlight--;
    }
  }

  markOk(server: PooledServer<C>): void {
    server.failures = 0;
    server.downUntil = 0;
    server.served++;
  }

  markDown(server: PooledServer<C>): void {
    server.failures++;
    const factor = Math.min(8, 2 ** (server.failures - 1));
    server.downUntil = this.#now() + this.cooldownMs * factor;
  }
}
