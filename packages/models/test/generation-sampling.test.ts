// Token choice from logits, against hand-derived distributions: probabilities 0.5/0.3/0.15/0.05
// (logits = their logs), top-k and top-p sets worked out by hand, empirical frequencies of 20,000
// seeded draws within 4 standard errors, and the reported logprob log softmax(logits / T) over the
// full vocabulary whatever the filters.
import { createRng } from '@flowgrpo/core';
import { describe, expect, it } from 'vitest';
import { argmaxOf, sampleToken, tokenLogprob } from '../src/generation/sampling.js';

const p = [0.5, 0.3, 0.15, 0.05];
const logits = Float32Array.from(p, Math.log);

function frequencies(params: Parameters<typeof sampleToken>[1], draws = 20000): number[] {
  const rng = createRng(42);
  const counts = [0, 0, 0, 0];
  for (let i = 0; i < draws; i++) counts[sampleToken(logits, params, rng).token]!++;
  return counts.map((c) => c / draws);
}

function expectFreq(got: number[], want: number[], draws = 20000) {
  for (let i = 0; i < want.length; i++) {
    const se = Math.sqrt((want[i]! * (1 - want[i]!)) / draws);
    expect(Math.abs(got[i]! - want[i]!), `token ${i}`).toBeLessThanOrEqual(4 * se + 1e-12);
  }
}

describe('sampleToken', () => {
  it('T = 1 draws from softmax(logits)', () => expectFreq(frequencies({ temperature: 1 }), p));

  it('T = 0.5 draws from p² / Σp²', () => {
    const z = p.reduce((s, x) => s + x * x, 0);
    expectFreq(
      frequencies({ temperature: 0.5 }),
      p.map((x) => (x * x) / z),
    );
  });

  it('top-k = 2 keeps tokens 0 and 1, renormalised (5/8, 3/8)', () =>
    expectFreq(frequencies({ topK: 2 }), [0.625, 0.375, 0, 0]));

  it('top-p = 0.75 keeps 0.5 + 0.3 (the token crossing 0.75 is kept); top-p = 0.85 adds 0.15', () => {
    expectFreq(frequencies({ topP: 0.75 }), [0.625, 0.375, 0, 0]);
    expectFreq(frequencies({ topP: 0.85 }), [0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0]);
    expectFreq(frequencies({ topP: 0.1 }), [1, 0, 0, 0]);
  });

  it('top-k then top-p over the renormalised top-k set', () =>
    // top-k 3 → 0.5/0.95, 0.3/0.95 (sum 0.842 ≥ 0.8) → tokens 0, 1.
    expectFreq(frequencies({ topK: 3, topP: 0.8 }), [0.625, 0.375, 0, 0]));

  it('reports log softmax(logits / T) over the full vocabulary, whatever the filters', () => {
    const rng = createRng(1);
    for (const params of [
      { temperature: 1 },
      { temperature: 0.5, topK: 2 },
      { temperature: 2, topP: 0.5 },
    ]) {
      const t = params.temperature;
      const z = p.reduce((s, x) => s + x ** (1 / t), 0);
      for (let i = 0; i < 50; i++) {
        const s = sampleToken(logits, params, rng);
        expect(s.logprob).toBeCloseTo(Math.log(p[s.token]! ** (1 / t) / z), 6);
      }
    }
  });

  it('greedy (T = 0) takes the first maximum and reports the T = 1 logprob; seeds reproduce', () => {
    const x = Float32Array.from([1, 3, 3, 2]);
    const s = sampleToken(x, { temperature: 0 }, createRng(0));
    expect(s.token).toBe(1);
    expect(argmaxOf(x)).toBe(1);
    const lse = Math.log(Math.exp(1) + 2 * Math.exp(3) + Math.exp(2));
    expect(s.logprob).toBeCloseTo(3 - lse, 12);
    expect(tokenLogprob(x, 3, 1)).toBeCloseTo(2 - lse, 12);
    const a = createRng(9);
    const b = createRng(9);
    for (let i = 0; i < 20; i++)
      expect(sampleToken(logits, { topP: 0.9 }, a)).toEqual(sampleToken(logits, { topP: 0.9 }, b));
  });

  it('reads one row of a batch by offset; rejects bad parameters', () => {
    const batch = Float32Array.from([0, 0, 0, 0, ...logits]);
    expect(sampleToken(batch, { temperature: 0 }, createRng(0), 4, 4).token).toBe(0);
    expect(() => sampleToken(logits, { temperature: -1 }, createRng(0))).toThrow(RangeError);
    expect(() => sampleToken(logits, { topP: 0 }, createRng(0))).toThrow(RangeError);
  });
});
