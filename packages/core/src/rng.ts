import { ValidationError } from './errors.js';

// Seeded, splittable PRNG: xoshiro256** 1.0 (Blackman & Vigna, https://prng.di.unimi.it/) with its
// 256-bit state filled by SplitMix64, the seeding the authors recommend.
//
// Why this generator: it passes BigCrush/PractRand, has a 2^256-1 period, is small enough to run
// at full speed on 32-bit halves in plain JS numbers (no BigInt in the hot path), and its
// published reference outputs let the tests check the implementation bit for bit. Its whole
// state is four 64-bit words, so a checkpoint can save it and `rngFromState` can resume exactly.
//
// Streams:
// - `split()` draws one 64-bit output from the parent (advancing it) and seeds a child through
//   SplitMix64, like java.util.SplittableRandom: children start at unrelated points of the
//   2^256 cycle, so overlap is astronomically unlikely for any realistic draw count.
// - `fork(label)` does NOT advance the parent: the child is keyed by the parent's key (its seed,
//   or the value a split child was seeded with) and the label, so `rng.fork('data')` is the same
//   stream no matter how many numbers the parent has produced (cf. JAX's fold_in).

const TWO32 = 0x1_0000_0000;
const TWO53 = 2 ** 53;
const MASK64 = (1n << 64n) - 1n;
const GOLDEN_GAMMA = 0x9e3779b97f4a7c15n;
// Separates fork keys from seeds and split keys (any fixed odd constant would do).
const FORK_DOMAIN = 0x6a09e667f3bcc909n;

export const RNG_ALGORITHM = 'xoshiro256**' as const;

/** JSON-serialisable snapshot of an Rng; 64-bit words are 16-digit lowercase hex strings. */
export interface RngState {
  algorithm: typeof RNG_ALGORITHM;
  /** s[0..3] of xoshiro256**. */
  s: [string, string, string, string];
  /** The key `fork` derives children from. */
  key: string;
}

export interface Rng {
  /** Upper 32 bits of the next 64-bit output, in [0, 2^32). */
  nextUint32(): number;
  /** Float in [0, 1) with 53 random bits (upper 53 bits of the next output). */
  next(): number;
  /** Uniform integer in [0, n) without modulo bias; n a positive integer <= 2^53. */
  int(n: number): number;
  /** Standard normal deviate (Box–Muller, one value per two draws, no cached spare). */
  normal(): number;
  /** Independent child stream; advances this stream by one draw. */
  split(): Rng;
  /** Child stream keyed by label; does not advance this stream. */
  fork(label: string): Rng;
  /** In-place Fisher–Yates shuffle; returns the same array. */
  shuffle<T>(array: T[]): T[];
  /** A uniformly random permutation of 0..n-1. */
  permutation(n: number): Int32Array;
  /** Next raw 64-bit output as a bigint (for seeding other generators). */
  nextUint64(): bigint;
  /** Exact snapshot; `rngFromState(rng.state())` continues the same sequence. */
  state(): RngState;
}

/** One SplitMix64 step: returns [output, nextState]. */
export function splitMix64(state: bigint): [bigint, bigint] {
  const x = (state + GOLDEN_GAMMA) & MASK64;
  let z = x;
  z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & MASK64;
  z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & MASK64;
  return [z ^ (z >> 31n), x];
}

function mix64(x: bigint): bigint {
  return splitMix64(x)[0];
}

/** FNV-1a 64 over the UTF-8 bytes of `s`. */
function fnv1a64(s: string): bigint {
  let h = 0xcbf29ce484222325n;
  for (const b of new TextEncoder().encode(s)) {
    h ^= BigInt(b);
    h = (h * 0x100000001b3n) & MASK64;
  }
  return h;
}

/** Maps any accepted seed to 64 bits: integers modulo 2^64 (negatives two's complement), strings hashed. */
export function seedToUint64(seed: number | bigint | string): bigint {
  if (typeof seed === 'bigint') return seed & MASK64;
  if (typeof seed === 'number') {
    if (!Number.isSafeInteger(seed)) {
      throw new ValidationError(`RNG seed must be a safe integer, got ${seed}`, {
        issues: [{ path: 'seed', message: 'not a safe integer' }],
        value: seed,
      });
    }
    return BigInt(seed) & MASK64;
  }
  // Strings are hashed, not parsed: createRng('42') and createRng(42) are different streams.
  return mix64(fnv1a64(seed) ^ FORK_DOMAIN);
}

function hex64(x: bigint): string {
  return x.toString(16).padStart(16, '0');
}

class Xoshiro256StarStar implements Rng {
  // s[i] split into high and low 32-bit halves, each held as an unsigned int32 in a JS number.
  private a0 = 0;
  private a1 = 0;
  private b0 = 0;
  private b1 = 0;
  private c0 = 0;
  private c1 = 0;
  private d0 = 0;
  private d1 = 0;
  // Output of the last step, written by step() to avoid allocating a pair per draw.
  private outHi = 0;
  private outLo = 0;

  constructor(
    s: readonly [bigint, bigint, bigint, bigint],
    private readonly key: bigint,
  ) {
    if (s.every((w) => w === 0n)) {
      // The all-zero state is the one fixed point of xoshiro; SplitMix64 never yields it from
      // a seed, so only a hand-made RngState can hit this.
      throw new ValidationError('xoshiro256** state must not be all zero', {
        issues: [{ path: 's', message: 'all zero' }],
        value: s,
      });
    }
    [this.a0, this.a1] = [Number(s[0] >> 32n), Number(s[0] & 0xffffffffn)];
    [this.b0, this.b1] = [Number(s[1] >> 32n), Number(s[1] & 0xffffffffn)];
    [this.c0, this.c1] = [Number(s[2] >> 32n), Number(s[2] & 0xffffffffn)];
    [this.d0, this.d1] = [Number(s[3] >> 32n), Number(s[3] & 0xffffffffn)];
  }

  private step(): void {
    const bh = this.b0;
    const bl = this.b1;
    // result = rotl(s1 * 5, 7) * 9
    let lo = bl * 5;
    let hi = (Math.imul(bh, 5) + Math.floor(lo / TWO32)) >>> 0;
    lo >>>= 0;
    const rh = ((hi << 7) | (lo >>> 25)) >>> 0;
    const rl = ((lo << 7) | (hi >>> 25)) >>> 0;
    lo = rl * 9;
    hi = (Math.imul(rh, 9) + Math.floor(lo / TWO32)) >>> 0;
    this.outHi = hi;
    this.outLo = lo >>> 0;
    // t = s1 << 17
    const th = ((bh << 17) | (bl >>> 15)) >>> 0;
    const tl = (bl << 17) >>> 0;
    // s2 ^= s0; s3 ^= s1; s1 ^= s2; s0 ^= s3; s2 ^= t; s3 = rotl(s3, 45)
    this.c0 = (this.c0 ^ this.a0) >>> 0;
    this.c1 = (this.c1 ^ this.a1) >>> 0;
    const dh = (this.d0 ^ bh) >>> 0;
    const dl = (this.d1 ^ bl) >>> 0;
    this.b0 = (bh ^ this.c0) >>> 0;
    this.b1 = (bl ^ this.c1) >>> 0;
    this.a0 = (this.a0 ^ dh) >>> 0;
    this.a1 = (this.a1 ^ dl) >>> 0;
    this.c0 = (this.c0 ^ th) >>> 0;
    this.c1 = (this.c1 ^ tl) >>> 0;
    // rotl by 45 = swap halves (32) then rotl by 13
    this.d0 = ((dl << 13) | (dh >>> 19)) >>> 0;
    this.d1 = ((dh << 13) | (dl >>> 19)) >>> 0;
  }

  nextUint32(): number {
    this.step();
    return this.outHi;
  }

  nextUint64(): bigint {
    this.step();
    return (BigInt(this.outHi) << 32n) | BigInt(this.outLo);
  }

  private next53(): number {
    this.step();
    return this.outHi * 2097152 + (this.outLo >>> 11);
  }

  next(): number {
    return this.next53() / TWO53;
  }

  int(n: number): number {
    if (!Number.isInteger(n) || n < 1 || n > TWO53) {
      throw new ValidationError(`rng.int(n) needs an integer 1 <= n <= 2^53, got ${n}`, {
        issues: [{ path: 'n', message: 'out of range' }],
        value: n,
      });
    }
    if (n <= TWO32) {
      // Reject the top (2^32 mod n) values so every residue is equally likely.
      const limit = TWO32 - (TWO32 % n);
      for (;;) {
        const u = this.nextUint32();
        if (u < limit) return u % n;
      }
    }
    const limit = TWO53 - (TWO53 % n);
    for (;;) {
      const u = this.next53();
      if (u < limit) return u % n;
    }
  }

  normal(): number {
    // 1 - next() lies in (0, 1], so the log is finite.
    const u1 = 1 - this.next();
    const u2 = this.next();
    return Math.sqrt(-2 * Math.log(u1)) * Math.cos(2 * Math.PI * u2);
  }

  split(): Rng {
    return fromKey(this.nextUint64());
  }

  fork(label: string): Rng {
    return fromKey(mix64(this.key ^ mix64(fnv1a64(label) ^ FORK_DOMAIN)));
  }

  shuffle<T>(array: T[]): T[] {
    for (let i = array.length - 1; i > 0; i--) {
      const j = this.int(i + 1);
      const tmp = array[i]!;
      array[i] = array[j]!;
      array[j] = tmp;
    }
    return array;
  }

  permutation(n: number): Int32Array {
    if (!Number.isInteger(n) || n < 0 || n > 0x7fffffff) {
      throw new ValidationError(`rng.permutation(n) needs an integer 0 <= n < 2^31, got ${n}`, {
        issues: [{ path: 'n', message: 'out of range' }],
        value: n,
      });
    }
    const p = new Int32Array(n);
    for (let i = 0; i < n; i++) p[i] = i;
    for (let i = n - 1; i > 0; i--) {
      const j = this.int(i + 1);
      const tmp = p[i]!;
      p[i] = p[j]!;
      p[j] = tmp;
    }
    return p;
  }

  state(): RngState {
    const w = (h: number, l: number) => hex64((BigInt(h) << 32n) | BigInt(l));
    return {
      algorithm: RNG_ALGORITHM,
      s: [w(this.a0, this.a1), w(this.b0, this.b1), w(this.c0, this.c1), w(this.d0, this.d1)],
      key: hex64(this.key),
    };
  }
}

/** Expands a 64-bit key into a xoshiro256** state with four SplitMix64 outputs. */
export function xoshiroStateFromSeed(seed64: bigint): [bigint, bigint, bigint, bigint] {
  let x = seed64 & MASK64;
  const out: bigint[] = [];
  for (let i = 0; i < 4; i++) {
    const [z, nx] = splitMix64(x);
    out.push(z);
    x = nx;
  }
  return out as [bigint, bigint, bigint, bigint];
}

function fromKey(key: bigint): Rng {
  return new Xoshiro256StarStar(xoshiroStateFromSeed(key), key);
}

/** A deterministic generator: equal seeds give equal streams on every platform. */
export function createRng(seed: number | bigint | string): Rng {
  return fromKey(seedToUint64(seed));
}

const HEX64 = /^[0-9a-f]{1,16}$/;

/** Rebuilds an Rng from `state()` output; the stream continues exactly where it was saved. */
export function rngFromState(state: RngState): Rng {
  const issues: { path: string; message: string }[] = [];
  if (typeof state !== 'object' || state === null) {
    issues.push({ path: '', message: 'not an object' });
  } else {
    if (state.algorithm !== RNG_ALGORITHM) {
      issues.push({ path: 'algorithm', message: `expected '${RNG_ALGORITHM}'` });
    }
    if (!Array.isArray(state.s) || state.s.length !== 4) {
      issues.push({ path: 's', message: 'expected 4 hex words' });
    } else {
      state.s.forEach((w, i) => {
        if (typeof w !== 'string' || !HEX64.test(w)) {
          issues.push({ path: `s.${i}`, message: 'expected up to 16 lowercase hex digits' });
        }
      });
    }
    if (typeof state.key !== 'string' || !HEX64.test(state.key)) {
      issues.push({ path: 'key', message: 'expected up to 16 lowercase hex digits' });
    }
  }
  if (issues.length > 0) {
    throw new ValidationError('invalid RNG state', { issues, value: state });
  }
  const s = state.s.map((w) => BigInt(`0x${w}`)) as [bigint, bigint, bigint, bigint];
  return new Xoshiro256StarStar(s, BigInt(`0x${state.key}`));
}
