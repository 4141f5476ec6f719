import { spawnSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  bf16ArrayToF32,
  f16ArrayToF32,
  f32ArrayToBf16,
  f32ArrayToF16,
  readSafetensors,
  writeSafetensors,
} from '../src/index.js';

// Interoperability with an independent implementation of the documented format: Python with
// only the standard library (struct + json), written from the format description, not from ours.
const hasPython = spawnSync('python3', ['--version']).status === 0;

function python(script: string, ...args: string[]): string {
  const res = spawnSync('python3', ['-c', script, ...args], { encoding: 'utf8' });
  if (res.status !== 0) throw new Error(`python3 failed: ${res.stderr}`);
  return res.stdout;
}

const PY_WRITE = `
import json, struct, sys
path = sys.argv[1]
def bf16(x):  # exact bf16 values only: the top half of the f32 bits
    b = struct.unpack('<I', struct.pack('<f', x))[0]
    assert b & 0xffff == 0
    return struct.pack('<H', b >> 16)
tensors = [  # name, dtype, shape, bytes -- data deliberately not in header order
    ('bool', 'BOOL', [3], struct.pack('<3?', True, False, True)),
    ('w.f32', 'F32', [2, 3], struct.pack('<6f', 0.5, -1.25, 3.0, 2.0**-20, -0.0, 65504.0)),
    ('f64', 'F64', [2], struct.pack('<2d', 3.141592653589793, -1e300)),
    ('f16', 'F16', [3], struct.pack('<3e', 1.0, -2.0, 65504.0)),
    ('bf16', 'BF16', [2], bf16(1.0) + bf16(-3.5)),
    ('i64', 'I64', [2], struct.pack('<2q', -2**63, 2**63 - 1)),
    ('i32', 'I32', [3], struct.pack('<3i', -2**31, 0, 2**31 - 1)),
    ('i16', 'I16', [2], struct.pack('<2h', -32768, 32767)),
    ('i8', 'I8', [2], struct.pack('<2b', -128, 127)),
    ('u8', 'U8', [1, 2], struct.pack('<2B', 0, 255)),
    ('scalar', 'F32', [], struct.pack('<f', 7.0)),
]
header = {'__metadata__': {'format': 'pt', 'source': 'python'}}
data = b''
for name, dtype, shape, raw in tensors:
    header[name] = {'dtype': dtype, 'shape': shape, 'data_offsets': [len(data), len(data) + len(raw)]}
    data += raw
text = json.dumps(dict(reversed(list(header.items()))), separators=(',', ':')).encode('utf-8')
text += b' ' * (-len(text) % 8)
with open(path, 'wb') as f:
    f.write(struct.pack('<Q', len(text)) + text + data)
`;

const PY_READ = `
import json, struct, sys
raw = open(sys.argv[1], 'rb').read()
n = struct.unpack('<Q', raw[:8])[0]
text = raw[8:8 + n]
assert n % 8 == 0, 'header not padded to 8 bytes'
assert text[:1] == b'{', 'header must start with {'
header = json.loads(text.decode('utf-8'))
data = raw[8 + n:]
fmt = {'F64': 'd', 'F32': 'f', 'F16': 'e', 'BF16': 'H', 'I64': 'q', 'I32': 'i', 'I16': 'h',
       'I8': 'b', 'U8': 'B', 'BOOL': '?'}
size = {'d': 8, 'f': 4, 'e': 2, 'H': 2, 'q': 8, 'i': 4, 'h': 2, 'b': 1, 'B': 1, '?': 1}
out = {'metadata': header.pop('__metadata__', None), 'tensors': {}}
end = 0
for name, t in sorted(header.items(), key=lambda kv: kv[1]['data_offsets'][0]):
    b, e = t['data_offsets']
    assert b == end, 'tensors must be contiguous (the Rust reader requires it)'
    end = e
    f = fmt[t['dtype']]
    count = 1
    for d in t['shape']:
        count *= d
    assert e - b == count * size[f]
    assert b % size[f] == 0, 'tensor not aligned to its element size'
    vals = list(struct.unpack('<%d%s' % (count, f), data[b:e]))
    if t['dtype'] == 'BF16':
        vals = [struct.unpack('<f', struct.pack('<I', v << 16))[0] for v in vals]
    if t['dtype'] == 'I64':
        vals = [str(v) for v in vals]
    out['tensors'][name] = {'dtype': t['dtype'], 'shape': t['shape'], 'values': vals}
assert end == len(data), 'bytes after the last tensor'
print(json.dumps(out))
`;

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'flowgrpo-stpy-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe.skipIf(!hasPython)('safetensors and a stdlib Python implementation', () => {
  it('reads a file written by Python', async () => {
    const path = join(dir, 'from-python.safetensors');
    python(PY_WRITE, path);
    const { metadata, tensors } = await readSafetensors(path);
    expect(metadata).toEqual({ format: 'pt', source: 'python' });
    const values = (name: string) => Array.from(tensors.get(name)!.data as ArrayLike<number>);
    expect(tensors.get('w.f32')!.shape).toEqual([2, 3]);
    expect(values('w.f32')).toEqual([0.5, -1.25, 3, 2 ** -20, -0, 65504]);
    expect(values('f64')).toEqual([Math.PI, -1e300]);
    expect(Array.from(f16ArrayToF32(tensors.get('f16')!.data as Uint16Array))).toEqual([
      1, -2, 65504,
    ]);
    expect(values('f16')).toEqual([0x3c00, 0xc000, 0x7bff]);
    expect(Array.from(bf16ArrayToF32(tensors.get('bf16')!.data as Uint16Array))).toEqual([1, -3.5]);
    expect(Array.from(tensors.get('i64')!.data as BigInt64Array)).toEqual([
      -(2n ** 63n),
      2n ** 63n - 1n,
    ]);
    expect(values('i32')).toEqual([-(2 ** 31), 0, 2 ** 31 - 1]);
    expect(values('i16')).toEqual([-32768, 32767]);
    expect(values('i8')).toEqual([-128, 127]);
    expect(values('u8')).toEqual([0, 255]);
    expect(tensors.get('u8')!.shape).toEqual([1, 2]);
    expect(values('bool')).toEqual([1, 0, 1]);
    expect(tensors.get('scalar')!.shape).toEqual([]);
    expect(values('scalar')).toEqual([7]);
  });

  it('writes a file Python reads, with aligned, contiguous tensors', async () => {
    const path = join(dir, 'to-python.safetensors');
    await writeSafetensors(
      path,
      {
        'model.embed.weight': {
          dtype: 'F32',
          shape: [2, 2],
          data: Float32Array.from([1, -2, 0.25, 1e-3]),
        },
        half: { dtype: 'F16', shape: [2], data: f32ArrayToF16(Float32Array.from([0.1, -65504])) },
        brain: {
          dtype: 'BF16',
          shape: [2],
          data: f32ArrayToBf16(Float32Array.from([Math.PI, -1])),
        },
        f64: { dtype: 'F64', shape: [1], data: Float64Array.from([Math.E]) },
        i64: { dtype: 'I64', shape: [2], data: BigInt64Array.from([-(2n ** 63n), 42n]) },
        i32: { dtype: 'I32', shape: [1], data: Int32Array.from([-7]) },
        i16: { dtype: 'I16', shape: [1], data: Int16Array.from([-300]) },
        i8: { dtype: 'I8', shape: [1], data: Int8Array.from([-1]) },
        u8: { dtype: 'U8', shape: [3], data: Uint8Array.from([1, 2, 255]) },
        mask: { dtype: 'BOOL', shape: [2], data: Uint8Array.from([0, 1]) },
      },
      { metadata: { format: 'pt' } },
    );
    const got = JSON.parse(python(PY_READ, path)) as {
      metadata: Record<string, string>;
      tensors: Record<string, { dtype: string; shape: number[]; values: unknown[] }>;
    };
    expect(got.metadata).toEqual({ format: 'pt' });
    const v = (name: string) => got.tensors[name]!.values;
    expect(got.tensors['model.embed.weight']!.shape).toEqual([2, 2]);
    expect(v('model.embed.weight')).toEqual([1, -2, 0.25, Math.fround(1e-3)]);
    // Python's own binary16 decoding of our bits: 0.1 -> 0x2e66 = 0.0999755859375.
    expect(v('half')).toEqual([0.0999755859375, -65504]);
    // pi in bf16 is 0x4049 = 3.140625.
    expect(v('brain')).toEqual([3.140625, -1]);
    expect(v('f64')).toEqual([Math.E]);
    expect(v('i64')).toEqual(['-9223372036854775808', '42']);
    expect(v('i32')).toEqual([-7]);
    expect(v('i16')).toEqual([-300]);
    expect(v('i8')).toEqual([-1]);
    expect(v('u8')).toEqual([1, 2, 255]);
    expect(v('mask')).toEqual([false, true]);
  });
});
