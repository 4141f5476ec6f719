// The axes of report.html's charts, and the accuracy comparison every printed "A − B" line uses
// (the browser test reads the same labels back from the rendered page).
import { describe, expect, it } from 'vitest';
import { accuracyDifference, formatAccuracyDifference } from '../src/eval/accuracy-difference.js';
import { wilsonInterval } from '../src/eval/evaluate.js';
import { esc, stepTicks, tickLabels, valueTicks } from '../src/report/report-chart.js';

const labels = (lo: number, hi: number) => {
  const { ticks, step } = valueTicks(lo, hi);
  return tickLabels(ticks, step);
};

describe('report chart axes', () => {
  it('steps are distinct integers inside the data, evenly spaced', () => {
    expect(stepTicks(1, 1)).toEqual([1]);
    expect(stepTicks(1, 3)).toEqual([1, 2, 3]);
    expect(stepTicks(1, 6)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(stepTicks(1, 12)).toEqual([2, 4, 6, 8, 10, 12]);
    expect(stepTicks(10, 200)).toEqual([50, 100, 150, 200]);
    expect(stepTicks(3, 5000).length).toBeLessThanOrEqual(7);
  });

  it('a non-negative series starts at 0 and ends at a round tick above its maximum', () => {
    // A warm-up learning rate from 0 to 5e-4 once drew an axis from −1.5e-4.
    expect(labels(0, 5e-4)).toEqual(['0', '1e-4', '2e-4', '3e-4', '4e-4', '5e-4']);
    expect(labels(0.3, 0.74)).toEqual(['0', '0.25', '0.50', '0.75']);
    expect(labels(0.1, 0.9)).toEqual(['0', '0.2', '0.4', '0.6', '0.8', '1.0']);
    expect(labels(120, 131)[0]).toBe('0');
    // All zeros (no failed rollouts) and a constant still get an axis with room.
    expect(labels(0, 0)).toEqual(['0', '0.2', '0.4', '0.6', '0.8', '1.0']);
    expect(labels(5e-4, 5e-4)).toEqual(['0', '1e-4', '2e-4', '3e-4', '4e-4', '5e-4']);
    // Exponent labels share one precision: 5.0e-4 beside 1.0e-3, not 5e-4.
    expect(labels(0, 2e-3)).toEqual(['0', '5.0e-4', '1.0e-3', '1.5e-3', '2.0e-3']);
  });

  it('a series that goes negative keeps its negative range, labelled distinctly', () => {
    const l = labels(-0.013, 0.021);
    expect(Number(l[0])).toBeLessThanOrEqual(-0.013);
    expect(Number(l.at(-1))).toBeGreaterThanOrEqual(0.021);
    expect(new Set(l).size).toBe(l.length);
    expect(labels(-3, -3).every((x) => Number(x) < 0)).toBe(true);
  });

  it('escapes markup and shows control characters instead of passing them on', () => {
    expect(esc('<b>"x" & \'y\'</b>')).toBe('&lt;b&gt;&quot;x&quot; &amp; &#39;y&#39;&lt;/b&gt;');
    expect(esc('\x1b]52;c;aGk=\x07a\nb\tc')).toBe('\\x1b]52;c;aGk=\\x07a\nb\tc');
  });
});

describe('accuracy differences', () => {
  const policy = (name: string, k: number, n: number) => ({
    name,
    accuracy: k / n,
    accuracy_ci95: wilsonInterval(k, n),
  });

  it('calls a difference whose 95% intervals overlap inconclusive', () => {
    const d = accuracyDifference(policy('grpo', 6, 10), policy('sft', 4, 10));
    expect(d.inconclusive).toBe(true);
    expect(formatAccuracyDifference(d, { name: 'GRPO', baseline: 'SFT' })).toBe(
      'GRPO − SFT: 20.0 points, inconclusive: the 95% intervals overlap',
    );
  });

  it('states a clear difference plainly', () => {
    const d = accuracyDifference(policy('grpo', 119, 120), policy('sft', 86, 120));
    expect(d.inconclusive).toBe(false);
    expect(formatAccuracyDifference(d)).toBe('grpo − sft: 27.5 points');
  });
});
