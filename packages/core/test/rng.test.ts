import { describe, expect, it } from 'vitest';
import { createRng, type RngState, rngFromState, ValidationError } from '../src/index.js';
import { splitMix64, xoshiroStateFromSeed } from '../src/rng.js';

const M = (1n << 64n) - 1n;

// Independent reference: a direct BigInt transcription of the published xoshiro256** C code
// (https://prng.di.unimi.it/xoshiro256starstar.c), sharing nothing with the 32-bit-halves
// implementation under test.
function refXoshiro(s: bigint[]): () => bigint {
  const rotl = (x: bigint, k: bigint) => ((x << k) | (x >> (64n - k))) & M;
  return () => {
    const result = (rotl((s[1]! * 5n) & M, 7n) * 9n) & M;
    const t = (s[1]! << 17n) & M;
    s[2]! ^= s[0]!;
    s[3]! ^= s[1]!;
    s[1]! ^= s[2]!;
    s[0]! ^= s[3]!;
    s[2]! ^= t;
    s[3] = rotl(s[3]!, 45n);
    return result;
  };
}

function stateOf(s: bigint[], key = 0n): RngState {
  const h = (x: bigint) => x.toString(16).padStart(16, '0');
  return { algorithm: 'xoshiro256**', s: [h(s[0]!), h(s[1]!), h(s[2]!), h(s[3]!)], key: h(key) };
}

describe('SplitMix64', () => {
  it('matches the published vector for seed 1234567', () => {
    // Reference outputs of splitmix64.c for x = 1234567 (the vector rand_xoshiro tests against;
    // re-derived with Python integers).
    const expected = [
      6457827717110365317n,
      3203168211198807973n,
      9817491932198370423n,
      4593380528125082431n,
      16408922859458223821n,
    ];
    let x = 1234567n;
    for (const e of expected) {
      const [z, nx] = splitMix64(x);
      expect(z).toBe(e);
      x = nx;
    }
  });
});

describe('xoshiro256**', () => {
  it('matches the reference C outputs for state {1, 2, 3, 4}', () => {
    // The 10 values the reference implementation produces from s = {1, 2, 3, 4}.
    const expected = [
      11520n,
      0n,
      1509978240n,
      1215971899390074240n,
      1216172134540287360n,
      607988272756665600n,
      16172922978634559625n,
      8476171486693032832n,
      10595114339597558777n,
      2904607092377533576n,
    ];
    const rng = rngFromState(stateOf([1n, 2n, 3n, 4n]));
    expect(expected.map(() => rng.nextUint64())).toEqual(expected);
  });

  it('seeds through SplitMix64 (values from a Python transcription of both C files)', () => {
    expect(xoshiroStateFromSeed(42n)).toEqual([
      0xbdd732262feb6e95n,
      0x28efe333b266f103n,
      0x47526757130f9f52n,
      0x581ce1ff0e4ae394n,
    ]);
    const rng = createRng(42);
    expect([rng.nextUint64(), rng.nextUint64(), rng.nextUint64()]).toEqual([
      1546998764402558742n,
      6990951692964543102n,
      12544586762248559009n,
    ]);
  });

  it('agrees with the BigInt reference for 5000 outputs, nextUint32 and next()', () => {
    const seed = 0xdeadbeefcafen;
    const ref = refXoshiro(xoshiroStateFromSeed(seed));
    const a = createRng(seed);
    const b = createRng(seed);
    const c = createRng(seed);
    const mismatches: number[] = [];
    for (let i = 0; i < 5000; i++) {
      const r = ref();
      if (a.nextUint64() !== r) mismatches.push(i);
      if (b.nextUint32() !== Number(r >> 32n)) mismatches.push(i);
      if (c.next() !== Number(r >> 11n) / 2 ** 53) mismatches.push(i);
    }
    expect(mismatches).toEqual([]);
  });

  it('maps seeds: negatives are two’s complement, bigints mod 2^64, strings hashed', () => {
    expect(createRng(-1).nextUint64()).toBe(createRng(M).nextUint64());
    expect(createRng(5).nextUint64()).toBe(createRng(5n + (1n << 64n)).nextUint64());
    expect(createRng('abc').nextUint64()).toBe(createRng('abc').nextUint64());
    expect(createRng('abc').nextUint64()).not.toBe(createRng('abd').nextUint64());
    expect(createRng('42').nextUint64()).not.toBe(createRng(42).nextUint64());
    expect(() => createRng(1.5)).toThrow(ValidationError);
  });
});

// Statistical checks use fixed seeds, so they are deterministic; thresholds are the p = 0.001
// critical values, i.e. a correct generator fails them for 1 seed in 1000.
describe('statistics', () => {
  it('next() is uniform on [0, 1): mean, variance and a 20-bucket chi-square', () => {
    const rng = createRng(7);
    const n = 200_000;
    const buckets = new Array<number>(20).fill(0);
    let sum = 0;
    let sumSq = 0;
    let outside = 0;
    for (let i = 0; i < n; i++) {
      const u = rng.next();
      if (!(u >= 0 && u < 1)) outside++;
      sum += u;
      sumSq += u * u;
      buckets[Math.floor(u * 20)]!++;
    }
    expect(outside).toBe(0);
    const mean = sum / n;
    // sd of the mean of U(0,1) is sqrt(1/12/n) ~ 6.5e-4; allow 4 sd.
    expect(Math.abs(mean - 0.5)).toBeLessThan(4 * Math.sqrt(1 / 12 / n));
    expect(Math.abs(sumSq / n - mean * mean - 1 / 12)).toBeLessThan(0.002);
    const e = n / 20;
    const chi2 = buckets.reduce((acc, o) => acc + (o - e) ** 2 / e, 0);
    expect(chi2).toBeLessThan(43.82); // chi-square, 19 df, p = 0.001
  });

  it('int(n) covers [0, n) uniformly (chi-square) for small and > 2^32 ranges', () => {
    const rng = createRng(11);
    const n = 120_000;
    const counts = new Array<number>(12).fill(0);
    for (let i = 0; i < n; i++) counts[rng.int(12)]!++;
    const e = n / 12;
    const chi2 = counts.reduce((acc, o) => acc + (o - e) ** 2 / e, 0);
    expect(chi2).toBeLessThan(31.26); // 11 df, p = 0.001
    // A range above 2^32 uses the 53-bit path; split it into 3 equal thirds.
    const big = 3 * 2 ** 40;
    const thirds = [0, 0, 0];
    let bad = 0;
    for (let i = 0; i < 30_000; i++) {
      const v = rng.int(big);
      if (!(Number.isInteger(v) && v >= 0 && v < big)) bad++;
      else thirds[Math.floor(v / 2 ** 40)]!++;
    }
    expect(bad).toBe(0);
    const chi3 = thirds.reduce((acc, o) => acc + (o - 10_000) ** 2 / 10_000, 0);
    expect(chi3).toBeLessThan(13.82); // 2 df, p = 0.001
    expect(rng.int(1)).toBe(0);
    expect(() => rng.int(0)).toThrow(ValidationError);
    expect(() => rng.int(2.5)).toThrow(ValidationError);
  });

  it('int(n) is unbiased where plain modulo would not be', () => {
    // n = 3 * 2^30: 2^32 mod n = 2^30, so `u % n` would make [0, 2^30) twice as likely as the
    // rest (probability 1/2 instead of 1/3). Rejection sampling must give ~1/3.
    const rng = createRng(12);
    const n = 3 * 2 ** 30;
    let low = 0;
    const draws = 30_000;
    for (let i = 0; i < draws; i++) if (rng.int(n) < 2 ** 30) low++;
    expect(Math.abs(low / draws - 1 / 3)).toBeLessThan(4 * Math.sqrt(((1 / 3) * (2 / 3)) / draws));
  });

  it('normal() has mean 0, variance 1 and the right tail mass', () => {
    const rng = createRng(13);
    const n = 100_000;
    let sum = 0;
    let sumSq = 0;
    let beyond2 = 0;
    for (let i = 0; i < n; i++) {
      const z = rng.normal();
      sum += z;
      sumSq += z * z;
      if (Math.abs(z) > 1.959964) beyond2++;
    }
    expect(Math.abs(sum / n)).toBeLessThan(4 / Math.sqrt(n));
    // var of z^2 is 2, so sd of the sample variance ~ sqrt(2/n).
    expect(Math.abs(sumSq / n - 1)).toBeLessThan(4 * Math.sqrt(2 / n));
    expect(Math.abs(beyond2 / n - 0.05)).toBeLessThan(4 * Math.sqrt((0.05 * 0.95) / n));
  });
});

describe('streams', () => {
  it('is deterministic: equal seeds give equal sequences, splits and forks', () => {
    const a = createRng(99);
    const b = createRng(99);
    for (let i = 0; i < 100; i++) expect(a.nextUint32()).toBe(b.nextUint32());
    const ca = a.split();
    const cb = b.split();
    for (let i = 0; i < 100; i++) expect(ca.next()).toBe(cb.next());
    expect(a.fork('x').nextUint64()).toBe(b.fork('x').nextUint64());
  });

  it('split() children are independent of the parent and of each other', () => {
    const parent = createRng(5);
    const c1 = parent.split();
    const c2 = parent.split();
    const n = 20_000;
    const xs = [parent, c1, c2].map((r) => Float64Array.from({ length: n }, () => r.next() - 0.5));
    const corr = (x: Float64Array, y: Float64Array) => {
      let sxy = 0;
      let sxx = 0;
      let syy = 0;
      for (let i = 0; i < n; i++) {
        sxy += x[i]! * y[i]!;
        sxx += x[i]! * x[i]!;
        syy += y[i]! * y[i]!;
      }
      return sxy / Math.sqrt(sxx * syy);
    };
    // Under independence the sample correlation has sd ~ 1/sqrt(n) ~ 0.007.
    for (const [i, j] of [
      [0, 1],
      [0, 2],
      [1, 2],
    ] as const) {
      expect(Math.abs(corr(xs[i]!, xs[j]!))).toBeLessThan(4 / Math.sqrt(n));
    }
    // No child replays any part of another's first outputs.
    const seen = new Set<bigint>();
    for (const r of [createRng(5), createRng(5).split()]) {
      for (let i = 0; i < 1000; i++) seen.add(r.nextUint64());
    }
    expect(seen.size).toBe(2000);
  });

  it('fork(label) is keyed by label and does not advance the parent', () => {
    const a = createRng(3);
    const b = createRng(3);
    const fa = a.fork('data');
    for (let i = 0; i < 10; i++) b.next();
    // Same label on a parent that has drawn 10 numbers: the same stream.
    const fb = b.fork('data');
    for (let i = 0; i < 50; i++) expect(fa.nextUint32()).toBe(fb.nextUint32());
    // The parent did not move: a's next value equals a fresh rng's first.
    expect(a.nextUint64()).toBe(createRng(3).nextUint64());
    expect(createRng(3).fork('data').nextUint64()).not.toBe(
      createRng(3).fork('sampling').nextUint64(),
    );
    expect(createRng(3).fork('data').nextUint64()).not.toBe(createRng(4).fork('data').nextUint64());
    // Forks of split children differ from forks of the parent.
    const p = createRng(3);
    expect(p.split().fork('data').nextUint64()).not.toBe(p.fork('data').nextUint64());
  });

  it('state() round-trips through JSON and resumes exactly, forks included', () => {
    const rng = createRng('checkpoint');
    for (let i = 0; i < 123; i++) rng.normal();
    const saved = JSON.parse(JSON.stringify(rng.state())) as RngState;
    const resumed = rngFromState(saved);
    for (let i = 0; i < 200; i++) expect(resumed.nextUint64()).toBe(rng.nextUint64());
    expect(resumed.fork('z').next()).toBe(rng.fork('z').next());
    expect(resumed.split().next()).toBe(rng.split().next());
    expect(() => rngFromState({ ...saved, algorithm: 'mt19937' as 'xoshiro256**' })).toThrow(
      ValidationError,
    );
    expect(() => rngFromState({ ...saved, s: ['0', '0', '0', '0'] })).toThrow(ValidationError);
    expect(() => rngFromState({ ...saved, key: 'xyz' })).toThrow(ValidationError);
  });
});

describe('shuffle and permutation', () => {
  it('shuffle is in place, returns the array, keeps the elements, and is seeded', () => {
    const arr = Array.from({ length: 50 }, (_, i) => i);
    const out = createRng(1).shuffle(arr);
    expect(out).toBe(arr);
    expect([...arr].sort((x, y) => x - y)).toEqual(Array.from({ length: 50 }, (_, i) => i));
    expect(createRng(1).shuffle(Array.from({ length: 50 }, (_, i) => i))).toEqual(arr);
    expect(createRng(1).shuffle([])).toEqual([]);
  });

  it('all 6 orders of 3 items are equally likely (chi-square)', () => {
    const rng = createRng(21);
    const counts = new Map<string, number>();
    const n = 60_000;
    for (let i = 0; i < n; i++) {
      const k = rng.shuffle(['a', 'b', 'c']).join('');
      counts.set(k, (counts.get(k) ?? 0) + 1);
    }
    expect(counts.size).toBe(6);
    const e = n / 6;
    const chi2 = [...counts.values()].reduce((acc, o) => acc + (o - e) ** 2 / e, 0);
    expect(chi2).toBeLessThan(20.52); // 5 df, p = 0.001
  });

  it('permutation(n) equals shuffling 0..n-1 with the same stream', () => {
    const p = createRng(8).permutation(1000);
    const s = createRng(8).shuffle(Array.from({ length: 1000 }, (_, i) => i));
    expect(Array.from(p)).toEqual(s);
    expect(createRng(8).permutation(0).length).toBe(0);
    expect(() => createRng(8).permutation(-1)).toThrow(ValidationError);
  });
});
