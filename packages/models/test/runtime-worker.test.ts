// SessionWorker: ONNX Runtime sessions in a worker thread, real sessions on the CPU EP. Expected
// numbers are derived by hand. Nothing here reads the clock: the tests that need the worker to be
// busy hold it inside a native model load on a FIFO that the test itself writes.

import { execFileSync } from 'node:child_process';
import { once } from 'node:events';
import { createWriteStream, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { decodeModel, OnnxDataType, onnxTensor, writeModel } from '@flowgrpo/graph';
import { testModelBytes } from '@flowgrpo/graph/testing';
import * as ort from 'onnxruntime-node';
import { afterAll, describe, expect, it } from 'vitest';
import {
  deviceAvailability,
  ExecutionProviderUnavailableError,
  InvalidFeedError,
  ModelLoadError,
  SessionRunError,
  SessionWorker,
  SessionWorkerError,
} from '../src/runtime/index.js';

const F = OnnxDataType.FLOAT;

const bytes = testModelBytes;

// Y = X·W + B → [[14,25],[20,31]] for X=[[1,2,3],[4,5,6]] (see runtime-session.test.ts).
const affine = bytes({
  name: 'affine',
  nodes: [
    { opType: 'MatMul', inputs: ['X', 'W'], outputs: ['XW'] },
    { opType: 'Add', inputs: ['XW', 'B'], outputs: ['Y'] },
  ],
  inputs: [{ name: 'X', elemType: F, shape: ['batch', 3] }],
  outputs: [{ name: 'Y', elemType: F, shape: ['batch', 2] }],
  initializers: [
    onnxTensor('W', new Float32Array([1, 0, 0, 1, 1, 1]), [3, 2]),
    onnxTensor('B', new Float32Array([10, 20]), [2]),
  ],
});
const X = () => new ort.Tensor('float32', new Float32Array([1, 2, 3, 4, 5, 6]), [2, 3]);

// A slow graph: K chained MatMuls by the identity, so the output equals the input exactly.
const N = 768;
const K = 6;
const identity = new Float32Array(N * N);
for (let i = 0; i < N; i++) identity[i * N + i] = 1;
const slow = bytes({
  name: 'slow',
  nodes: Array.from({ length: K }, (_, k) => ({
    opType: 'MatMul',
    inputs: [k === 0 ? 'x' : `h${k - 1}`, 'I'],
    outputs: [k === K - 1 ? 'y' : `h${k}`],
  })),
  inputs: [{ name: 'x', elemType: F, shape: [N, N] }],
  outputs: [{ name: 'y', elemType: F, shape: [N, N] }],
  initializers: [onnxTensor('I', identity, [N, N])],
});
const slowInput = () =>
  new ort.Tensor(
    'float32',
    Float32Array.from({ length: N * N }, (_, i) => i % 7),
    [N, N],
  );

/** A named pipe in a fresh temp folder: opening it for reading blocks until a writer comes. */
function makeFifo(): string {
  const dir = mkdtempSync(join(tmpdir(), 'flowgrpo-worker-'));
  dirs.push(dir);
  const path = join(dir, 'model.onnx');
  execFileSync('mkfifo', [path]);
  return path;
}

/**
 * Opens the FIFO for writing. The open completes only once a reader has opened it, i.e. once
 * ONNX Runtime is inside its native model load on the worker thread; `write` then ends the load.
 */
async function fifoWriter(path: string): Promise<{ write(bytes: Uint8Array): Promise<void> }> {
  const out = createWriteStream(path);
  await once(out, 'open');
  return {
    write: (bytes) =>
      new Promise((resolve, reject) => {
        out.on('error', reject);
        out.end(bytes, () => resolve());
      }),
  };
}

const workers: SessionWorker[] = [];
function worker(): SessionWorker {
  const w = new SessionWorker();
  workers.push(w);
  return w;
}
afterAll(async () => {
  for (const w of workers) await w.terminate();
});

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe('SessionWorker', () => {
  it('runs a model in the worker and returns host tensors', async () => {
    const s = await worker().load(affine, { device: 'cpu' });
    expect(s.device).toBe('cpu');
    expect(s.inputs).toEqual([{ name: 'X', type: 'float32', shape: ['batch', 3] }]);
    const out = await s.run({ X: X() });
    expect(out.Y!.dims).toEqual([2, 2]);
    expect(Array.from(out.Y!.data as Float32Array)).toEqual([14, 25, 20, 31]);
    await s.release();
    await expect(s.run({ X: X() })).rejects.toThrow(SessionRunError);
  });

  it('loads a model whose weights live in a shared external file', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'flowgrpo-worker-'));
    dirs.push(dir);
    const r = writeModel(decodeModel(affine), { dir, fileName: 'affine.onnx', sizeThreshold: 16 });
    expect(r.externalTensors).toBe(1); // W (24 bytes) went to weights.data
    const s = await worker().load(r.path, { device: 'cpu' });
    expect(Array.from((await s.run({ X: X() })).Y!.data as Float32Array)).toEqual([14, 25, 20, 31]);
  });

  it('keeps the main thread running while the worker is blocked in native code', async () => {
    // The worker loads a model from a FIFO: ONNX Runtime's native load blocks the worker thread
    // until this thread writes the model bytes. The load cannot finish before the write, and the
    // write needs this thread's event loop (a timer, then a stream write): so the order of events
    // itself shows that a blocked worker leaves this thread free. No clock is read.
    const fifo = makeFifo();
    const w = worker();
    const events: string[] = [];
    const loading = w.load(fifo, { device: 'cpu' }).then((s) => {
      events.push('loaded');
      return s;
    });
    const writer = await fifoWriter(fifo); // the worker is now blocked in the native load
    await new Promise((r) => setTimeout(r, 1));
    events.push('timer fired while the worker is blocked');
    await writer.write(affine);
    events.push('model written');
    const s = await loading;
    expect(events).toEqual(['timer fired while the worker is blocked', 'model written', 'loaded']);
    expect(Array.from((await s.run({ X: X() })).Y!.data as Float32Array)).toEqual([14, 25, 20, 31]);
  });

  it('runs the slow graph in the worker with exact results', async () => {
    // Multiplying by the identity K times returns the input exactly: a bounded count of
    // mismatches, never a dump of 589,824 numbers.
    const s = await worker().load(slow, { device: 'cpu', intraOpThreads: 1 });
    const input = slowInput();
    const y = (await s.run({ x: input })).y!.data as Float32Array;
    const x = input.data as Float32Array;
    let mismatches = 0;
    for (let i = 0; i < x.length; i++) if (y[i] !== x[i]) mismatches++;
    expect(mismatches).toBe(0);
  });

  it('copies feeds by default and transfers them on request', async () => {
    const s = await worker().load(affine, { device: 'cpu' });
    const kept = X();
    await s.run({ X: kept });
    expect((kept.data as Float32Array).length).toBe(6);
    const moved = X();
    const out = await s.run({ X: moved }, { transfer: true });
    expect((moved.data as Float32Array).byteLength).toBe(0); // detached: it went to the worker
    expect(Array.from(out.Y!.data as Float32Array)).toEqual([14, 25, 20, 31]);
    // By name: only the named feeds go (the batcher moves its KV cache, keeps its mask).
    const named = X();
    const again = await s.run({ X: named }, { transfer: ['not-X'] });
    expect((named.data as Float32Array).length).toBe(6);
    expect(Array.from(again.Y!.data as Float32Array)).toEqual([14, 25, 20, 31]);
    const byName = X();
    await s.run({ X: byName }, { transfer: ['X'] });
    expect((byName.data as Float32Array).byteLength).toBe(0);
    // A feed whose buffer went earlier cannot be sent again: a typed error, nothing left
    // pending, and the worker goes on.
    await expect(s.run({ X: byName })).rejects.toThrow(SessionWorkerError);
    expect(Array.from((await s.run({ X: X() })).Y!.data as Float32Array)).toEqual([14, 25, 20, 31]);
  });

  it('carries outputs inside the worker from run to run', async () => {
    // v = s_out = s_in + 1; s_out is carried back as s_in, v comes to the host.
    const counter = bytes({
      name: 'counter',
      nodes: [
        { opType: 'Add', inputs: ['s_in', 'one'], outputs: ['s_out'] },
        { opType: 'Identity', inputs: ['s_out'], outputs: ['v'] },
      ],
      inputs: [{ name: 's_in', elemType: F, shape: [1] }],
      outputs: [
        { name: 's_out', elemType: F, shape: [1] },
        { name: 'v', elemType: F, shape: [1] },
      ],
      initializers: [onnxTensor('one', new Float32Array([1]), [1])],
    });
    const s = await worker().load(counter, { device: 'cpu', carry: { s_out: 's_in' } });
    const first = await s.run({ s_in: new ort.Tensor('float32', new Float32Array([10]), [1]) });
    expect(Object.keys(first)).toEqual(['v']);
    const seen = [first.v!.data[0]];
    for (let i = 0; i < 2; i++) seen.push((await s.run({})).v!.data[0]);
    expect(seen).toEqual([11, 12, 13]);
    await s.resetCarry();
    await expect(s.run({})).rejects.toThrow(SessionRunError); // nothing carried: s_in missing
  });

  it('runs several sessions of one worker concurrently with the main thread', async () => {
    const w = worker();
    const [a, b] = await Promise.all([w.load(affine, { device: 'cpu' }), w.load(affine)]);
    const outs = await Promise.all([a.run({ X: X() }), b.run({ X: X() }), a.run({ X: X() })]);
    for (const o of outs) expect(Array.from(o.Y!.data as Float32Array)).toEqual([14, 25, 20, 31]);
  });

  it('computes only the requested fetches, and survives a run that fails inside ORT', async () => {
    // rows = Gather(table, idx) with table row r = [r, r]; sum = ReduceSum(rows) (all axes).
    const gather = bytes({
      name: 'gather',
      nodes: [
        { opType: 'Gather', inputs: ['table', 'idx'], outputs: ['rows'] },
        { opType: 'ReduceSum', inputs: ['rows'], outputs: ['sum'] },
      ],
      inputs: [{ name: 'idx', elemType: OnnxDataType.INT64, shape: ['n'] }],
      outputs: [
        { name: 'rows', elemType: F, shape: ['n', 2] },
        { name: 'sum', elemType: F, shape: [] },
      ],
      initializers: [onnxTensor('table', new Float32Array([0, 0, 1, 1, 2, 2]), [3, 2])],
    });
    const s = await worker().load(gather, { device: 'cpu' });
    const idx = (v: bigint[]) => new ort.Tensor('int64', BigInt64Array.from(v), [v.length]);
    const only = await s.run({ idx: idx([2n, 1n]) }, { fetches: ['sum'] });
    expect(Object.keys(only)).toEqual(['sum']);
    expect(only.sum!.data[0]).toBe(6); // rows [[2,2],[1,1]] sum to 6
    // Index 7 is out of range for 3 rows: ORT fails the run; the worker keeps serving.
    const e = await s.run({ idx: idx([7n]) }).catch((x: unknown) => x);
    expect(SessionRunError.isInstance(e)).toBe(true);
    expect((e as SessionRunError).reason).toMatch(/out of bounds|indices/i);
    expect((await s.run({ idx: idx([1n]) })).sum!.data[0]).toBe(2);
  });

  it('reports typed errors: bad feeds, corrupt model, missing EP', async () => {
    const w = worker();
    const s = await w.load(affine, { device: 'cpu' });
    const e = await s
      .run({ X: new ort.Tensor('float32', new Float32Array(4), [2, 2]) })
      .catch((x: unknown) => x);
    expect(InvalidFeedError.isInstance(e)).toBe(true);
    expect((e as InvalidFeedError).problem).toBe('dims');

    const dir = mkdtempSync(join(tmpdir(), 'flowgrpo-worker-'));
    dirs.push(dir);
    const corrupt = join(dir, 'corrupt.onnx');
    writeFileSync(corrupt, 'garbage bytes, not an ONNX protobuf');
    const le = await w.load(corrupt, { device: 'cpu' }).catch((x: unknown) => x);
    expect(ModelLoadError.isInstance(le)).toBe(true);
    expect((le as ModelLoadError).file).toBe(corrupt);

    if (!(await deviceAvailability('cuda')).available) {
      const ee = await w.load(affine, { device: 'cuda' }).catch((x: unknown) => x);
      expect(ExecutionProviderUnavailableError.isInstance(ee)).toBe(true);
    }
    // The worker survives all of that.
    expect(Array.from((await s.run({ X: X() })).Y!.data as Float32Array)).toEqual([14, 25, 20, 31]);
  });

  it('a thread that ended on its own: `ended` says so, pending calls reject, terminate() returns', async () => {
    const w = new SessionWorker();
    await w.load(affine, { device: 'cpu' });
    // The worker's own close message: the thread exits without terminate() (as after a crash).
    const pending = w.call({ op: 'close' } as never).catch((e: unknown) => e);
    expect(SessionWorkerError.isInstance(await pending)).toBe(true);
    expect((await w.ended).message).toMatch(/session worker exited \(code 0\)/);
    // Its 'exit' event has fired already: terminate() must not wait for another one.
    await w.terminate();
    await expect(w.load(affine, { device: 'cpu' })).rejects.toThrow(/session worker exited/);
  });

  it('rejects pending calls when the worker is terminated, letting the native call finish', async () => {
    // The worker is held inside a native load (FIFO, as above) when terminate() is called: the
    // pending call rejects at once; the worker exits only after the load returns, since killing a
    // thread inside a native call aborts the whole process. Writing the FIFO lets it return.
    const fifo = makeFifo();
    const w = new SessionWorker();
    const pending = w.load(fifo, { device: 'cpu' }).catch((e: unknown) => e);
    const writer = await fifoWriter(fifo); // the worker is now blocked in the native load
    const terminated = w.terminate();
    const e = await pending;
    expect(SessionWorkerError.isInstance(e)).toBe(true);
    expect((e as Error).message).toMatch(/session worker exited \(terminated\)/);
    await writer.write(affine);
    await terminated;
    await expect(w.load(affine, { device: 'cpu' })).rejects.toThrow(/session worker exited/);
  });
});
