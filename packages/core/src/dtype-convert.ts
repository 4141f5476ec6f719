// Conversions between float32 and the two 16-bit float formats weights ship in.
// 16-bit values are carried as their raw bit patterns (numbers in [0, 0xffff], or Uint16Array),
// because JS has no native half type in Node 20.
//
// Narrowing rounds to nearest, ties to even (as IEEE 754, PyTorch and numpy do); NaN stays NaN
// (made quiet, sign and top payload bits kept), ±Inf stays ±Inf, overflow goes to ±Inf and
// subnormals are produced and read. Scalar inputs are first rounded to float32 (Math.fround):
// these are f32 → 16-bit conversions, and rounding a double straight to 16 bits could differ
// from what a float32 tensor would give.

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

function f32Bits(x: number): number {
  f32[0] = x;
  return u32[0]!;
}

function bitsToF32(bits: number): number {
  u32[0] = bits;
  return f32[0]!;
}

/** bfloat16 bits → float32 value (exact: bf16 is the top half of an f32). */
export function bf16ToF32(bits: number): number {
  return bitsToF32((bits & 0xffff) << 16);
}

function bf16FromF32Bits(u: number): number {
  if ((u & 0x7f800000) === 0x7f800000 && (u & 0x7fffff) !== 0) {
    return ((u >>> 16) | 0x0040) & 0xffff;
  }
  // Adding 0x7fff plus the kept LSB rounds to nearest-even; a carry out of the mantissa bumps the
  // exponent, which also turns values above the largest finite bf16 into Inf.
  return ((u + 0x7fff + ((u >>> 16) & 1)) >>> 16) & 0xffff;
}

/** float32 value → bfloat16 bits, round to nearest even. */
export function f32ToBf16(x: number): number {
  return bf16FromF32Bits(f32Bits(x));
}

function f16FromF32Bits(u: number): number {
  const sign = (u >>> 16) & 0x8000;
  const exp = (u >>> 23) & 0xff;
  const mant = u & 0x7fffff;
  if (exp === 0xff) return mant === 0 ? sign | 0x7c00 : sign | 0x7e00 | (mant >>> 13);
  if (exp > 142) return sign | 0x7c00; // |x| >= 2^16: beyond every f16, even after rounding
  if (exp >= 113) {
    // Normal f16 (unbiased exponent -14..15): keep 10 mantissa bits, round on the dropped 13.
    let h = ((exp - 112) << 10) | (mant >>> 13);
    const rem = mant & 0x1fff;
    // A carry can ripple into the exponent (and from 0x7bff to Inf), which is the correct result.
    if (rem > 0x1000 || (rem === 0x1000 && (h & 1) === 1)) h++;
    return sign | h;
  }
  // Subnormal f16 (value m * 2^-24) or zero. The f32 significand with its implicit bit is
  // m32 * 2^(exp - 150), so m = m32 / 2^(126 - exp).
  if (exp < 102) return sign; // below 2^-25: rounds to zero (f32 subnormals included)
  const shift = 126 - exp; // 14..24
  const m32 = mant | 0x800000;
  let h = m32 >>> shift;
  const rem = m32 & ((1 << shift) - 1);
  const half = 1 << (shift - 1);
  if (rem > half || (rem === half && (h & 1) === 1)) h++; // may reach 0x400, the smallest normal
  return sign | h;
}

/** float32 value → IEEE binary16 bits, round to nearest even. */
export function f32ToF16(x: number): number {
  return f16FromF32Bits(f32Bits(x));
}

/** IEEE binary16 bits → float32 value (exact). */
export function f16ToF32(bits: number): number {
  const sign = bits & 0x8000 ? -1 : 1;
  const exp = (bits >>> 10) & 0x1f;
  const mant = bits & 0x3ff;
  if (exp === 0) return sign * mant * 2 ** -24;
  if (exp === 0x1f) return mant === 0 ? sign * Number.POSITIVE_INFINITY : Number.NaN;
  return sign * (1024 + mant) * 2 ** (exp - 25);
}

/** Float32Array → bfloat16 bit patterns. */
export function f32ArrayToBf16(values: Float32Array): Uint16Array {
  const bits = new Uint32Array(values.buffer, values.byteOffset, values.length);
  const out = new Uint16Array(values.length);
  for (let i = 0; i < out.length; i++) out[i] = bf16FromF32Bits(bits[i]!);
  return out;
}

/** bfloat16 bit patterns → Float32Array. */
export function bf16ArrayToF32(bits: Uint16Array): Float32Array {
  const out = new Float32Array(bits.length);
  const outBits = new Uint32Array(out.buffer);
  for (let i = 0; i < bits.length; i++) outBits[i] = bits[i]! << 16;
  return out;
}

/** Float32Array → binary16 bit patterns. */
export function f32ArrayToF16(values: Float32Array): Uint16Array {
  const bits = new Uint32Array(values.buffer, values.byteOffset, values.length);
  const out = new Uint16Array(values.length);
  for (let i = 0; i < out.length; i++) out[i] = f16FromF32Bits(bits[i]!);
  return out;
}

let f16Table: Float32Array | undefined;

/** binary16 bit patterns → Float32Array (through a 65,536-entry table built on first use). */
export function f16ArrayToF32(bits: Uint16Array): Float32Array {
  if (f16Table === undefined) {
    f16Table = new Float32Array(0x10000);
    const tableBits = new Uint32Array(f16Table.buffer);
    for (let h = 0; h < 0x10000; h++) {
      const exp = (h >>> 10) & 0x1f;
      // Keep NaN payloads bit-exact (f16ToF32 returns the canonical NaN).
      if (exp === 0x1f && (h & 0x3ff) !== 0) {
        tableBits[h] = ((h & 0x8000) << 16) | 0x7f800000 | ((h & 0x3ff) << 13);
      } else {
        f16Table[h] = f16ToF32(h);
      }
    }
  }
  const out = new Float32Array(bits.length);
  for (let i = 0; i < bits.length; i++) out[i] = f16Table[bits[i]!]!;
  return out;
}
