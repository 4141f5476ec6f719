// ONNX Runtime sessions hosted in a worker thread. `session.run` blocks the thread it runs on, so
// a rollout that interleaves model calls with tool calls, HTTP requests and timers keeps its
// sessions here and awaits `run` from the main thread, which stays responsive meanwhile.
//
// The worker's code is a plain-JS string started with `eval: true` (and onnxruntime-node is
// required by absolute path): it then runs unchanged from TypeScript sources (tsx, vitest) and
// from the compiled package, with no loader flags and no separate file to ship.

import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import * as ort from 'onnxruntime-node';
import { resolveDevice } from './devices.js';
import { type Device, SessionRunError, SessionWorkerError } from './errors.js';
import { type ValueSpec, validateFeeds } from './feeds.js';
import { type CreateSessionOptions, classifyLoadError, ortSessionOptions } from './session.js';

const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const ort = require(workerData.ortPath);
const sessions = new Map();
let nextId = 1;

function specs(meta) {
  return meta.map((m) => (m.isTensor ? { name: m.name, type: m.type, shape: m.shape } : { name: m.name }));
}
function plain(t) {
  let data = t.data;
  if (!ArrayBuffer.isView(data)) return { type: t.type, dims: Array.from(t.dims), data };
  // Transfer only a buffer the tensor owns entirely; otherwise send a copy.
  if (data.byteOffset !== 0 || data.byteLength !== data.buffer.byteLength) data = data.slice();
  return { type: t.type, dims: Array.from(t.dims), data };
}

async function handle(m) {
  if (m.op === 'load') {
    const s = await ort.InferenceSession.create(m.model, m.options);
    const id = nextId++;
    sessions.set(id, { s, carry: m.carry || {}, store: new Map() });
    return { result: { id, inputs: specs(s.inputMetadata), outputs: specs(s.outputMetadata) } };
  }
  const entry = sessions.get(m.session);
  if (!entry) throw Object.assign(new Error('unknown session ' + m.session), { kind: 'worker' });
  if (m.op === 'release') {
    sessions.delete(m.session);
    for (const t of entry.store.values()) if (t.location === 'gpu-buffer') t.dispose();
    await entry.s.release();
    return { result: null };
  }
  if (m.op === 'resetCarry') {
    for (const t of entry.store.values()) if (t.location === 'gpu-buffer') t.dispose();
    entry.store.clear();
    return { result: null };
  }
  // op === 'run'
  const feeds = {};
  for (const [k, t] of entry.store) feeds[k] = t;
  for (const [k, v] of Object.entries(m.feeds)) feeds[k] = new ort.Tensor(v.type, v.data, v.dims);
  let out;
  try {
    out = m.fetches ? await entry.s.run(feeds, m.fetches) : await entry.s.run(feeds);
  } catch (e) {
    throw Object.assign(e instanceof Error ? e : new Error(String(e)), { kind: 'run' });
  }
  const result = {};
  const transfer = [];
  for (const [name, t] of Object.entries(out)) {
    const carryTo = entry.carry[name];
    if (carryTo !== undefined) {
      const old = entry.store.get(carryTo);
      if (old && old !== t && old.location === 'gpu-buffer') old.dispose();
      entry.store.set(carryTo, t);
      continue;
    }
    const p = plain(t);
    result[name] = p;
    if (ArrayBuffer.isView(p.data)) transfer.push(p.data.buffer);
  }
  return { result, transfer };
}

parentPort.on('message', (m) => {
  if (m.op === 'close') {
    // Graceful stop: this message is handled only after any native run in progress has
    // returned, so nothing is interrupted inside ONNX Runtime.
    Promise.allSettled([...sessions.values()].map((e) => e.s.release())).then(() => process.exit(0));
    return;
  }
  handle(m).then(
    ({ result, transfer }) => parentPort.postMessage({ id: m.id, ok: true, result }, transfer || []),
    (e) => parentPort.postMessage({
      id: m.id,
      ok: false,
      error: { kind: e.kind || (m.op === 'load' ? 'load' : 'worker'), message: String(e && e.message || e) },
    }),
  );
});
`;

interface WireTensor {
  type: string;
  dims: number[];
  data: ort.Tensor['data'];
}

interface Reply {
  id: number;
  ok: boolean;
  result?: unknown;
  error?: { kind: 'load' | 'run' | 'worker'; message: string };
}

interface Pending {
  resolve: (r: Reply) => void;
  reject: (e: Error) => void;
}

export interface WorkerSessionOptions extends Omit<CreateSessionOptions, 'deviceOutputs'> {
  /**
   * Outputs kept inside the worker and fed back as inputs on the next run (output name → input
   * name), e.g. `{ 'present.0.key': 'past.0.key' }`. On WebGPU they stay in GPU buffers.
   */
  carry?: Record<string, string>;
}

export interface WorkerRunOptions {
  /**
   * Transfer the feeds' ArrayBuffers to the worker instead of copying them (the caller's arrays
   * become detached, length 0). Outputs always come back transferred.
   */
  transfer?: boolean;
  /** Output names to compute (default: all). */
  fetches?: readonly string[];
}

const requireHere = createRequire(import.meta.url);

/** A worker thread that owns ONNX Runtime sessions. */
export class SessionWorker {
  readonly #worker: Worker;
  readonly #pending = new Map<number, Pending>();
  #nextId = 1;
  #exited: Error | undefined;
  #closed: Promise<void> | undefined;

  constructor() {
    this.#worker = new Worker(WORKER_SOURCE, {
      eval: true,
      workerData: { ortPath: requireHere.resolve('onnxruntime-node') },
    });
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
    this.#worker.on('exit', (code) =>
      this.#fail(new SessionWorkerError(`session worker exited (code ${code})`)),
    );
  }

  #fail(e: Error): void {
    this.#exited ??= e;
    for (const p of this.#pending.values()) p.reject(e);
    this.#pending.clear();
  }

  /** @internal */
  call(message: Record<string, unknown>, transfer: ArrayBuffer[] = []): Promise<Reply> {
    if (this.#exited) return Promise.reject(this.#exited);
    const id = this.#nextId++;
    return new Promise<Reply>((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      this.#worker.ref();
      this.#worker.postMessage({ ...message, id }, transfer);
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
    const info = r.result as { id: number; inputs: ValueSpec[]; outputs: ValueSpec[] };
    return new WorkerSession(this, info.id, device, file, info.inputs, info.outputs, options.carry);
  }

  /**
   * Stop the worker; pending calls reject with SessionWorkerError. A run already executing inside
   * ONNX Runtime is allowed to finish first: terminating a thread in the middle of a native call
   * aborts the whole process (`terminate called after throwing an instance of 'Napi::Error'`).
   */
  async terminate(): Promise<void> {
    if (this.#exited && this.#closed) return this.#closed;
    this.#closed ??= new Promise<void>((resolve) => {
      this.#worker.once('exit', () => resolve());
    });
    const idle = this.#pending.size === 0;
    this.#fail(new SessionWorkerError('session worker exited (terminated)'));
    this.#worker.ref();
    if (idle) await this.#worker.terminate();
    else this.#worker.postMessage({ op: 'close' });
    return this.#closed;
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
      if (options.transfer && buf instanceof ArrayBuffer && !transfer.includes(buf)) {
        transfer.push(buf);
      }
    }
    const message: Record<string, unknown> = { op: 'run', session: this.#id, feeds: wire };
    if (options.fetches) message.fetches = [...options.fetches];
    const r = await this.#worker.call(message, transfer);
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
