// ONNX Runtime sessions hosted in a worker thread. `session.run` blocks the thread it runs on, so
// a rollout that interleaves model calls with tool calls, HTTP requests and timers keeps its
// sessions here and awaits `run` from the main thread, which stays responsive meanwhile.
//
// The worker's code is session-worker-main.ts, a real module checked like the rest. From the
// compiled package the worker starts its .js twin directly; from TypeScript sources (tsx, vitest)
// a one-line bootstrap registers tsx's loader in the worker first, since Node 20 cannot start a
// worker from a .ts file and does not pass `--import` loaders on to workers.

import { Worker } from 'node:worker_threads';
import * as ort from 'onnxruntime-node';
import { resolveDevice } from './devices.js';
import { type Device, SessionRunError, SessionWorkerError } from './errors.js';
import { type ValueSpec, validateFeeds } from './feeds.js';
import { type CreateSessionOptions, classifyLoadError, ortSessionOptions } from './session.js';
import type {
  LoadResult,
  WireTensor,
  WorkerCall,
  WorkerClose,
  WorkerReply,
  WorkerRequest,
} from './session-worker-protocol.js';

type Reply = WorkerReply;

interface Pending {
  resolve: (r: Reply) => void;
  reject: (e: Error) => void;
}

/**
 * Starts the worker module `name` (beside `callerUrl`, the starting module's import.meta.url) in
 * a new thread: its compiled .js twin, or from TypeScript sources (tsx, vitest) its .ts file
 * behind a one-line bootstrap that registers tsx's loader first.
 */
export function startModuleWorker(callerUrl: string, name: string): Worker {
  if (!callerUrl.endsWith('.ts')) return new Worker(new URL(`./${name}.js`, callerUrl));
  const main = new URL(`./${name}.ts`, callerUrl).href;
  const tsx = import.meta.resolve('tsx/esm/api');
  const boot = `import(${JSON.stringify(tsx)}).then((m) => { m.register(); return import(${JSON.stringify(main)}); });`;
  return new Worker(boot, { eval: true });
}

export interface WorkerSessionOptions extends Omit<CreateSessionOptions, 'deviceOutputs'> {
  /**
   * Outputs kept inside the worker and fed back as inputs on the next run (output name → input
   * name), e.g. `{ 'present.0.key': 'past_key_values.0.key' }`. On WebGPU they stay in GPU buffers.
   */
  carry?: Record<string, string>;
}

export interface WorkerRunOptions {
  /**
   * Transfer the feeds' ArrayBuffers to the worker instead of copying them (the caller's arrays
   * become detached, length 0): all feeds (true) or the named ones. Outputs always come back
   * transferred.
   */
  transfer?: boolean | readonly string[];
  /** Output names to compute (default: all). */
  fetches?: readonly string[];
}

/** A worker thread that owns ONNX Runtime sessions. */
export class SessionWorker {
  readonly #worker: Worker;
  readonly #pending = new Map<number, Pending>();
  #nextId = 1;
  #exited: Error | undefined;
  /** Whether terminate() was called. */
  #terminating = false;
  /** Whether the thread has exited (on its own, or terminated). */
  #threadExited = false;
  /** Settles when the thread has exited; registered at start, so it never misses the event. */
  readonly #gone: Promise<void>;
  #onExit: ((e: Error) => void) | undefined;
  /**
   * Settles (never rejects) with the reason once the worker has ended: terminate(), an uncaught
   * error in the thread, or its exit. Pools watch it to stop sending work to a worker that is gone.
   */
  readonly ended: Promise<Error> = new Promise((resolve) => {
    this.#onExit = resolve;
  });

  constructor() {
    this.#worker = startModuleWorker(import.meta.url, 'session-worker-main');
    this.#worker.unref();
    this.#worker.on('message', (r: Reply) => {
      const p = this.#pending.get(r.id);
      if (!p) return;
      this.#pending.delete(r.id);
      if (this.#pending.size === 0) this.#worker.unref();
      p.resolve(r);
    });
    this.#worker.on('error', (e) =>
      this.#fail(new SessionWorkerError(`session worker failed: ${e.message}`, { cause: e })),
    );
    this.#gone = new Promise<void>((resolve) => {
      this.#worker.once('exit', (code) => {
        this.#threadExited = true;
        this.#fail(new SessionWorkerError(`session worker exited (code ${code})`));
        resolve();
      });
    });
  }

  #fail(e: Error): void {
    this.#exited ??= e;
    this.#onExit?.(this.#exited);
    for (const p of this.#pending.values()) p.reject(e);
    this.#pending.clear();
  }

  /** @internal */
  call(message: WorkerCall, transfer: ArrayBuffer[] = []): Promise<Reply> {
    if (this.#exited) return Promise.reject(this.#exited);
    const id = this.#nextId++;
    return new Promise<Reply>((resolve, reject) => {
      try {
        // Throws before sending on a value it cannot clone or a buffer already transferred
        // (detached): no call is then pending, and the thread must not stay ref'd for it.
        this.#worker.postMessage({ ...message, id } as WorkerRequest, transfer);
      } catch (e) {
        reject(
          new SessionWorkerError(
            `cannot send to the session worker: ${e instanceof Error ? e.message : String(e)}`,
            { cause: e },
          ),
        );
        return;
      }
      this.#pending.set(id, { resolve, reject });
      this.#worker.ref();
    });
  }

  /** Load a model into the worker. Device resolution (and its probes) happens on this thread. */
  async load(
    model: string | Uint8Array,
    options: WorkerSessionOptions = {},
  ): Promise<WorkerSession> {
    const device = await resolveDevice(options.device ?? 'auto');
    const file = typeof model === 'string' ? model : '<bytes>';
    const r = await this.call({
      op: 'load',
      model,
      // Carried outputs are the worker's device outputs: on WebGPU they stay in GPU buffers.
      options: ortSessionOptions(device, {
        ...options,
        deviceOutputs: Object.keys(options.carry ?? {}),
      }),
      carry: options.carry ?? {},
    });
    if (!r.ok) {
      const reason = r.error!.message;
      throw r.error!.kind === 'load'
        ? classifyLoadError(device, file, reason)
        : new SessionWorkerError(reason);
    }
    const info = r.result as LoadResult & { inputs: ValueSpec[]; outputs: ValueSpec[] };
    return new WorkerSession(this, info.id, device, file, info.inputs, info.outputs, options.carry);
  }

  /**
   * Stop the worker; pending calls reject with SessionWorkerError. A run already executing inside
   * ONNX Runtime is allowed to finish first: terminating a thread in the middle of a native call
   * aborts the whole process (`terminate called after throwing an instance of 'Napi::Error'`).
   */
  async terminate(): Promise<void> {
    // A thread that already exited (it crashed, or a second terminate) has nothing to stop: its
    // 'exit' event has fired, so waiting for another would never end.
    if (this.#terminating || this.#threadExited) return this.#gone;
    this.#terminating = true;
    const idle = this.#pending.size === 0;
    this.#fail(new SessionWorkerError('session worker exited (terminated)'));
    this.#worker.ref();
    if (idle) await this.#worker.terminate();
    else this.#worker.postMessage({ op: 'close' } satisfies WorkerClose);
    return this.#gone;
  }
}

/** A session living in a SessionWorker; `run` resolves without blocking this thread. */
export class WorkerSession {
  readonly #worker: SessionWorker;
  readonly #id: number;
  readonly #carriedInputs: ReadonlySet<string>;
  #released = false;

  /** @internal Use SessionWorker.load. */
  constructor(
    worker: SessionWorker,
    id: number,
    readonly device: Device,
    readonly file: string,
    readonly inputs: readonly ValueSpec[],
    readonly outputs: readonly ValueSpec[],
    carry: Record<string, string> = {},
  ) {
    this.#worker = worker;
    this.#id = id;
    this.#carriedInputs = new Set(Object.values(carry));
  }

  get inputNames(): string[] {
    return this.inputs.map((s) => s.name);
  }

  get outputNames(): string[] {
    return this.outputs.map((s) => s.name);
  }

  /**
   * Run with host tensors; resolves to the host outputs (carried outputs stay in the worker).
   * Inputs that are `carry` targets may be omitted once a run has produced them.
   */
  async run(
    feeds: Record<string, ort.Tensor>,
    options: WorkerRunOptions = {},
  ): Promise<Record<string, ort.Tensor>> {
    if (this.#released) throw new SessionRunError({ reason: 'session was released' });
    const specs = this.inputs.filter((s) => !this.#carriedInputs.has(s.name) || s.name in feeds);
    validateFeeds(specs, feeds);
    const wire: Record<string, WireTensor> = {};
    const transfer: ArrayBuffer[] = [];
    for (const [name, t] of Object.entries(feeds)) {
      if (t.location !== 'cpu') {
        throw new SessionRunError({
          reason: `feed "${name}" is not a host tensor (location ${t.location})`,
        });
      }
      wire[name] = { type: t.type, dims: [...t.dims], data: t.data };
      const buf = (t.data as ArrayBufferView).buffer;
      const move = Array.isArray(options.transfer)
        ? options.transfer.includes(name)
        : options.transfer === true;
      if (move && buf instanceof ArrayBuffer && buf.byteLength > 0 && !transfer.includes(buf)) {
        transfer.push(buf);
      }
    }
    const r = await this.#worker.call(
      {
        op: 'run',
        session: this.#id,
        feeds: wire,
        ...(options.fetches && { fetches: [...options.fetches] }),
      },
      transfer,
    );
    if (!r.ok) {
      const reason = r.error!.message;
      throw r.error!.kind === 'run'
        ? new SessionRunError({ reason })
        : new SessionWorkerError(reason);
    }
    const out: Record<string, ort.Tensor> = {};
    for (const [name, w] of Object.entries(r.result as Record<string, WireTensor>)) {
      out[name] = new ort.Tensor(w.type as 'float32', w.data as Float32Array, w.dims);
    }
    return out;
  }

  /** Drop carried tensors (start a new sequence). */
  async resetCarry(): Promise<void> {
    const r = await this.#worker.call({ op: 'resetCarry', session: this.#id });
    if (!r.ok) throw new SessionWorkerError(r.error!.message);
  }

  async release(): Promise<void> {
    if (this.#released) return;
    this.#released = true;
    const r = await this.#worker.call({ op: 'release', session: this.#id });
    if (!r.ok) throw new SessionWorkerError(r.error!.message);
  }
}
