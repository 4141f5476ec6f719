// The ONNX writer/reader checked against a real ONNX Runtime (CPU EP): models encoded here must
// load and compute numbers derived by hand in each test; the reader must give back what was written.

import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as ort from 'onnxruntime-node';
import { afterAll, describe, expect, it } from 'vitest';
import {
  decodeModel,
  encodeModel,
  inlineExternalData,
  OnnxDataType,
  OnnxDecodeError,
  OnnxEncodeError,
  type OnnxGraph,
  OnnxModelTooLargeError,
  onnxTensor,
  WeightsFileWriter,
  writeModel,
} from '../src/index.js';
import { testModel } from '../src/testing/index.js';

const F = OnnxDataType.FLOAT;
const I64 = OnnxDataType.INT64;

const model = testModel;

async function run(
  bytesOrPath: Uint8Array | string,
  feeds: Record<string, ort.Tensor>,
  options: ort.InferenceSession.SessionOptions = {},
) {
  const s = await ort.InferenceSession.create(bytesOrPath as Uint8Array, {
    executionProviders: ['cpu'],
    ...options,
  });
  try {
    return await s.run(feeds);
  } finally {
    await s.release();
  }
}

const tmpDirs: string[] = [];
function tmp(): string {
  const d = mkdtempSync(join(tmpdir(), 'flowgrpo-onnx-'));
  tmpDirs.push(d);
  return d;
}
afterAll(() => {
  for (const d of tmpDirs) rmSync(d, { recursive: true, force: true });
});

// Y = X·W + B with X=[[1,2,3],[4,5,6]], W=[[1,0],[0,1],[1,1]], B=[10,20].
// By hand: row0 = [1+3, 2+3] + B = [14, 25]; row1 = [4+6, 5+6] + B = [20, 31].
const W = new Float32Array([1, 0, 0, 1, 1, 1]);
const matmulAdd = model({
  name: 'matmul_add',
  nodes: [
    { opType: 'MatMul', inputs: ['X', 'W'], outputs: ['XW'], name: 'mm' },
    { opType: 'Add', inputs: ['XW', 'B'], outputs: ['Y'] },
  ],
  inputs: [{ name: 'X', elemType: F, shape: ['batch', 3] }],
  outputs: [{ name: 'Y', elemType: F, shape: ['batch', 2] }],
  initializers: [onnxTensor('W', W, [3, 2]), onnxTensor('B', new Float32Array([10, 20]), [2])],
  valueInfo: [{ name: 'XW', elemType: F, shape: ['batch', 2] }],
  docString: 'a tiny affine map',
});
const X = () => new ort.Tensor('float32', new Float32Array([1, 2, 3, 4, 5, 6]), [2, 3]);

describe('encodeModel → ONNX Runtime (CPU)', () => {
  it('MatMul + Add computes the hand-derived product', async () => {
    const out = await run(encodeModel(matmulAdd), { X: X() });
    expect(out.Y!.dims).toEqual([2, 2]);
    expect(Array.from(out.Y!.data as Float32Array)).toEqual([14, 25, 20, 31]);
  });

  it('Softmax (axis attribute) gives exp(x)/Σexp(x)', async () => {
    // x = [0, ln 2, ln 3] → exp = [1, 2, 3] → softmax = [1/6, 2/6, 3/6].
    const m = model({
      name: 'softmax',
      nodes: [
        {
          opType: 'Softmax',
          inputs: ['x'],
          outputs: ['p'],
          attributes: { axis: { type: 'int', value: -1 } },
        },
      ],
      inputs: [{ name: 'x', elemType: F, shape: [1, 3] }],
      outputs: [{ name: 'p', elemType: F, shape: [1, 3] }],
      initializers: [],
    });
    const out = await run(encodeModel(m), {
      x: new ort.Tensor('float32', new Float32Array([0, Math.log(2), Math.log(3)]), [1, 3]),
    });
    const p = Array.from(out.p!.data as Float32Array);
    for (const [i, v] of [1 / 6, 2 / 6, 3 / 6].entries()) expect(p[i]).toBeCloseTo(v, 6);
  });

  it('Gather picks rows of an initializer by int64 indices', async () => {
    // table row r = [10r, 10r+1]; indices [3, 0, 3] → [[30,31],[0,1],[30,31]].
    const table = new Float32Array([0, 1, 10, 11, 20, 21, 30, 31]);
    const m = model({
      name: 'gather',
      nodes: [
        {
          opType: 'Gather',
          inputs: ['table', 'idx'],
          outputs: ['rows'],
          attributes: { axis: { type: 'int', value: 0 } },
        },
      ],
      inputs: [{ name: 'idx', elemType: I64, shape: ['n'] }],
      outputs: [{ name: 'rows', elemType: F, shape: ['n', 2] }],
      initializers: [onnxTensor('table', table, [4, 2])],
    });
    const out = await run(encodeModel(m), {
      idx: new ort.Tensor('int64', new BigInt64Array([3n, 0n, 3n]), [3]),
    });
    expect(Array.from(out.rows!.data as Float32Array)).toEqual([30, 31, 0, 1, 30, 31]);
  });

  it('ReduceSum takes axes as an int64 input at opset 21', async () => {
    // [[1,2,3],[4,5,6]] summed over axis 1 without keepdims → [6, 15].
    const m = model({
      name: 'reduce',
      nodes: [
        {
          opType: 'ReduceSum',
          inputs: ['x', 'axes'],
          outputs: ['s'],
          attributes: { keepdims: { type: 'int', value: 0 } },
        },
      ],
      inputs: [{ name: 'x', elemType: F, shape: [2, 3] }],
      outputs: [{ name: 's', elemType: F, shape: [2] }],
      initializers: [onnxTensor('axes', new BigInt64Array([1n]), [1])],
    });
    const out = await run(encodeModel(m), { x: X() });
    expect(Array.from(out.s!.data as Float32Array)).toEqual([6, 15]);
  });

  it('tensor and graph attributes (Constant, If with two branches) run', async () => {
    const branch = (name: string, v: number): OnnxGraph => ({
      name,
      nodes: [
        {
          opType: 'Constant',
          inputs: [],
          outputs: [`${name}_out`],
          attributes: {
            value: { type: 'tensor', value: onnxTensor(`${name}_c`, new Float32Array([v]), [1]) },
          },
        },
      ],
      inputs: [],
      outputs: [{ name: `${name}_out`, elemType: F, shape: [1] }],
      initializers: [],
    });
    const m = model({
      name: 'if',
      nodes: [
        {
          opType: 'If',
          inputs: ['cond'],
          outputs: ['y'],
          attributes: {
            then_branch: { type: 'graph', value: branch('then', 7) },
            else_branch: { type: 'graph', value: branch('else', -2) },
          },
        },
      ],
      inputs: [{ name: 'cond', elemType: OnnxDataType.BOOL, shape: [] }],
      outputs: [{ name: 'y', elemType: F, shape: [1] }],
      initializers: [],
    });
    const bytes = encodeModel(m);
    const yes = await run(bytes, { cond: new ort.Tensor('bool', new Uint8Array([1]), []) });
    const no = await run(bytes, { cond: new ort.Tensor('bool', new Uint8Array([0]), []) });
    expect(Array.from(yes.y!.data as Float32Array)).toEqual([7]);
    expect(Array.from(no.y!.data as Float32Array)).toEqual([-2]);
  });
});

describe('decodeModel', () => {
  it('round-trips everything the writer emits', () => {
    const m = model(
      {
        ...matmulAdd.graph,
        nodes: [
          ...matmulAdd.graph.nodes,
          {
            opType: 'Custom',
            domain: 'com.example',
            name: 'all_attrs',
            inputs: ['Y', ''],
            outputs: ['Z'],
            attributes: {
              f: { type: 'float', value: 0.5 },
              i: { type: 'int', value: -3 },
              big: { type: 'int', value: -(2n ** 60n) },
              s: { type: 'string', value: 'héllo' },
              fs: { type: 'floats', value: [1.5, -2.25] },
              is: { type: 'ints', value: [0, 1, -1, 2n ** 62n] },
              ss: { type: 'strings', value: ['a', ''] },
              t: { type: 'tensor', value: onnxTensor('t', new Int32Array([1, -1]), [2]) },
              g: { type: 'graph', value: { ...matmulAdd.graph, name: 'sub' } },
            },
          },
        ],
      },
      {
        opsetImports: [
          { domain: '', version: 21 },
          { domain: 'com.microsoft', version: 1 },
        ],
        docString: 'doc',
        metadata: { purpose: 'test', n: '2' },
      },
    );
    const back = decodeModel(encodeModel(m));
    expect(back).toEqual(m);
    expect(back.graph.nodes.map((n) => [n.opType, n.domain ?? ''])).toEqual([
      ['MatMul', ''],
      ['Add', ''],
      ['Custom', 'com.example'],
    ]);
  });

  it('round-trips large payloads, long names and multi-byte varints', () => {
    // 3000 floats = 12 kB of raw_data (referenced, not copied, by the writer); a 300-char name.
    const big = Float32Array.from({ length: 3000 }, (_, i) => i * 0.25 - 100);
    const long = `w_${'x'.repeat(300)}`;
    const m = model({
      ...matmulAdd.graph,
      initializers: [...matmulAdd.graph.initializers, onnxTensor(long, big, [30, 100])],
      inputs: [{ name: 'X', elemType: F, shape: [2 ** 40, 'ü-dim', 3] }],
    });
    const back = decodeModel(encodeModel(m));
    expect(back).toEqual(m);
    expect(new Float32Array(back.graph.initializers[2]!.rawData!.buffer)).toEqual(big);
  });

  it('reads unpacked and packed repeated fields and typed data fields', () => {
    // Hand-encoded TensorProto inside a GraphProto inside a ModelProto:
    // dims packed [2] (field 1, LEN), data_type=1, float_data packed [1.5, -2] (field 4), name "t".
    const f32 = new Uint8Array(new Float32Array([1.5, -2]).buffer);
    const tensor = [0x0a, 1, 2, 0x10, 1, 0x22, 8, ...f32, 0x42, 1, 0x74];
    const graph = [0x2a, tensor.length, ...tensor, 0x12, 1, 0x67];
    const bytes = new Uint8Array([0x08, 7, 0x3a, graph.length, ...graph]);
    const back = decodeModel(bytes);
    expect(back.irVersion).toBe(7);
    expect(back.graph.name).toBe('g');
    const t = back.graph.initializers[0]!;
    expect(t.dims).toEqual([2]);
    expect(Array.from(new Float32Array(t.rawData!.slice().buffer))).toEqual([1.5, -2]);
  });

  it('rejects bytes that are not a model', () => {
    expect(() => decodeModel(new TextEncoder().encode('not a model at all'))).toThrow(
      OnnxDecodeError,
    );
    const good = encodeModel(matmulAdd);
    expect(() => decodeModel(good.subarray(0, good.length - 5))).toThrow(OnnxDecodeError);
  });
});

describe('writeModel + external data', () => {
  it('keeps small initializers inline and moves large ones out', async () => {
    const dir = tmp();
    const r = writeModel(matmulAdd, { dir, fileName: 'm.onnx', sizeThreshold: 16 });
    // W is 24 bytes (≥ 16) → external; B is 8 bytes → inline.
    expect(r.externalTensors).toBe(1);
    const back = decodeModel(readFileSync(r.path));
    const [w, b] = back.graph.initializers;
    expect(w!.external).toEqual({ location: 'weights.data', offset: 0, length: 24 });
    expect(b!.rawData).toBeDefined();
    expect(statSync(join(dir, 'weights.data')).size).toBe(24);
    expect(inlineExternalData(back, dir)).toEqual(matmulAdd);
    const out = await run(r.path, { X: X() });
    expect(Array.from(out.Y!.data as Float32Array)).toEqual([14, 25, 20, 31]);
  });

  it('two graphs share one weights.data (written once, 64-byte aligned)', async () => {
    const dir = tmp();
    const weights = new WeightsFileWriter(join(dir, 'weights.data'));
    const pad = weights.append(new Uint8Array(5)); // forces padding before the next tensor
    const a = writeModel(matmulAdd, { dir, fileName: 'a.onnx', sizeThreshold: 16, weights });
    // Graph b gathers rows of the same W (a fresh view of the same memory).
    const b = writeModel(
      model({
        name: 'rows_of_w',
        nodes: [{ opType: 'Gather', inputs: ['W', 'idx'], outputs: ['r'] }],
        inputs: [{ name: 'idx', elemType: I64, shape: [1] }],
        outputs: [{ name: 'r', elemType: F, shape: [1, 2] }],
        initializers: [onnxTensor('W', new Float32Array(W.buffer), [3, 2])],
      }),
      { dir, fileName: 'b.onnx', sizeThreshold: 16, weights },
    );
    weights.close();
    expect(pad).toEqual({ location: 'weights.data', offset: 0, length: 5 });
    const wa = decodeModel(readFileSync(a.path)).graph.initializers[0]!.external;
    const wb = decodeModel(readFileSync(b.path)).graph.initializers[0]!.external;
    expect(wa).toEqual({ location: 'weights.data', offset: 64, length: 24 });
    expect(wb).toEqual(wa);
    expect(weights.count).toBe(2);
    expect(statSync(join(dir, 'weights.data')).size).toBe(64 + 24);

    const outA = await run(a.path, { X: X() });
    expect(Array.from(outA.Y!.data as Float32Array)).toEqual([14, 25, 20, 31]);
    // Row 2 of W = [1, 1].
    const outB = await run(b.path, { idx: new ort.Tensor('int64', new BigInt64Array([2n]), [1]) });
    expect(Array.from(outB.r!.data as Float32Array)).toEqual([1, 1]);

    // Loading from bytes: the external file is handed over with the `externalData` option.
    const outBytes = await run(
      readFileSync(a.path),
      { X: X() },
      { externalData: [{ path: 'weights.data', data: readFileSync(join(dir, 'weights.data')) }] },
    );
    expect(Array.from(outBytes.Y!.data as Float32Array)).toEqual([14, 25, 20, 31]);
  });

  it('refuses to rewrite, without a shared writer, a weights file another graph points to', () => {
    const dir = tmp();
    writeModel(matmulAdd, { dir, fileName: 'first.onnx', sizeThreshold: 16 });
    expect(() =>
      writeModel(matmulAdd, { dir, fileName: 'second.onnx', sizeThreshold: 16 }),
    ).toThrow(/pass one shared WeightsFileWriter/);
    // The first graph's weights are intact.
    expect(statSync(join(dir, 'weights.data')).size).toBe(24);
  });

  it('refuses a protobuf over 2 GB and tensors whose bytes do not match their dims', () => {
    // Three initializers aliasing one 800 MB buffer: 2.4 GB of raw_data, never touched or copied.
    const big = new Uint8Array(800_000_000);
    const m = model({
      ...matmulAdd.graph,
      initializers: [0, 1, 2].map((i) => ({
        name: `big${i}`,
        dataType: OnnxDataType.UINT8,
        dims: [big.length],
        rawData: big,
      })),
    });
    expect(() => encodeModel(m)).toThrow(OnnxModelTooLargeError);
    const bad = model({
      ...matmulAdd.graph,
      initializers: [onnxTensor('W', W, [3, 2]), { ...onnxTensor('B', W, [6]), dims: [2] }],
    });
    expect(() => encodeModel(bad)).toThrow(OnnxEncodeError);
  });
});
