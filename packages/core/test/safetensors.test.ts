import { open, readdir, readFile, rm, truncate, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  type DType,
  openSafetensors,
  parseSafetensors,
  readSafetensors,
  SafetensorsError,
  type SafetensorsErrorReason,
  serializeSafetensors,
  type TensorSource,
  writeSafetensors,
} from '../src/index.js';
import { testDir } from './temp-dir.js';

const dir = testDir('st');

// One tensor per dtype, with each type's extreme values.
function everyDtype(): Record<string, TensorSource> {
  return {
    f64: { dtype: 'F64', shape: [3], data: Float64Array.from([Math.PI, -0, 1e308]) },
    f32: { dtype: 'F32', shape: [2, 2], data: Float32Array.from([1, -2.5, 3.25, -0]) },
    f16: { dtype: 'F16', shape: [3], data: Uint16Array.from([0x3c00, 0x7bff, 0x0001]) },
    bf16: { dtype: 'BF16', shape: [1, 3], data: Uint16Array.from([0x3f80, 0xc000, 0x7f80]) },
    i64: {
      dtype: 'I64',
      shape: [2],
      data: BigInt64Array.from([-(2n ** 63n), 2n ** 63n - 1n]),
    },
    i32: { dtype: 'I32', shape: [2], data: Int32Array.from([-(2 ** 31), 2 ** 31 - 1]) },
    i16: { dtype: 'I16', shape: [2], data: Int16Array.from([-32768, 32767]) },
    i8: { dtype: 'I8', shape: [3], data: Int8Array.from([-128, 0, 127]) },
    u8: { dtype: 'U8', shape: [2], data: Uint8Array.from([0, 255]) },
    bool: { dtype: 'BOOL', shape: [4], data: Uint8Array.from([1, 0, 0, 1]) },
    u16: { dtype: 'U16', shape: [1], data: Uint16Array.from([65535]) },
    u32: { dtype: 'U32', shape: [1], data: Uint32Array.from([2 ** 32 - 1]) },
    u64: { dtype: 'U64', shape: [1], data: BigUint64Array.from([2n ** 64n - 1n]) },
    fp8: { dtype: 'F8_E4M3', shape: [2], data: Uint8Array.from([0x38, 0x7e]) },
    scalar: { dtype: 'F32', shape: [], data: Float32Array.from([7]) },
    empty: { dtype: 'F32', shape: [0, 4], data: new Float32Array(0) },
  };
}

// Builds a file by hand: prefix, header text (padded with spaces to 8 unless told), data.
function rawFile(
  header: unknown,
  data: Uint8Array = new Uint8Array(0),
  opts: { n?: bigint; pad?: boolean } = {},
): Uint8Array {
  let json = new TextEncoder().encode(typeof header === 'string' ? header : JSON.stringify(header));
  if (opts.pad !== false && json.byteLength % 8 !== 0) {
    const p = new Uint8Array(Math.ceil(json.byteLength / 8) * 8).fill(0x20);
    p.set(json);
    json = p;
  }
  const out = new Uint8Array(8 + json.byteLength + data.byteLength);
  new DataView(out.buffer).setBigUint64(0, opts.n ?? BigInt(json.byteLength), true);
  out.set(json, 8);
  out.set(data, 8 + json.byteLength);
  return out;
}

describe('safetensors round trip', () => {
  it('writes and reads back every dtype, shape [] and a zero-size tensor', async () => {
    const src = everyDtype();
    const path = join(dir, 'all.safetensors');
    const written = await writeSafetensors(path, src, { metadata: { format: 'pt', note: 'ü' } });
    const bytes = new Uint8Array(await readFile(path));
    expect(written.fileSize).toBe(bytes.byteLength);
    const viaFile = await readSafetensors(path);
    const viaBuffer = parseSafetensors(bytes);
    const viaSerialize = parseSafetensors(
      await serializeSafetensors(src, { metadata: { format: 'pt', note: 'ü' } }),
    );
    for (const got of [viaFile, viaBuffer, viaSerialize]) {
      expect(got.metadata).toEqual({ format: 'pt', note: 'ü' });
      expect([...got.tensors.keys()].sort()).toEqual(Object.keys(src).sort());
      for (const [name, s] of Object.entries(src)) {
        const t = got.tensors.get(name)!;
        expect(t.dtype).toBe(s.dtype);
        expect(t.shape).toEqual(s.shape);
        expect(t.data.constructor).toBe((s.data as ArrayBufferView).constructor);
        expect(Array.from(t.data as ArrayLike<number | bigint>)).toEqual(
          Array.from(s.data as unknown as ArrayLike<number | bigint>),
        );
      }
    }
    // serializeSafetensors and writeSafetensors produce the same bytes.
    expect(
      Buffer.from(await serializeSafetensors(src, { metadata: { format: 'pt', note: 'ü' } })),
    ).toEqual(Buffer.from(bytes));
  });

  it('lays the file out as documented: 8-aligned header, aligned tensors, size-then-name order', async () => {
    const path = join(dir, 'layout.safetensors');
    await writeSafetensors(path, everyDtype());
    const bytes = new Uint8Array(await readFile(path));
    // Decode by hand, independently of the reader.
    const n = Number(new DataView(bytes.buffer, bytes.byteOffset).getBigUint64(0, true));
    expect(n % 8).toBe(0);
    const text = new TextDecoder().decode(bytes.subarray(8, 8 + n));
    expect(text.trimEnd().length).toBeGreaterThan(0);
    expect(text.slice(text.trimEnd().length)).toMatch(/^ *$/); // padding is spaces
    const header = JSON.parse(text) as Record<
      string,
      { dtype: DType; shape: number[]; data_offsets: [number, number] }
    >;
    expect(header.__metadata__).toBeUndefined();
    const size: Record<string, number> = { F64: 8, I64: 8, U64: 8, F32: 4, I32: 4, U32: 4 };
    const entries = Object.entries(header).sort(
      (a, b) => a[1].data_offsets[0] - b[1].data_offsets[0],
    );
    let end = 0;
    for (const [, e] of entries) {
      expect(e.data_offsets[0]).toBe(end); // contiguous, as HF writes
      expect(e.data_offsets[0] % (size[e.dtype] ?? 1)).toBe(0);
      end = e.data_offsets[1];
    }
    expect(8 + n + end).toBe(bytes.byteLength);
    // The first tensors are the 8-byte ones, by name.
    expect(entries.slice(0, 3).map(([k]) => k)).toEqual(['f64', 'i64', 'u64']);
    // f32 [1, -2.5, 3.25, -0] little-endian at its offset.
    const f32 = header.f32!;
    const view = new DataView(bytes.buffer, bytes.byteOffset + 8 + n + f32.data_offsets[0], 16);
    expect([0, 4, 8, 12].map((o) => view.getFloat32(o, true))).toEqual([1, -2.5, 3.25, -0]);
  });

  it('reads one tensor lazily through the handle, on demand', async () => {
    const path = join(dir, 'lazy.safetensors');
    await writeSafetensors(path, {
      a: { dtype: 'I32', shape: [2], data: Int32Array.from([1, 2]) },
      b: { dtype: 'I32', shape: [2], data: Int32Array.from([3, 4]) },
    });
    await using f = await openSafetensors(path);
    expect(f.names()).toEqual(['a', 'b']);
    expect(f.info('b')).toMatchObject({ dtype: 'I32', shape: [2], dataOffsets: [8, 16] });
    // Change b's bytes on disk after opening: a read that happens now must see the new bytes.
    const fh = await open(path, 'r+');
    await fh.write(new Uint8Array(Int32Array.from([30, 40]).buffer), 0, 8, f.header.dataStart + 8);
    await fh.close();
    expect(Array.from((await f.read('b')).data as Int32Array)).toEqual([30, 40]);
    expect(Array.from((await f.read('a')).data as Int32Array)).toEqual([1, 2]);
    expect(() => f.info('c')).toThrow(SafetensorsError);
    await f.close();
    await expect(f.read('a')).rejects.toThrow(/closed/);
  });

  it('lazy tensor data is produced only when written, and a failure leaves no file', async () => {
    const order: string[] = [];
    const path = join(dir, 'lazy-write.safetensors');
    await writeSafetensors(path, {
      x: {
        dtype: 'F32',
        shape: [1],
        data: () => {
          order.push('x');
          return Float32Array.from([1]);
        },
      },
      y: {
        dtype: 'F64',
        shape: [1],
        data: async () => {
          order.push('y');
          return Float64Array.from([2]);
        },
      },
    });
    expect(order).toEqual(['y', 'x']); // file order: 8-byte dtype first
    const bad = join(dir, 'bad-write.safetensors');
    await expect(
      writeSafetensors(bad, {
        x: { dtype: 'F32', shape: [2], data: () => Float32Array.from([1]) },
      }),
    ).rejects.toMatchObject({ reason: 'size_mismatch', tensor: 'x' });
    expect((await readdir(dir)).filter((f) => f.startsWith('bad-write'))).toEqual([]);
    await expect(
      writeSafetensors(bad, { x: { dtype: 'I8', shape: [3], data: Int8Array.from([1]) } }),
    ).rejects.toMatchObject({ reason: 'size_mismatch' });
    await expect(
      writeSafetensors(bad, { x: { dtype: 'Q4' as DType, shape: [1], data: new Uint8Array(1) } }),
    ).rejects.toThrow();
  });
});

describe('safetensors validation errors', () => {
  const f32x2 = { dtype: 'F32', shape: [2], data_offsets: [0, 8] };

  async function expectReason(
    name: string,
    bytes: Uint8Array,
    reason: SafetensorsErrorReason,
    tensor?: string,
  ): Promise<void> {
    const path = join(dir, `${name}.safetensors`);
    await writeFile(path, bytes);
    const err = await openSafetensors(path).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(SafetensorsError.isInstance(err), String(err)).toBe(true);
    const e = err as SafetensorsError;
    expect(e.reason).toBe(reason);
    expect(e.file).toBe(path);
    expect(e.tensor).toBe(tensor);
    expect(e.code).toBe('SAFETENSORS_ERROR');
    expect(e.message).toContain(path);
    // The in-memory parser agrees.
    expect(() => parseSafetensors(bytes)).toThrow(expect.objectContaining({ reason }));
  }

  it('truncated: shorter than the length prefix', async () => {
    await expectReason('short', new Uint8Array([1, 0, 0]), 'truncated');
    await expectReason('empty', new Uint8Array(0), 'truncated');
  });

  it('truncated: cut inside the data', async () => {
    const full = rawFile({ a: f32x2, b: { ...f32x2, data_offsets: [8, 16] } }, new Uint8Array(16));
    await expectReason('cut', full.subarray(0, full.byteLength - 3), 'truncated', 'b');
  });

  it('header length beyond the file', async () => {
    await expectReason(
      'hdr-oob',
      rawFile({}, new Uint8Array(0), { n: 1000n }),
      'header_out_of_bounds',
    );
    await expectReason(
      'hdr-huge',
      rawFile({}, new Uint8Array(0), { n: 2n ** 63n }),
      'header_out_of_bounds',
    );
  });

  it('header length over the 100 MB limit (sparse file)', async () => {
    const path = join(dir, 'hdr-limit.safetensors');
    await writeFile(path, rawFile({}, new Uint8Array(0), { n: 150_000_000n }));
    await truncate(path, 160_000_000); // sparse: no real disk use
    await expect(openSafetensors(path)).rejects.toMatchObject({ reason: 'header_too_large' });
    await rm(path);
  });

  it('invalid JSON, non-UTF-8 header and non-object header', async () => {
    await expectReason('bad-json', rawFile('{"a": {'), 'invalid_json');
    const latin1 = rawFile('{"\xff": 1}');
    latin1[10] = 0xff; // a lone continuation byte is not UTF-8
    await expectReason('bad-utf8', latin1, 'invalid_json');
    await expectReason('array', rawFile('[1, 2]'), 'invalid_json');
  });

  it('invalid structure', async () => {
    await expectReason(
      'no-shape',
      rawFile({ a: { dtype: 'F32', data_offsets: [0, 0] } }),
      'invalid_header',
      'a',
    );
    await expectReason(
      'neg-shape',
      rawFile({ a: { ...f32x2, shape: [-2] } }, new Uint8Array(8)),
      'invalid_header',
      'a',
    );
    await expectReason(
      'rev-offsets',
      rawFile({ a: { ...f32x2, data_offsets: [8, 0] } }, new Uint8Array(8)),
      'invalid_header',
      'a',
    );
    await expectReason('meta-num', rawFile({ __metadata__: { step: 3 } }), 'invalid_header');
  });

  it('unknown dtype', async () => {
    await expectReason(
      'dtype',
      rawFile({ a: { ...f32x2, dtype: 'F128' } }, new Uint8Array(8)),
      'unknown_dtype',
      'a',
    );
  });

  it('byte size not matching shape × dtype', async () => {
    // F32 [2, 2] needs 16 bytes; the offsets give 12.
    await expectReason(
      'size',
      rawFile({ a: { dtype: 'F32', shape: [2, 2], data_offsets: [0, 12] } }, new Uint8Array(12)),
      'size_mismatch',
      'a',
    );
  });

  it('overlapping offsets', async () => {
    await expectReason(
      'overlap',
      rawFile({ a: f32x2, b: { ...f32x2, data_offsets: [4, 12] } }, new Uint8Array(12)),
      'overlapping_offsets',
      'b',
    );
  });

  it('out-of-bounds offsets', async () => {
    await expectReason(
      'oob',
      rawFile({ a: f32x2, b: { ...f32x2, data_offsets: [100, 108] } }, new Uint8Array(8)),
      'out_of_bounds',
      'b',
    );
  });

  it('accepts an unpadded header and tolerates a gap (valid per the format)', async () => {
    const bytes = rawFile(
      {
        a: { dtype: 'U8', shape: [1], data_offsets: [0, 1] },
        b: { dtype: 'U8', shape: [1], data_offsets: [3, 4] },
      },
      Uint8Array.from([5, 0, 0, 6]),
      { pad: false },
    );
    const got = parseSafetensors(bytes);
    expect(Array.from(got.tensors.get('b')!.data as Uint8Array)).toEqual([6]);
    // An unaligned F32 view is copied rather than failing.
    const odd = rawFile(
      '{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}',
      new Uint8Array(new Float32Array([2.5]).buffer),
      { pad: false },
    );
    const dataStart = 8 + Number(new DataView(odd.buffer).getBigUint64(0, true));
    expect(dataStart % 4).not.toBe(0);
    expect(Array.from(parseSafetensors(odd).tensors.get('a')!.data as Float32Array)).toEqual([2.5]);
  });
});
