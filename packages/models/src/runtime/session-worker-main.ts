// The worker thread's side of SessionWorker: owns ONNX Runtime sessions, runs them, keeps carried
// outputs (e.g. a KV cache) between runs and sends host outputs back. Every native call blocks
// this thread only; the caller's thread stays free for tools, HTTP and timers.

import { parentPort } from 'node:worker_threads';
import * as ort from 'onnxruntime-node';
import type {
  LoadResult,
  WireSpec,
  WireTensor,
  WorkerClose,
  WorkerErrorKind,
  WorkerReply,
  WorkerRequest,
} from './session-worker-protocol.js';

interface Entry {
  session: ort.InferenceSession;
  carry: Record<string, string>;
  /** Carried tensors by the input name they feed next run. */
  store: Map<string, ort.Tensor>;
}

class WorkerFailure extends Error {
  constructor(
    message: string,
    readonly kind: WorkerErrorKind,
  ) {
    super(message);
  }
}

const port = parentPort;
if (!port) throw new Error('session-worker-main.ts must run in a worker thread');
const sessions = new Map<number, Entry>();
let nextId = 1;

function specs(meta: readonly ort.InferenceSession.ValueMetadata[]): WireSpec[] {
  return meta.map((m) =>
    m.isTensor ? { name: m.name, type: m.type, shape: [...m.shape] } : { name: m.name },
  );
}

/** A host tensor as a wire tensor; only a buffer the tensor owns entirely is transferred. */
function toWire(t: ort.Tensor): { wire: WireTensor; buffer?: ArrayBuffer } {
  let data = t.data as unknown;
  if (!ArrayBuffer.isView(data)) return { wire: { type: t.type, dims: [...t.dims], data } };
  if (data.byteOffset !== 0 || data.byteLength !== data.buffer.byteLength)
    data = (data as Float32Array).slice();
  const view = data as ArrayBufferView;
  return {
    wire: { type: t.type, dims: [...t.dims], data },
    ...(view.buffer instanceof ArrayBuffer && { buffer: view.buffer }),
  };
}

function disposeStore(entry: Entry): void {
  for (const t of entry.store.values()) if (t.location === 'gpu-buffer') t.dispose();
  entry.store.clear();
}

async function handle(m: WorkerRequest): Promise<{ result: unknown; transfer?: ArrayBuffer[] }> {
  if (m.op === 'load') {
    let session: ort.InferenceSession;
    try {
      session =
        typeof m.model === 'string'
          ? await ort.InferenceSession.create(m.model, m.options)
          : await ort.InferenceSession.create(m.model, m.options);
    } catch (e) {
      throw new WorkerFailure(e instanceof Error ? e.message : String(e), 'load');
    }
    const id = nextId++;
    sessions.set(id, { session, carry: m.carry, store: new Map() });
    const result: LoadResult = {
      id,
      inputs: specs(session.inputMetadata),
      outputs: specs(session.outputMetadata),
    };
    return { result };
  }
  const entry = sessions.get(m.session);
  if (!entry) throw new WorkerFailure(`unknown session ${m.session}`, 'worker');
  if (m.op === 'release') {
    sessions.delete(m.session);
    disposeStore(entry);
    await entry.session.release();
    return { result: null };
  }
  if (m.op === 'resetCarry') {
    disposeStore(entry);
    return { result: null };
  }
  const feeds: Record<string, ort.Tensor> = Object.fromEntries(entry.store);
  for (const [k, v] of Object.entries(m.feeds))
    feeds[k] = new ort.Tensor(v.type as 'float32', v.data as Float32Array, v.dims);
  let out: ort.InferenceSession.ReturnType;
  try {
    out = m.fetches ? await entry.session.run(feeds, m.fetches) : await entry.session.run(feeds);
  } catch (e) {
    throw new WorkerFailure(e instanceof Error ? e.message : String(e), 'run');
  }
  const result: Record<string, WireTensor> = {};
  const transfer: ArrayBuffer[] = [];
  for (const [name, t] of Object.entries(out)) {
    const carryTo = entry.carry[name];
    if (carryTo !== undefined) {
      const old = entry.store.get(carryTo);
      if (old && old !== t && old.location === 'gpu-buffer') old.dispose();
      entry.store.set(carryTo, t);
      continue;
    }
    const { wire, buffer } = toWire(t);
    result[name] = wire;
    if (buffer) transfer.push(buffer);
  }
  return { result, transfer };
}

port.on('message', (m: WorkerRequest | WorkerClose) => {
  if (m.op === 'close') {
    // Messages are handled one at a time, so this runs only after any native call in progress
    // has returned: nothing is interrupted inside ONNX Runtime.
    void Promise.allSettled([...sessions.values()].map((e) => e.session.release())).then(() =>
      process.exit(0),
    );
    return;
  }
  handle(m).then(
    ({ result, transfer }) => {
      const reply: WorkerReply = { id: m.id, ok: true, result };
      port.postMessage(reply, transfer ?? []);
    },
    (e: unknown) => {
      const reply: WorkerReply = {
        id: m.id,
        ok: false,
        error: {
          kind: e instanceof WorkerFailure ? e.kind : 'worker',
          message: e instanceof Error ? e.message : String(e),
        },
      };
      port.postMessage(reply);
    },
  );
});
