import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import {
  bf16ArrayToF32,
  bf16ToF32,
  createRng,
  f16ArrayToF32,
  f16ToF32,
  f32ArrayToBf16,
  f32ArrayToF16,
  f32ToBf16,
  f32ToF16,
  float32ToTensor,
  tensorToFloat32,
} from '../src/index.js';

const hasPython = spawnSync('python3', ['--version']).status === 0;

function fromBits(bits: number): number {
  return new Float32Array(new Uint32Array([bits]).buffer)[0]!;
}

describe('bfloat16', () => {
  it('matches hand-computed bit patterns', () => {
    // bf16 is the top 16 bits of an f32, rounded to nearest even on the lower 16.
    expect(f32ToBf16(1)).toBe(0x3f80); // f32 0x3f800000
    expect(f32ToBf16(-2)).toBe(0xc000);
    expect(f32ToBf16(0)).toBe(0x0000);
    expect(f32ToBf16(-0)).toBe(0x8000);
    expect(f32ToBf16(Math.PI)).toBe(0x4049); // f32 0x40490fdb: dropped 0x0fdb < 0x8000
    expect(f32ToBf16(fromBits(0x3f808000))).toBe(0x3f80); // tie, keep even 0x3f80
    expect(f32ToBf16(fromBits(0x3f818000))).toBe(0x3f82); // tie, 0x3f81 odd -> up
    expect(f32ToBf16(fromBits(0x3f808001))).toBe(0x3f81); // just above the tie
    expect(f32ToBf16(fromBits(0x7f7fffff))).toBe(0x7f80); // max f32 rounds to +Inf
    expect(f32ToBf16(fromBits(0x7f7f7fff))).toBe(0x7f7f); // largest finite bf16 stays
    expect(f32ToBf16(Number.POSITIVE_INFINITY)).toBe(0x7f80);
    expect(f32ToBf16(Number.NEGATIVE_INFINITY)).toBe(0xff80);
    expect(f32ToBf16(Number.NaN)).toBe(0x7fc0); // canonical quiet NaN 0x7fc00000
    expect(f32ToBf16(fromBits(0x7f800001))).toBe(0x7fc0); // signalling NaN made quiet, not Inf
    expect(f32ToBf16(fromBits(0xff810000))).toBe(0xffc1); // sign and payload kept
    expect(f32ToBf16(fromBits(0x00000001))).toBe(0x0000); // smallest f32 subnormal -> 0
    expect(f32ToBf16(fromBits(0x00018000))).toBe(0x0002); // subnormal tie -> even
    expect(f32ToBf16(fromBits(0x00010000))).toBe(0x0001); // smallest bf16 subnormal, 2^-133
  });

  it('widens exactly', () => {
    expect(bf16ToF32(0x3f80)).toBe(1);
    expect(bf16ToF32(0x0001)).toBe(2 ** -133);
    expect(bf16ToF32(0x7f7f)).toBe(fromBits(0x7f7f0000));
    expect(bf16ToF32(0xff80)).toBe(Number.NEGATIVE_INFINITY);
    expect(bf16ToF32(0x7fc0)).toBeNaN();
    expect(Object.is(bf16ToF32(0x8000), -0)).toBe(true);
  });

  it('picks the nearest bf16 (ties to even) for 100k random f32 bit patterns', () => {
    // Independent check by distance: the two candidates are the truncation and the next value up
    // in magnitude; the one past the largest finite bf16 counts as 2^128 (IEEE overflow rule).
    const rng = createRng('bf16');
    const bad: number[] = [];
    for (let i = 0; i < 100_000; i++) {
      const u = rng.nextUint32();
      const x = fromBits(u);
      if (Number.isNaN(x)) continue;
      const r = f32ToBf16(x);
      const lo = u >>> 16;
      const hi = lo + 1;
      const mag = (b: number) => ((b & 0x7fff) === 0x7f80 ? 2 ** 128 : Math.abs(bf16ToF32(b)));
      if ((lo & 0x7fff) === 0x7f80) {
        if (r !== lo) bad.push(u); // ±Inf
        continue;
      }
      const dLo = Math.abs(Math.abs(x) - mag(lo));
      const dHi = Math.abs(mag(hi) - Math.abs(x));
      const want = dLo < dHi ? lo : dHi < dLo ? hi : lo % 2 === 0 ? lo : hi;
      if (r !== want) bad.push(u);
    }
    expect(bad).toEqual([]);
  });

  it('array conversions agree with the scalar ones', () => {
    const rng = createRng('bf16-arr');
    const xs = Float32Array.from({ length: 2000 }, () => rng.normal() * 10 ** rng.int(20));
    const b = f32ArrayToBf16(xs);
    expect(Array.from(b)).toEqual(Array.from(xs, f32ToBf16));
    expect(Array.from(bf16ArrayToF32(b))).toEqual(Array.from(b, bf16ToF32));
    // Works on a view that does not start at byte 0.
    const view = xs.subarray(3, 10);
    expect(Array.from(f32ArrayToBf16(view))).toEqual(Array.from(view, f32ToBf16));
  });
});

describe('float16', () => {
  it('matches hand-computed bit patterns', () => {
    expect(f32ToF16(1)).toBe(0x3c00); // exponent 15, mantissa 0
    expect(f32ToF16(-2)).toBe(0xc000);
    expect(f32ToF16(0.5)).toBe(0x3800);
    expect(f32ToF16(65504)).toBe(0x7bff); // largest finite f16
    expect(f32ToF16(65519)).toBe(0x7bff); // below the midpoint 65520
    expect(f32ToF16(65520)).toBe(0x7c00); // the midpoint ties to even = Inf
    expect(f32ToF16(1e10)).toBe(0x7c00);
    expect(f32ToF16(-1e10)).toBe(0xfc00);
    expect(f32ToF16(2 ** -14)).toBe(0x0400); // smallest normal
    expect(f32ToF16(1023 * 2 ** -24)).toBe(0x03ff); // largest subnormal
    expect(f32ToF16(2 ** -24)).toBe(0x0001); // smallest subnormal
    expect(f32ToF16(2 ** -25)).toBe(0x0000); // half of it: tie to even 0
    expect(f32ToF16(1.5 * 2 ** -25)).toBe(0x0001);
    expect(f32ToF16(3 * 2 ** -25)).toBe(0x0002); // 1.5 ulp: tie, 1 odd -> 2
    expect(f32ToF16((2047 / 2) * 2 ** -24)).toBe(0x0400); // rounds up out of subnormals
    expect(f32ToF16(1 + 2 ** -11)).toBe(0x3c00); // tie, keep even
    expect(f32ToF16(1 + 3 * 2 ** -11)).toBe(0x3c02); // tie, 0x3c01 odd -> up
    expect(f32ToF16(0.1)).toBe(0x2e66);
    expect(f32ToF16(1 / 3)).toBe(0x3555);
    expect(f32ToF16(-0)).toBe(0x8000);
    expect(f32ToF16(Number.POSITIVE_INFINITY)).toBe(0x7c00);
    expect(f32ToF16(Number.NaN)).toBe(0x7e00);
    expect(f32ToF16(fromBits(0x7f800001))).toBe(0x7e00); // NaN whose payload is in low bits
    expect(f32ToF16(fromBits(0x00000001))).toBe(0x0000);
  });

  it('widens exactly', () => {
    expect(f16ToF32(0x3c00)).toBe(1);
    expect(f16ToF32(0x0001)).toBe(2 ** -24);
    expect(f16ToF32(0x7bff)).toBe(65504);
    expect(f16ToF32(0x3555)).toBe(0.333251953125);
    expect(f16ToF32(0xfc00)).toBe(Number.NEGATIVE_INFINITY);
    expect(f16ToF32(0x7e00)).toBeNaN();
    expect(Object.is(f16ToF32(0x8000), -0)).toBe(true);
  });

  it.skipIf(!hasPython)(
    'agrees with Python struct "e" on all 65,536 patterns and 50k floats',
    () => {
      // Python's struct packs/unpacks IEEE binary16 with round-half-even: an independent reference.
      const rng = createRng('f16');
      const xs = Float32Array.from({ length: 50_000 }, () => {
        const v = (rng.next() * 2 - 1) * 2 ** (rng.int(44) - 28); // subnormals through 2^15
        return v;
      });
      const script = `
import struct, sys, json
xs = json.loads(sys.stdin.read())
out = bytearray()
for h in range(65536):
    out += struct.pack('<f', struct.unpack('<e', struct.pack('<H', h))[0])
for x in xs:
    out += struct.pack('<e', x)
sys.stdout.buffer.write(bytes(out))
`;
      const res = spawnSync('python3', ['-c', script], {
        input: JSON.stringify(Array.from(xs)),
        maxBuffer: 1 << 24,
      });
      expect(res.status).toBe(0);
      const buf = new Uint8Array(res.stdout);
      const wide = new Float32Array(buf.buffer.slice(buf.byteOffset, buf.byteOffset + 65536 * 4));
      const narrow = new Uint16Array(
        buf.buffer.slice(buf.byteOffset + 65536 * 4, buf.byteOffset + buf.byteLength),
      );
      const all = Uint16Array.from({ length: 65536 }, (_, i) => i);
      const ours = f16ArrayToF32(all);
      const badWide: number[] = [];
      for (let h = 0; h < 65536; h++) {
        const a = ours[h]!;
        const b = wide[h]!;
        if (Number.isNaN(b) ? !Number.isNaN(a) : !Object.is(a, b) || f16ToF32(h) !== a) {
          badWide.push(h);
        }
      }
      expect(badWide).toEqual([]);
      const oursNarrow = f32ArrayToF16(xs);
      const badNarrow: number[] = [];
      for (let i = 0; i < xs.length; i++) {
        if (oursNarrow[i] !== narrow[i] || f32ToF16(xs[i]!) !== narrow[i]) badNarrow.push(i);
      }
      expect(badNarrow).toEqual([]);
    },
  );
});

describe('tensor float helpers', () => {
  it('round-trip values representable in each float dtype', () => {
    const v = Float32Array.from([1, -2, 0.5, 65504, 2 ** -24, 0]);
    for (const dtype of ['F64', 'F32', 'F16', 'BF16'] as const) {
      const values = dtype === 'BF16' ? Float32Array.from([1, -2, 0.5, 2 ** -133, 3.140625]) : v;
      const t = float32ToTensor(values, dtype, [values.length]);
      expect(t.dtype).toBe(dtype);
      expect(Array.from(tensorToFloat32(t))).toEqual(Array.from(values));
    }
    expect(() => tensorToFloat32({ dtype: 'I32', shape: [1], data: new Int32Array(1) })).toThrow(
      /cannot convert/,
    );
  });
});
