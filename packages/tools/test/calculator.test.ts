import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { SHARED_DIR, sharedPath, skipWithoutShared } from '../../../test-utils/shared.js';
import { calculate, evaluateExpression, formatNumber } from '../src/calculator.js';
import { createCalculatorTool } from '../src/calculator-tool.js';
import { CalculatorError } from '../src/errors.js';

describe('evaluateExpression', () => {
  // Expected values are worked out by hand from ordinary arithmetic precedence rules.
  it.each([
    ['1 + 2 * 3', 7],
    ['(1 + 2) * 3', 9],
    ['-2^2', -4], // power binds tighter than unary minus, as in Python's -2**2
    ['2^-1', 0.5],
    ['2**3**2', 512], // right-associative: 2^(3^2)
    ['--3', 3],
    ['3 ÷ 4 × 2 − 1', 0.5],
    ['1,234,567 + 1', 1234568],
    ['max(1,234)', 234], // inside a call the comma separates arguments
    ['min(4, -2, 7)', -2],
    ['50%', 0.5],
    ['200 * 15%', 30],
    ['10 % 3', 1],
    ['-7 % 3', 2], // Python's sign convention: -7 = 3*(-3) + 2
    ['10 // 3', 3],
    ['sqrt(16) + abs(-3)', 7],
    ['floor(2.7) + ceil(2.1)', 5],
    ['round(2.5)', 3],
    ['round(1.005, 2)', 1.01],
    ['log(1000)', 3],
    ['log(8, 2)', 3],
    ['ln(e)', 1],
    ['exp(0)', 1],
    ['2(3 + 4)', 14],
    ['.5 * 4', 2],
    ['1e3 / 8', 125],
    ['48/2=24', 24], // a GSM8K note: the "= result" part is ignored
  ])('%s = %d', (expr, want) => {
    expect(evaluateExpression(expr)).toBeCloseTo(want, 12);
  });

  it('evaluates trigonometry at hand-known angles', () => {
    expect(evaluateExpression('sin(pi/2)')).toBeCloseTo(1, 15);
    expect(evaluateExpression('cos(pi)')).toBeCloseTo(-1, 15);
    expect(evaluateExpression('tan(pi/4)')).toBeCloseTo(1, 15);
  });

  it.each([
    ['1/0', /Division by zero/],
    ['5 % 0', /Division by zero/],
    ['sqrt(-1)', /not a real number/],
    ['10^400', /overflow/],
    ['2 +', /ended unexpectedly/],
    ['(1 + 2', /Expected '\)'/],
    ['foo(2)', /Unknown name 'foo'/],
    ['sqrt 4', /needs parentheses/],
    ['max()', /at least 1 argument/],
    ['1.5.2', /Unexpected number/],
    ['2 $ 3', /Unexpected character '\$'/],
    ['', /Empty expression/],
    ['__import__("os")', /Unexpected character '"'/],
  ])('rejects %s', (expr, message) => {
    let caught: unknown;
    try {
      evaluateExpression(expr);
    } catch (error) {
      caught = error;
    }
    expect(CalculatorError.isInstance(caught)).toBe(true);
    expect((caught as Error).message).toMatch(message);
  });
});

describe('formatNumber', () => {
  it.each([
    [0.1 + 0.2, '0.3'],
    [1 / 3, '0.333333333333'],
    [24, '24'],
    [-0, '0'],
    [1e22, '1e+22'],
    [1.234e-7, '0.0000001234'],
    [2.5e-12, '2.5e-12'],
    [-1234.5, '-1234.5'],
  ])('%d → %s', (value, text) => {
    expect(formatNumber(value)).toBe(text);
  });
});

describe('calculator tool', () => {
  it('returns the formatted number, and a readable error result for bad input', async () => {
    const tool = createCalculatorTool();
    const good = await tool.execute({ expression: '(1,250 * 12) * (1 - 15%)' }, {});
    expect(good).toMatchObject({ ok: true, output: '12750' });
    const bad = await tool.execute({ expression: '3 +* 4' }, {});
    expect(bad.ok).toBe(false);
    expect(bad.errorCode).toBe('CALCULATOR_ERROR');
    expect(String(bad.output)).toMatch(/^Error: Unexpected '\*'/);
  });
});

describe.skipIf(skipWithoutShared('GSM8K calculator notes'))('GSM8K <<expr=result>> notes', () => {
  it('reproduces the results the annotators wrote', () => {
    // Reference: the GSM8K test set's own calculator annotations. A few notes are themselves
    // rounded or wrong, so we count agreement (relative 1e-6, or equal after rounding to the
    // annotator's decimals) instead of requiring all.
    const lines = readFileSync(sharedPath('data', 'gsm8k', 'test.jsonl'), 'utf8')
      .trim()
      .split('\n');
    let total = 0;
    let agree = 0;
    for (const line of lines) {
      const { answer } = JSON.parse(line) as { answer: string };
      for (const [, expr, result] of answer.matchAll(/<<([^=<>]+)=([^<>]+)>>/g)) {
        const want = Number(result);
        if (!Number.isFinite(want)) continue;
        total++;
        const got = calculate(expr!).value;
        const decimals = (result!.split('.')[1] ?? '').length;
        if (
          Math.abs(got - want) <= 1e-6 * Math.max(1, Math.abs(want)) ||
          Number(got.toFixed(decimals)) === want
        ) {
          agree++;
        }
      }
    }
    expect(SHARED_DIR).toBeDefined();
    expect(total).toBeGreaterThan(4000);
    // Measured on 2026-11-22: 4281 of the 4281 numeric notes agree; keep a small margin for
    // formatting changes.
    expect(agree / total, `${agree}/${total}`).toBeGreaterThan(0.999);
  });
});
