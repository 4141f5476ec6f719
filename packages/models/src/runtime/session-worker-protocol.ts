import type { InferenceSession } from 'onnxruntime-node';

// Messages between SessionWorker (the caller's thread) and session-worker-main.ts (the worker).
// Tensors cross as plain objects; their ArrayBuffers are transferred where the sender owns them.

export interface WireTensor {
  type: string;
  dims: number[];
  data: unknown;
}

export interface WireSpec {
  name: string;
  type?: string;
  shape?: readonly (number | string)[];
}

export type WorkerRequest =
  | {
      op: 'load';
      id: number;
      model: string | Uint8Array;
      /** onnxruntime-node session options, as ortSessionOptions builds them. */
      options: InferenceSession.SessionOptions;
      /** Output name → input name, kept in the worker and fed back next run. */
      carry: Record<string, string>;
    }
  | {
      op: 'run';
      id: number;
      session: number;
      feeds: Record<string, WireTensor>;
      fetches?: string[];
    }
  | { op: 'release'; id: number; session: number }
  | { op: 'resetCarry'; id: number; session: number };

/** A request before SessionWorker numbers it. */
export type WorkerCall = WorkerRequest extends infer R
  ? R extends WorkerRequest
    ? Omit<R, 'id'>
    : never
  : never;

/** Graceful stop, handled after any native call in progress has returned. */
export interface WorkerClose {
  op: 'close';
}

export type WorkerErrorKind = 'load' | 'run' | 'worker';

export interface WorkerReply {
  id: number;
  ok: boolean;
  result?: unknown;
  error?: { kind: WorkerErrorKind; message: string };
}

export interface LoadResult {
  id: number;
  inputs: WireSpec[];
  outputs: WireSpec[];
}
