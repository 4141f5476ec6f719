import { readFileSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import { sharedPath, skipWithoutShared } from '../../../test-utils/shared.js';
import { gsm8kFinal, gsm8kMultiDimensionReward, gsm8kMultiDimensionScore } from '../src/index.js';

// Expected totals are the chapter's terms added by hand in its order; where the float sum is not
// the decimal one, the value is what Python prints for the same sum
// (0.5+0.1+0.1+0.1+0.1+0.1 → 0.9999999999999999).

describe('GSM8K multi-dimension reward (seed 003), hand-computed', () => {
  it('all dimensions earned', () => {
    const completion =
      '<think>\nJanet has 16 eggs.\nShe eats 3, so 16 - 3 = 13.\n</think>\nThe answer is 13.';
    const r = gsm8kMultiDimensionScore(completion, '13');
    // last number "13." → 13 (accuracy 0.5); think tags (0.1) with > 20 chars (0.1);
    // 2 lines (0.1) with digits (0.1); 19 words ≤ 300 (0.1).
    expect(r.details).toMatchObject({
      accuracy: 0.5,
      predicted: 13,
      gold: 13,
      tokenCount: 19,
      conciseness: 0.1,
    });
    expect(r.details.format).toBeCloseTo(0.2, 15);
    expect(r.details.reasoning).toBeCloseTo(0.2, 15);
    expect(r.score).toBe(0.9999999999999999);
  });

  it('a short think block earns only its presence and the calculation mark', () => {
    // accuracy 0.5 + think present 0.1 + "2+2" has digits 0.1 + concise 0.1; "2+2" is 3 chars
    // (≤ 20) and one line. 0.5+0.1+0.1+0.1 → 0.7999999999999999.
    expect(gsm8kMultiDimensionScore('<think>2+2</think> 4', '4').score).toBe(0.7999999999999999);
  });

  it('the 1% relative window uses |gold| + 1e-8 in the denominator', () => {
    // 202 vs 200: 2 / 200.00000001 = 0.0099999999995 < 0.01 → accepted; 203: 0.015 → not.
    expect(gsm8kMultiDimensionScore('202', '200').details.accuracy).toBe(0.5);
    expect(gsm8kMultiDimensionScore('203', '200').details.accuracy).toBe(0);
    expect(gsm8kMultiDimensionScore('201.5', '200').details.accuracy).toBe(0.5);
  });

  it('a trailing lone comma is the last "number" and fails to parse: no accuracy', () => {
    // /-?[\d,]+\.?\d*/ matches "5," and then ","; float("") raises in the chapter → 0.
    const r = gsm8kMultiDimensionScore('I computed 5, then stopped,', '5');
    expect(r.details.accuracy).toBe(0);
    expect(r.score).toBe(0.1); // conciseness only
  });

  it("digits of other scripts count, as Python's \\d and float() read them", () => {
    // Python 3.11: re.findall(r'-?[\d,]+\.?\d*', '١٢٣') → ['١٢٣'], float → 123.0;
    // '𝟓𝟕' (mathematical bold digits) → 57.0; '৭২' (Bengali) → 72.0.
    expect(gsm8kMultiDimensionScore('= ١٢٣', '123').details.predicted).toBe(123);
    expect(gsm8kMultiDimensionScore('= 𝟓𝟕', '57').details.predicted).toBe(57);
    expect(gsm8kMultiDimensionScore('= ৭২', '72').details.accuracy).toBe(0.5);
  });

  it('length: ≤ 300 words +0.1, 301–800 nothing, > 800 −0.05, floored at 0', () => {
    const words = (n: number, last: string) => `${'word '.repeat(n - 1)}${last}`;
    expect(gsm8kMultiDimensionScore(words(300, '7'), '7').score).toBe(0.6);
    expect(gsm8kMultiDimensionScore(words(301, '7'), '7').score).toBe(0.5);
    expect(gsm8kMultiDimensionScore(words(801, '7'), '7').score).toBe(0.45);
    expect(gsm8kMultiDimensionScore(words(801, '8'), '7').score).toBe(0); // max(0, −0.05)
  });

  it('reads the gold from a full GSM8K solution and the text from completion', async () => {
    const reward = gsm8kMultiDimensionReward();
    const r = await reward.score({
      question: 'q',
      groundTruth: 'She pays 1,000 + 450 = <<1000+450=1450>>1,450\n#### 1,450',
      finalAnswer: '1450',
      completion: 'Total 1,450',
    });
    expect(r.details.gold).toBe(1450);
    expect(r.details.predicted).toBe(1450);
    expect(r.score).toBe(0.6);
  });
});

type GsmRow = { question: string; answer: string };

describe.skipIf(skipWithoutShared('GSM8K multi-dimension reward'))(
  'on real GSM8K test rows',
  () => {
    let rows: GsmRow[] = [];
    beforeAll(() => {
      rows = readFileSync(sharedPath('data', 'gsm8k', 'test.jsonl'), 'utf8')
        .split('\n')
        .filter((l) => l.trim() !== '')
        .map((l) => JSON.parse(l) as GsmRow);
    });

    it('each gold solution as the completion scores 0.6 (accuracy + conciseness, no tags)', () => {
      // Every solution ends with "#### N" (so N is the last number) and has ≤ 173 words.
      const scores = rows.map(
        (r) => gsm8kMultiDimensionScore(r.answer, gsm8kFinal(r.answer)!).score,
      );
      expect(new Set(scores)).toEqual(new Set([0.6]));
    });

    it('the solution wrapped in <think> with "The answer is N." scores the maximum', () => {
      // Every solution has ≥ 2 non-blank lines besides "####", > 20 chars and digits.
      const scores = rows.map((r) => {
        const final = gsm8kFinal(r.answer)!;
        const steps = r.answer.split('\n').filter((l) => !l.includes('####'));
        const completion = `<think>\n${steps.join('\n')}\n</think>\nThe answer is ${final}.`;
        return gsm8kMultiDimensionScore(completion, final).score;
      });
      expect(new Set(scores)).toEqual(new Set([0.9999999999999999]));
    });
  },
);
