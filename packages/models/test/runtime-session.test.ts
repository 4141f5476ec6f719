// createSession over real onnxruntime-node sessions. Models are written by our ONNX writer; the
// expected numbers are derived by hand in each test. Device availability is probed for real: CUDA
// is not installed on the CI machine, and WebGPU needs a Vulkan device (skipped, with the reason).

import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { OnnxDataType, type OnnxGraph, onnxTensor, writeModel } from '@flowgrpo/graph';
import { testModelBytes } from '@flowgrpo/graph/testing';
import * as ort from 'onnxruntime-node';
import { afterAll, describe, expect, it } from 'vitest';
import {
  chooseDevice,
  createSession,
  DeviceTensor,
  DeviceTensorAccessError,
  DeviceTensorStore,
  deviceAvailability,
  ExecutionProviderUnavailableError,
  InvalidFeedError,
  ModelLoadError,
  resolveDevice,
  SessionRunError,
  softwareVulkanAdapter,
} from '../src/runtime/index.js';
import { classifyLoadError, ortSessionOptions } from '../src/runtime/session.js';

const F = OnnxDataType.FLOAT;

const bytes = testModelBytes;

// Y = X·W + B; with X=[[1,2,3],[4,5,6]], W=[[1,0],[0,1],[1,1]], B=[10,20] → [[14,25],[20,31]].
const W = new Float32Array([1, 0, 0, 1, 1, 1]);
const affineGraph: OnnxGraph = {
  name: 'affine',
  nodes: [
    { opType: 'MatMul', inputs: ['X', 'W'], outputs: ['XW'] },
    { opType: 'Add', inputs: ['XW', 'B'], outputs: ['Y'] },
  ],
  inputs: [{ name: 'X', elemType: F, shape: ['batch', 3] }],
  outputs: [{ name: 'Y', elemType: F, shape: ['batch', 2] }],
  initializers: [onnxTensor('W', W, [3, 2]), onnxTensor('B', new Float32Array([10, 20]), [2])],
};
const affine = bytes(affineGraph);
const X = () => new ort.Tensor('float32', new Float32Array([1, 2, 3, 4, 5, 6]), [2, 3]);

// s_out = s_in + 1: a state that is carried from run to run.
const counter = bytes({
  name: 'counter',
  nodes: [{ opType: 'Add', inputs: ['s_in', 'one'], outputs: ['s_out'] }],
  inputs: [{ name: 's_in', elemType: F, shape: [1] }],
  outputs: [{ name: 's_out', elemType: F, shape: [1] }],
  initializers: [onnxTensor('one', new Float32Array([1]), [1])],
});

const tmpDirs: string[] = [];
function tmp(): string {
  const d = mkdtempSync(join(tmpdir(), 'flowgrpo-rt-'));
  tmpDirs.push(d);
  return d;
}
afterAll(() => {
  for (const d of tmpDirs) rmSync(d, { recursive: true, force: true });
});

const cuda = await deviceAvailability('cuda');
const webgpu = await deviceAvailability('webgpu');
if (!webgpu.available) console.info(`[runtime] WebGPU tests skipped: ${webgpu.reason}`);

describe('createSession on the CPU EP', () => {
  it('computes MatMul + Add and reports its inputs/outputs', async () => {
    const s = await createSession(affine, { device: 'cpu', intraOpThreads: 1 });
    expect(s.device).toBe('cpu');
    expect(s.inputs).toEqual([{ name: 'X', type: 'float32', shape: ['batch', 3] }]);
    expect(s.outputNames).toEqual(['Y']);
    const { outputs, device } = await s.run({ X: X() });
    expect(Array.from(outputs.Y!.data as Float32Array)).toEqual([14, 25, 20, 31]);
    expect(device).toEqual({});
    await s.release();
    await expect(s.run({ X: X() })).rejects.toThrow(SessionRunError);
  });

  it('fetches a subset of outputs; a failure inside ORT is a SessionRunError', async () => {
    // rows = Gather(table, idx) with table row r = [r, r]; total = ReduceSum over all axes.
    const s = await createSession(
      bytes({
        name: 'gather',
        nodes: [
          { opType: 'Gather', inputs: ['table', 'idx'], outputs: ['rows'] },
          { opType: 'ReduceSum', inputs: ['rows'], outputs: ['total'] },
        ],
        inputs: [{ name: 'idx', elemType: OnnxDataType.INT64, shape: ['n'] }],
        outputs: [
          { name: 'rows', elemType: F, shape: ['n', 2] },
          { name: 'total', elemType: F, shape: [] },
        ],
        initializers: [onnxTensor('table', new Float32Array([0, 0, 1, 1, 2, 2]), [3, 2])],
      }),
      { device: 'cpu' },
    );
    const idx = (v: bigint[]) => new ort.Tensor('int64', BigInt64Array.from(v), [v.length]);
    const { outputs } = await s.run({ idx: idx([2n, 2n, 0n]) }, ['total']);
    expect(Object.keys(outputs)).toEqual(['total']);
    expect(outputs.total!.data[0]).toBe(8); // [2,2] + [2,2] + [0,0]
    await expect(s.run({ idx: idx([3n]) })).rejects.toThrow(SessionRunError);
    await s.release();
  });

  it('gives the same numbers with 1 and 2 intra-op threads and in parallel mode', async () => {
    for (const o of [
      { intraOpThreads: 1 },
      { intraOpThreads: 2 },
      { executionMode: 'parallel' as const, interOpThreads: 2 },
    ]) {
      const s = await createSession(affine, { device: 'cpu', ...o });
      const { outputs } = await s.run({ X: X() });
      expect(Array.from(outputs.Y!.data as Float32Array)).toEqual([14, 25, 20, 31]);
      await s.release();
    }
  });

  it('loads external data from a path and from bytes', async () => {
    const dir = tmp();
    const r = writeModel(
      { ...(await import('@flowgrpo/graph')).decodeModel(affine) },
      { dir, fileName: 'affine.onnx', sizeThreshold: 16 },
    );
    expect(r.externalTensors).toBe(1);
    const fromPath = await createSession(r.path, { device: 'cpu' });
    expect(Array.from((await fromPath.run({ X: X() })).outputs.Y!.data as Float32Array)).toEqual([
      14, 25, 20, 31,
    ]);
    const fromBytes = await createSession(readFileSync(r.path), {
      device: 'cpu',
      externalData: [{ path: 'weights.data', data: readFileSync(join(dir, 'weights.data')) }],
    });
    expect(Array.from((await fromBytes.run({ X: X() })).outputs.Y!.data as Float32Array)).toEqual([
      14, 25, 20, 31,
    ]);
    // Without the external file the load fails with a ModelLoadError naming the model.
    await expect(createSession(readFileSync(r.path), { device: 'cpu' })).rejects.toThrow(
      ModelLoadError,
    );
  });

  it('auto picks cuda, then webgpu on a GPU, then cpu, by what the probes found', async () => {
    const gpu = webgpu.available && softwareVulkanAdapter() === undefined;
    const expected = cuda.available ? 'cuda' : gpu ? 'webgpu' : 'cpu';
    expect(await resolveDevice('auto')).toBe(expected);
    const choice = await chooseDevice('auto');
    expect(choice.device).toBe(expected);
    expect(choice.why).toMatch(/^auto: /);
    // Lavapipe (CI): WebGPU works when asked for, and auto says why it took the CPU instead.
    if (webgpu.available && !gpu) {
      expect(choice.why).toContain('software adapter');
      expect(await chooseDevice('webgpu')).toEqual({
        device: 'webgpu',
        why: `asked for on the software adapter ${softwareVulkanAdapter()}`,
      });
    }
  });
});

describe('load errors', () => {
  it.skipIf(cuda.available)(
    `device 'cuda' without the CUDA EP → ExecutionProviderUnavailableError with the fix`,
    async () => {
      const e = await createSession(affine, { device: 'cuda' }).catch((x: unknown) => x);
      expect(ExecutionProviderUnavailableError.isInstance(e)).toBe(true);
      const err = e as ExecutionProviderUnavailableError;
      expect(err.device).toBe('cuda');
      expect(err.reason).toMatch(/CUDA/);
      expect(err.fix).toContain('ONNXRUNTIME_NODE_INSTALL=cuda12');
      expect(err.fix).toMatch(/CUDA 12.*cuDNN 9/);
    },
  );

  it.skipIf(webgpu.available)(
    `device 'webgpu' without a Vulkan device → ExecutionProviderUnavailableError with the fix`,
    async () => {
      const e = await createSession(affine, { device: 'webgpu' }).catch((x: unknown) => x);
      expect(ExecutionProviderUnavailableError.isInstance(e)).toBe(true);
      expect((e as ExecutionProviderUnavailableError).fix).toMatch(/libvulkan1/);
      expect((e as ExecutionProviderUnavailableError).fix).toMatch(/mesa-vulkan-drivers/);
    },
  );

  it.skipIf(cuda.available)(
    'ORT’s own failure to start the CUDA EP is classified as unavailable, not a bad model',
    async () => {
      // Bypass our pre-check and let ORT try the missing provider library for real.
      const e = await ort.InferenceSession.create(affine, {
        executionProviders: ['cuda'],
        logSeverityLevel: 4,
      }).catch((x: unknown) => x);
      const reason = (e as Error).message;
      expect(classifyLoadError('cuda', '<bytes>', reason)).toBeInstanceOf(
        ExecutionProviderUnavailableError,
      );
      // A graph error on the same device stays a ModelLoadError.
      expect(
        classifyLoadError('cuda', 'm.onnx', 'Node (mm) Op (MatMul) [ShapeInferenceError] mismatch'),
      ).toBeInstanceOf(ModelLoadError);
    },
  );

  it('a corrupt, truncated or missing model file → ModelLoadError naming the file', async () => {
    const dir = tmp();
    const corrupt = join(dir, 'corrupt.onnx');
    writeFileSync(corrupt, 'this is not a protobuf');
    const truncated = join(dir, 'truncated.onnx');
    writeFileSync(truncated, affine.subarray(0, affine.length - 7));
    for (const file of [corrupt, truncated, join(dir, 'missing.onnx')]) {
      const e = await createSession(file, { device: 'cpu' }).catch((x: unknown) => x);
      expect(ModelLoadError.isInstance(e)).toBe(true);
      expect((e as ModelLoadError).file).toBe(file);
      expect((e as ModelLoadError).reason.length).toBeGreaterThan(0);
    }
  });

  it('a graph that does not type-check → ModelLoadError with ORT’s reason', async () => {
    const bad = bytes({
      ...affineGraph,
      nodes: [{ opType: 'NoSuchOp', inputs: ['X'], outputs: ['Y'] }],
    });
    const e = await createSession(bad, { device: 'cpu' }).catch((x: unknown) => x);
    expect(ModelLoadError.isInstance(e)).toBe(true);
    expect((e as ModelLoadError).file).toBe('<bytes>');
    expect((e as ModelLoadError).reason).toMatch(/NoSuchOp/);
  });
});

describe('feed validation', async () => {
  // Two inputs sharing the symbolic dim 'batch': Z = A + Bm, both [batch, 2].
  const two = await createSession(
    bytes({
      name: 'two',
      nodes: [{ opType: 'Add', inputs: ['A', 'Bm'], outputs: ['Z'] }],
      inputs: [
        { name: 'A', elemType: F, shape: ['batch', 2] },
        { name: 'Bm', elemType: F, shape: ['batch', 2] },
      ],
      outputs: [{ name: 'Z', elemType: F, shape: ['batch', 2] }],
      initializers: [],
    }),
    { device: 'cpu' },
  );
  const f = (rows: number, cols = 2) =>
    new ort.Tensor('float32', new Float32Array(rows * cols), [rows, cols]);
  const problem = async (feeds: Record<string, ort.Tensor>) => {
    const e = await two.run(feeds).catch((x: unknown) => x);
    expect(InvalidFeedError.isInstance(e)).toBe(true);
    return e as InvalidFeedError;
  };

  it('missing and unknown inputs', async () => {
    const missing = await problem({ A: f(1) });
    expect([missing.input, missing.problem, missing.got]).toEqual(['Bm', 'missing', '']);
    expect(missing.expected).toBe('float32 [batch, 2]');
    const unknown = await problem({ A: f(1), Bm: f(1), C: f(1) });
    expect([unknown.input, unknown.problem]).toEqual(['C', 'unknown']);
  });

  it('wrong dtype, rank, fixed dim, and inconsistent symbolic dim', async () => {
    const dtype = await problem({
      A: new ort.Tensor('int32', new Int32Array(2), [1, 2]),
      Bm: f(1),
    });
    expect([dtype.problem, dtype.expected, dtype.got]).toEqual([
      'dtype',
      'float32 [batch, 2]',
      'int32 [1, 2]',
    ]);
    const rank = await problem({
      A: new ort.Tensor('float32', new Float32Array(2), [2]),
      Bm: f(1),
    });
    expect(rank.problem).toBe('rank');
    const dims = await problem({ A: f(1, 3), Bm: f(1) });
    expect([dims.problem, dims.got]).toEqual(['dims', 'float32 [1, 3]']);
    const sym = await problem({ A: f(2), Bm: f(3) });
    expect(sym.problem).toBe('dims');
    expect(sym.message).toMatch(/"batch" is 2 in input "A" but 3/);
    // And a valid feed still runs: [1,2]+[3,4] = [4,6].
    const ok = await two.run({
      A: new ort.Tensor('float32', new Float32Array([1, 2]), [1, 2]),
      Bm: new ort.Tensor('float32', new Float32Array([3, 4]), [1, 2]),
    });
    expect(Array.from(ok.outputs.Z!.data as Float32Array)).toEqual([4, 6]);
  });
});

describe('device-resident outputs', () => {
  it('a DeviceTensorStore carries state from run to run (CPU: host-located)', async () => {
    const s = await createSession(counter, { device: 'cpu', deviceOutputs: ['s_out'] });
    const store = new DeviceTensorStore();
    let r = await s.run({ s_in: new ort.Tensor('float32', new Float32Array([5]), [1]) });
    for (let i = 0; i < 3; i++) {
      store.carry(r.device, { s_out: 's_in' });
      r = await s.run(store.feeds(s.inputNames));
    }
    // 5 + 1 (first run) + 3 more runs = 9.
    const last = r.device.s_out!;
    expect(last).toBeInstanceOf(DeviceTensor);
    expect(last.location).toBe('cpu');
    expect(Array.from(last.read() as Float32Array)).toEqual([9]);
    store.dispose();
    expect(store.size).toBe(0);
  });

  it('refuses to read a gpu-buffer tensor or feed it to a CPU session', async () => {
    // A tensor that claims to live in a GPU buffer; ORT's JS side makes it without touching the
    // GPU. Reading it through ORT would abort the process, so both paths must stop before ORT.
    const fake = ort.Tensor.fromGpuBuffer({} as never, { dataType: 'float32', dims: [1] });
    const t = new DeviceTensor('s_out', 'webgpu', fake);
    expect(t.location).toBe('gpu-buffer');
    expect(() => t.read()).toThrow(DeviceTensorAccessError);
    await expect(t.getData()).rejects.toThrow(/cannot be read on the host/);
    const s = await createSession(counter, { device: 'cpu' });
    const e = await s.run({ s_in: t }).catch((x: unknown) => x);
    expect(DeviceTensorAccessError.isInstance(e)).toBe(true);
    expect((e as DeviceTensorAccessError).device).toBe('cpu');
    expect((e as DeviceTensorAccessError).message).toMatch(/cannot be fed as "s_in" to a cpu/);
  });

  it('maps options to ORT: gpu-buffer outputs and the CPU-fallback switch on GPU devices', async () => {
    const o = ortSessionOptions('webgpu', {
      deviceOutputs: ['s_out'],
      disableCpuFallback: true,
      intraOpThreads: 2,
    });
    expect(o.preferredOutputLocation).toEqual({ s_out: 'gpu-buffer' });
    expect(o.executionProviders).toEqual([{ name: 'webgpu' }]);
    expect(ortSessionOptions('cpu', { disableCpuFallback: true }).extra).toBeUndefined();
    // prepackWeights: false is ORT's disable_prepacking, beside the fallback switch, not instead.
    expect(ortSessionOptions('cpu', { prepackWeights: false }).extra).toEqual({
      session: { disable_prepacking: '1' },
    });
    expect(ortSessionOptions('cpu', { prepackWeights: true }).extra).toBeUndefined();
    expect(
      ortSessionOptions('webgpu', { disableCpuFallback: true, prepackWeights: false }).extra,
    ).toEqual({ session: { disable_cpu_ep_fallback: '1', disable_prepacking: '1' } });
    // The config key is real: with only the CPU EP, ORT refuses to load once fallback is disabled.
    await expect(
      ort.InferenceSession.create(counter, {
        ...o,
        executionProviders: ['cpu'],
        logSeverityLevel: 4,
      }),
    ).rejects.toThrow(/fallback to CPU EP has been explicitly disabled/);
  });
});

describe.skipIf(!webgpu.available)(
  `WebGPU EP${webgpu.available ? '' : ` (skipped: ${webgpu.reason})`}`,
  () => {
    it('runs MatMul + Add on the GPU without CPU fallback', async () => {
      const s = await createSession(affine, { device: 'webgpu', disableCpuFallback: true });
      const { outputs } = await s.run({ X: X() });
      expect(Array.from(outputs.Y!.data as Float32Array)).toEqual([14, 25, 20, 31]);
      await s.release();
    });

    it('feeds gpu-buffer outputs back to the next run', async () => {
      const s = await createSession(counter, { device: 'webgpu', deviceOutputs: ['s_out'] });
      const host = await createSession(
        bytes({
          name: 'copy',
          nodes: [{ opType: 'Identity', inputs: ['s_in'], outputs: ['s_out'] }],
          inputs: [{ name: 's_in', elemType: F, shape: [1] }],
          outputs: [{ name: 's_out', elemType: F, shape: [1] }],
          initializers: [],
        }),
        { device: 'webgpu' },
      );
      const store = new DeviceTensorStore();
      let r = await s.run({ s_in: new ort.Tensor('float32', new Float32Array([5]), [1]) });
      for (let i = 0; i < 3; i++) {
        store.carry(r.device, { s_out: 's_in' });
        expect(store.get('s_in')!.location).toBe('gpu-buffer');
        r = await s.run(store.feeds());
      }
      store.carry(r.device, { s_out: 's_in' });
      expect(() => store.get('s_in')!.read()).toThrow(DeviceTensorAccessError);
      // Read it by copying through a session whose output is a host output: 5 + 4 = 9.
      const { outputs } = await host.run(store.feeds());
      expect(Array.from(outputs.s_out!.data as Float32Array)).toEqual([9]);
      store.dispose();
    });
  },
);
