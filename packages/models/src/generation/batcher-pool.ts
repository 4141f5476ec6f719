import type { BatchRow, FusedBatcher } from './fused-batcher.js';

// Continuous batching on several cores. One FusedBatcher runs its chunks one after another, and a
// small model's chunk gains little from intra-op threads: its kernels are too small to split, and
// the threads meet at every kernel. Batchers in separate worker threads do not share kernels, so
// they run side by side, one per core (docs/performance.md, "Worker batchers") — and this thread
// stays free for tools and HTTP meanwhile.
//
// The pool starts with the batcher on this thread. When the rows in flight first reach `from`
// (a rollout phase; not a lone request, which a worker would only delay) it opens the worker
// batchers and sends every later request to the least-loaded one; the local batcher finishes
// what it holds. A row's tokens depend only on its own logits and random stream, never on its
// batch-mates, so where a row runs does not change what it samples.

export interface WorkerBatchers {
  /** Worker batchers to open. */
  count: number;
  /** Rows in flight (running, waiting, submitted) at which the workers open. */
  from: number;
  /**
   * Opens one batcher in a new worker thread; `close` ends the thread, `ended` settles when the
   * thread has ended for any reason (closed, or lost).
   */
  open(): Promise<{ batcher: FusedBatcher; close(): Promise<void>; ended: Promise<unknown> }>;
}

type Shard = Awaited<ReturnType<WorkerBatchers['open']>>;

const STAT_KEYS = ['chunks', 'admitted', 'joins', 'stepsRun', 'rowSteps'] as const;

export class BatcherPool {
  readonly #local: FusedBatcher;
  readonly #workers: WorkerBatchers | undefined;
  #shards: Shard[] | undefined;
  #opening: Promise<void> | undefined;
  /** Rows submitted while the workers open. */
  readonly #held: BatchRow[] = [];
  #maxBatchSize: number;
  #closed = false;
  /** Why the workers could not open, or why the last one ended (the pool then stays on this thread). */
  openError: unknown;

  constructor(local: FusedBatcher, workers?: WorkerBatchers) {
    this.#local = local;
    this.#workers = workers && workers.count > 0 ? workers : undefined;
    this.#maxBatchSize = local.maxBatchSize;
  }

  /** The generate graph's inputs (for the LoRA feeds). */
  get inputs() {
    return this.#local.inputs;
  }

  /** Worker batchers open now (0 until the rows in flight first reach `from`). */
  get workerCount(): number {
    return this.#shards?.length ?? 0;
  }

  /**
   * Rows generated together at most: the batcher on this thread runs up to n, each worker
   * batcher ⌈n / workers⌉ — so while this thread's batcher finishes the rows it took before
   * the workers opened, up to about 2n run at once.
   */
  get maxBatchSize(): number {
    return this.#maxBatchSize;
  }

  set maxBatchSize(n: number) {
    this.#maxBatchSize = n;
    this.#local.maxBatchSize = n;
    const shards = this.#shards ?? [];
    for (const s of shards) s.batcher.maxBatchSize = Math.max(1, Math.ceil(n / shards.length));
  }

  /**
   * The batchers' counters, summed: a live view, like a FusedBatcher's own `stats` (a caller
   * that keeps it reads the current sums, over the batchers open at the time of reading).
   */
  readonly stats: FusedBatcher['stats'] = (() => {
    const view = {} as FusedBatcher['stats'];
    for (const k of STAT_KEYS)
      Object.defineProperty(view, k, {
        enumerable: true,
        get: () =>
          [
            this.#local,
            ...[...(this.#shards ?? []), ...this.#closing].map((s) => s.batcher),
          ].reduce((sum, b) => sum + b.stats[k], this.#retired[k]),
      });
    return view;
  })();

  #closing: Shard[] = [];

  /** Counters of worker batchers that have left the pool (lost or closed): never go backwards. */
  readonly #retired = { chunks: 0, admitted: 0, joins: 0, stepsRun: 0, rowSteps: 0 };

  #retire(shard: Shard): void {
    for (const k of STAT_KEYS) this.#retired[k] += shard.batcher.stats[k];
  }

  submit(rows: BatchRow[]): void {
    if (this.#shards && !this.#closed) {
      this.#spread(rows);
      return;
    }
    const w = this.#workers;
    const inFlight = this.#local.load + this.#held.length + rows.length;
    if (
      w &&
      !this.#closed &&
      this.openError === undefined &&
      (this.#opening || inFlight >= w.from)
    ) {
      this.#held.push(...rows);
      this.#opening ??= this.#open(w);
      return;
    }
    this.#local.submit(rows);
  }

  async #open(w: WorkerBatchers): Promise<void> {
    const tries = await Promise.allSettled(Array.from({ length: w.count }, () => w.open()));
    const opened = tries.flatMap((t) => (t.status === 'fulfilled' ? [t.value] : []));
    const failed = tries.find((t): t is PromiseRejectedResult => t.status === 'rejected');
    if (this.#closed) {
      // Closed while the workers opened: the held rows run here rather than in workers that
      // are about to end.
      await Promise.allSettled(opened.map((s) => s.close()));
      this.#local.submit(this.#held.splice(0));
      return;
    }
    if (failed) {
      this.openError = failed.reason;
      await Promise.allSettled(opened.map((s) => s.close()));
      process.emitWarning(
        `generation stays on this thread: a worker batcher did not open (${String(failed.reason)})`,
        { code: 'FLOWGRPO_GENERATE_WORKERS' },
      );
      this.#local.submit(this.#held.splice(0));
      return;
    }
    this.#shards = opened;
    for (const s of opened) void s.ended.then((reason) => this.#lose(s, reason));
    this.maxBatchSize = this.#maxBatchSize;
    this.#spread(this.#held.splice(0));
  }

  /**
   * A worker batcher ended while the pool was open (its thread died or was terminated from
   * outside). The rows it was running or holding have failed with the worker's error — their
   * random streams have advanced, so they cannot be replayed elsewhere with the same samples —
   * and later rows go to the other workers, or to this thread when none is left.
   */
  #lose(shard: Shard, reason: unknown): void {
    const shards = this.#shards;
    const i = shards?.indexOf(shard) ?? -1;
    if (this.#closed || !shards || i < 0) return;
    shards.splice(i, 1);
    this.#retire(shard);
    process.emitWarning(
      `a worker batcher ended (${String(reason)}): its rows failed; generation goes on ${
        shards.length > 0 ? `in ${shards.length} worker(s)` : 'on this thread'
      }`,
      { code: 'FLOWGRPO_GENERATE_WORKERS' },
    );
    if (shards.length === 0) {
      this.#shards = undefined;
      this.openError = reason;
    } else this.maxBatchSize = this.#maxBatchSize;
  }

  /** Each row to the least-loaded worker batcher; one submit per batcher, so rows start together. */
  #spread(rows: BatchRow[]): void {
    const shards = this.#shards!;
    const loads = shards.map((s) => s.batcher.load);
    const parts: BatchRow[][] = shards.map(() => []);
    for (const r of rows) {
      const i = loads.indexOf(Math.min(...loads));
      parts[i]!.push(r);
      loads[i]!++;
    }
    parts.forEach((p, i) => {
      if (p.length > 0) shards[i]!.batcher.submit(p);
    });
  }

  /** Ends the worker threads (after their running chunk); the local batcher is the caller's. */
  async close(): Promise<void> {
    this.#closed = true;
    await this.#opening;
    const shards = this.#shards ?? [];
    this.#shards = undefined;
    // Counted while they finish their running chunk, then folded into the retired counters.
    this.#closing = shards;
    await Promise.all(shards.map((s) => s.close()));
    for (const s of shards) this.#retire(s);
    this.#closing = [];
  }
}
