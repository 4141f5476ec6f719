import { type GoldSplitOptions, splitGoldAnswers } from './gold-answers.js';
import {
  type Expr,
  evaluateExpression,
  expressionVariables,
  parseExpression,
} from './math-expression.js';
import { type AnswerSource, extractMathAnswer, lastNumber } from './math-extract.js';
import { compactMath, type NormalizedAnswer, normalizeMathAnswer } from './math-normalize.js';
import type { RewardFunction, RewardInput, RewardResult } from './reward-function.js';

export interface MathEqualOptions {
  /**
   * Numbers are equal when |a − b| ≤ relTolerance · max(|a|, |b|) (default 1e-6). Two integers
   * (safe-integer values on both sides) must be equal exactly.
   */
  relTolerance?: number;
  /** ...or when |a − b| ≤ absTolerance (default 0: an answer of 0 must be exactly 0). */
  absTolerance?: number;
  /**
   * Compare expressions with variables by evaluating both at fixed sample points
   * (`(a+5)(b+2)` = `ab+2a+5b+10`). Default true.
   */
  symbolic?: boolean;
}

export type MathMatchMethod =
  | 'string'
  | 'text'
  | 'numeric'
  | 'symbolic'
  | 'tuple'
  | 'list'
  | 'matrix'
  | 'none';

export interface MathComparison {
  equal: boolean;
  method: MathMatchMethod;
  prediction: string;
  gold: string;
}

/** A parsed answer (see `parseMathAnswer`); `text` is its normalised string. */
export type ParsedMathAnswer = { text: string } & (
  | {
      kind: 'scalar';
      value: NormalizedAnswer;
      compact: string;
      isText: boolean;
      expr: Expr | undefined;
    }
  | { kind: 'tuple'; open: string; close: string; items: ParsedMathAnswer[] }
  | { kind: 'list'; items: ParsedMathAnswer[] }
  | { kind: 'matrix'; rows: ParsedMathAnswer[][] }
);

const OPENERS = '([{';
const CLOSERS = ')]}';

/** How the bracket at `s[i]` moves the depth (0: no bracket) and how many characters it takes. */
function bracketStep(s: string, i: number): { delta: number; width: number } {
  const ch = s[i]!;
  // `\{` and `\}` are brackets too (set notation).
  if (ch === '\\' && (s[i + 1] === '{' || s[i + 1] === '}')) {
    return { delta: s[i + 1] === '{' ? 1 : -1, width: 2 };
  }
  if (OPENERS.includes(ch)) return { delta: 1, width: 1 };
  if (CLOSERS.includes(ch)) return { delta: -1, width: 1 };
  return { delta: 0, width: 1 };
}

/** Splits at commas outside any bracket (`\{`/`\}` count as brackets). */
function splitTopLevel(s: string, separator: string): string[] | undefined {
  const parts: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < s.length; ) {
    const step = bracketStep(s, i);
    depth += step.delta;
    if (step.delta === 0 && depth === 0 && s.startsWith(separator, i)) {
      parts.push(s.slice(start, i));
      start = i + separator.length;
    }
    if (depth < 0) return undefined;
    i += step.width;
  }
  parts.push(s.slice(start));
  return parts.map((p) => p.trim());
}

/** When `s` is wrapped in one bracket pair (types may differ: intervals), its parts. */
function outerBrackets(s: string): { open: string; close: string; inner: string } | undefined {
  let open: string;
  let body: string;
  if (s.startsWith('\\{')) {
    open = '{';
    body = s.slice(2);
  } else if (OPENERS.includes(s[0] ?? '')) {
    open = s[0]!;
    body = s.slice(1);
  } else return undefined;
  let close: string;
  if (body.endsWith('\\}')) {
    close = '}';
    body = body.slice(0, -2);
  } else if (CLOSERS.includes(body[body.length - 1] ?? '')) {
    close = body[body.length - 1]!;
    body = body.slice(0, -1);
  } else return undefined;
  // The opening bracket must close only at the very end: the body never dips below depth 0.
  let depth = 0;
  for (let i = 0; i < body.length; ) {
    const step = bracketStep(body, i);
    depth += step.delta;
    if (depth < 0) return undefined;
    i += step.width;
  }
  if (depth !== 0) return undefined;
  return { open, close, inner: body };
}

function isText(s: string): boolean {
  return /[a-zA-Z]{3,}/.test(s.replace(/\\[a-zA-Z]+/g, ' '));
}

function structure(raw: string): ParsedMathAnswer {
  const norm = normalizeMathAnswer(raw);
  const s = norm.text;
  const matrix = /^\\begin\{([pbvBV]?matrix|array)\}(?:\{[^}]*\})?([\s\S]*)\\end\{\1\}$/.exec(s);
  if (matrix) {
    const rows = matrix[2]!
      .split('\\\\')
      .map((r) => r.trim())
      .filter((r) => r !== '')
      .map((r) => r.split('&').map((c) => structure(c)));
    return { kind: 'matrix', rows, text: s };
  }
  const wrapped = outerBrackets(s);
  if (wrapped) {
    const items = splitTopLevel(wrapped.inner, ',');
    if (items && items.length > 1) {
      const parsed = items.map((x) => structure(x));
      // A set written with braces is an unordered list.
      return wrapped.open === '{' && wrapped.close === '}'
        ? { kind: 'list', items: parsed, text: s }
        : { kind: 'tuple', open: wrapped.open, close: wrapped.close, items: parsed, text: s };
    }
  }
  const items = splitTopLevel(s, ',');
  if (items && items.length > 1 && items.every((x) => x !== '')) {
    return { kind: 'list', items: items.map((x) => structure(x)), text: s };
  }
  const pm = /\\pm(?![a-zA-Z])/.test(s) ? splitTopLevel(s, '\\pm') : undefined;
  if (pm && pm.length === 2 && pm[1] !== '') {
    const head = pm[0] === '' ? '' : `${pm[0]}+`;
    const headMinus = pm[0] === '' ? '-' : `${pm[0]}-`;
    return {
      kind: 'list',
      items: [structure(`${head}(${pm[1]})`), structure(`${headMinus}(${pm[1]})`)],
      text: s,
    };
  }
  const text = isText(s);
  return {
    kind: 'scalar',
    value: norm,
    text: s,
    compact: compactMath(s),
    isText: text,
    expr: text ? undefined : parseExpression(s),
  };
}

function close(a: number, b: number, rel: number, abs: number): boolean {
  if (Number.isNaN(a) || Number.isNaN(b)) return false;
  if (!Number.isFinite(a) || !Number.isFinite(b)) return a === b;
  // Two integers are equal only exactly: 1e-6 relative would accept 1450001 for 1450000.
  if (Number.isSafeInteger(a) && Number.isSafeInteger(b)) return a === b;
  const diff = Math.abs(a - b);
  return diff <= abs || diff <= rel * Math.max(Math.abs(a), Math.abs(b));
}

// Sample points for the symbolic check: fixed (reproducible), positive (so \sqrt and \ln of a
// variable are defined) and irrational-looking (so distinct polynomials rarely agree by chance).
const SAMPLE_POINTS = [0.7315, 1.2861, 1.9437, 0.4178, 2.3752, 1.6093];

function scalarEqual(
  sa: Extract<ParsedMathAnswer, { kind: 'scalar' }>,
  sb: Extract<ParsedMathAnswer, { kind: 'scalar' }>,
  o: Required<MathEqualOptions>,
): MathMatchMethod {
  if (sa.compact === sb.compact) return 'string';
  const a = sa.value;
  const b = sb.value;
  if (sa.isText || sb.isText) {
    const flat = (x: string) => x.toLowerCase().replace(/\s+/g, ' ').trim();
    return flat(a.text) === flat(b.text) ? 'text' : 'none';
  }
  const ea = sa.expr;
  const eb = sb.expr;
  if (!ea || !eb) return 'none';
  const vars = new Set([...expressionVariables(ea), ...expressionVariables(eb)]);
  if (vars.size === 0) {
    const va = evaluateExpression(ea);
    const vb = evaluateExpression(eb);
    const ca = a.percent ? [va, va / 100] : [va];
    const cb = b.percent ? [vb, vb / 100] : [vb];
    for (const x of ca)
      for (const y of cb) if (close(x, y, o.relTolerance, o.absTolerance)) return 'numeric';
    return 'none';
  }
  if (!o.symbolic) return 'none';
  const names = [...vars].sort();
  let agreeing = 0;
  for (let p = 0; p < SAMPLE_POINTS.length; p++) {
    const env = new Map(
      names.map((n, k) => [n, SAMPLE_POINTS[(p + k * 2) % SAMPLE_POINTS.length]! + k * 0.113]),
    );
    const x = evaluateExpression(ea, env);
    const y = evaluateExpression(eb, env);
    if (!Number.isFinite(x) && !Number.isFinite(y)) continue;
    if (!close(x, y, 1e-9, 1e-9)) return 'none';
    agreeing++;
  }
  return agreeing >= 3 ? 'symbolic' : 'none';
}

function structEqual(
  a: ParsedMathAnswer,
  b: ParsedMathAnswer,
  o: Required<MathEqualOptions>,
): MathMatchMethod {
  if (a.kind === 'scalar' && b.kind === 'scalar') return scalarEqual(a, b, o);
  if (a.kind === 'matrix' && b.kind === 'matrix') {
    if (a.rows.length !== b.rows.length) return 'none';
    const ok = a.rows.every(
      (row, i) =>
        row.length === b.rows[i]!.length &&
        row.every((cell, j) => structEqual(cell, b.rows[i]![j]!, o) !== 'none'),
    );
    return ok ? 'matrix' : 'none';
  }
  const ordered = (x: ParsedMathAnswer[], y: ParsedMathAnswer[]) =>
    x.length === y.length && x.every((item, i) => structEqual(item, y[i]!, o) !== 'none');
  if (a.kind === 'tuple' && b.kind === 'tuple') {
    if (a.open !== b.open || a.close !== b.close) return 'none';
    return ordered(a.items, b.items) ? 'tuple' : 'none';
  }
  // "6, 31, -1" answers "(6,31,-1)": a bare list may stand for a parenthesised tuple.
  const roundTuple = (t: ParsedMathAnswer) =>
    t.kind === 'tuple' && t.open === '(' && t.close === ')';
  if (a.kind === 'list' && roundTuple(b))
    return ordered(a.items, (b as { items: ParsedMathAnswer[] }).items) ? 'tuple' : 'none';
  if (b.kind === 'list' && roundTuple(a))
    return ordered((a as { items: ParsedMathAnswer[] }).items, b.items) ? 'tuple' : 'none';
  if (a.kind === 'list' && b.kind === 'list') {
    if (a.items.length !== b.items.length) return 'none';
    const used = new Array<boolean>(b.items.length).fill(false);
    for (const item of a.items) {
      const j = b.items.findIndex((other, k) => !used[k] && structEqual(item, other, o) !== 'none');
      if (j < 0) return 'none';
      used[j] = true;
    }
    return 'list';
  }
  return 'none';
}

const DEFAULTS: Required<MathEqualOptions> = {
  relTolerance: 1e-6,
  absTolerance: 0,
  symbolic: true,
};

/** Whether two answer strings denote the same mathematical object (see README for the rules). */
export function mathEqual(
  prediction: string,
  gold: string,
  options: MathEqualOptions = {},
): MathComparison {
  return mathEqualParsed(parseMathAnswer(prediction), parseMathAnswer(gold), options);
}

/** Parses an answer once, for comparing one gold with many predictions. */
export function parseMathAnswer(answer: string): ParsedMathAnswer {
  return structure(answer);
}

export function mathEqualParsed(
  prediction: ParsedMathAnswer,
  gold: ParsedMathAnswer,
  options: MathEqualOptions = {},
): MathComparison {
  // An empty answer matches nothing, not even an empty gold.
  const empty = prediction.text === '' || gold.text === '';
  const method = empty ? 'none' : structEqual(prediction, gold, { ...DEFAULTS, ...options });
  return { equal: method !== 'none', method, prediction: prediction.text, gold: gold.text };
}

/** The value of a constant answer (`\frac{3}{4}`, `1,200`, `2.5e3`, `\$18`), else undefined. */
export function numericValue(answer: string): number | undefined {
  const norm = normalizeMathAnswer(answer);
  const e = parseExpression(norm.text);
  if (!e || expressionVariables(e).size > 0) return undefined;
  const v = evaluateExpression(e);
  return Number.isNaN(v) ? undefined : v;
}

export interface MathRewardDetails {
  extracted: string;
  source: AnswerSource | 'last-number';
  golds: string[];
  /** Index of the matching gold, -1 when none matched. */
  matchedGold: number;
  method: MathMatchMethod;
}

export interface MathRewardOptions extends MathEqualOptions, GoldSplitOptions {
  name?: string;
  /**
   * When the answer had no \boxed/####/<answer> marker and does not match as a whole, try the
   * last number in it (default true).
   */
  lastNumberFallback?: boolean;
}

/** 1 when the extracted final answer equals any gold (extracted the same way), else 0. */
export function mathEquivalenceReward(
  options: MathRewardOptions = {},
): RewardFunction<MathRewardDetails> {
  const goldSeparator = options.goldSeparator === undefined ? null : options.goldSeparator;
  return {
    name: options.name ?? 'math_equivalence',
    score(input: RewardInput): RewardResult<MathRewardDetails> {
      const golds = splitGoldAnswers(input.groundTruth, { goldSeparator }).map(
        (g) => extractMathAnswer(g).answer,
      );
      const { answer, source } = extractMathAnswer(input.finalAnswer);
      const attempt = (candidate: string, src: MathRewardDetails['source']) => {
        for (let i = 0; i < golds.length; i++) {
          const cmp = mathEqual(candidate, golds[i]!, options);
          if (cmp.equal) {
            return {
              score: 1,
              details: {
                extracted: candidate,
                source: src,
                golds,
                matchedGold: i,
                method: cmp.method,
              },
            };
          }
        }
        return undefined;
      };
      const direct = attempt(answer, source);
      if (direct) return direct;
      if ((options.lastNumberFallback ?? true) && source === 'whole') {
        const n = lastNumber(input.finalAnswer);
        const viaNumber = n === undefined ? undefined : attempt(n, 'last-number');
        if (viaNumber) return viaNumber;
      }
      return {
        score: 0,
        details: { extracted: answer, source, golds, matchedGold: -1, method: 'none' },
      };
    },
  };
}
