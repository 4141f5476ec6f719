import type * as ort from 'onnxruntime-node';
import type { ValueSpec } from '../runtime/feeds.js';
import type { Session } from '../runtime/session.js';
import type { WorkerSession } from '../runtime/session-worker.js';

// Where a FusedBatcher runs the `generate` graph: a Session on this thread (session.run blocks the
// event loop for the whole chunk) or a WorkerSession in a worker thread (this thread stays free,
// and batchers in several workers run on several cores at once — batcher-pool.ts).

export interface GenerateRunner {
  readonly inputs: readonly ValueSpec[];
  readonly inputNames: string[];
  readonly outputNames: string[];
  /**
   * Runs the graph. `transfer` names feeds whose buffers the caller will not read again: a worker
   * takes them without a copy (the KV cache, megabytes per chunk).
   */
  run(
    feeds: Record<string, ort.Tensor>,
    fetches: readonly string[] | undefined,
    transfer: readonly string[],
  ): Promise<Record<string, ort.Tensor>>;
}

/** A session on this thread. */
export function localRunner(session: Session): GenerateRunner {
  return {
    inputs: session.inputs,
    inputNames: session.inputNames,
    outputNames: session.outputNames,
    run: async (feeds, fetches) => (await session.run(feeds, fetches)).outputs,
  };
}

/** A session in a worker thread. */
export function workerRunner(session: WorkerSession): GenerateRunner {
  return {
    inputs: session.inputs,
    inputNames: session.inputNames,
    outputNames: session.outputNames,
    run: (feeds, fetches, transfer) =>
      session.run(feeds, { transfer, ...(fetches && { fetches }) }),
  };
}
