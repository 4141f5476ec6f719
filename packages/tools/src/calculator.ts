import { CalculatorError } from './errors.js';

// A small recursive-descent evaluator for arithmetic. It never calls eval/Function: the input is
// tokenized and parsed by the grammar below, and only the listed functions and constants exist.
//
//   expression := additive
//   additive   := multiplicative (('+' | '-') multiplicative)*
//   multiplicative := unary (('*' | '/' | '//' | '%') unary | implicit-product)*
//   unary      := ('+' | '-') unary | power
//   power      := postfix (('^' | '**') unary)?        (right-associative; -2^2 = -4)
//   postfix    := primary '%'?                         (a trailing % means "/100")
//   primary    := number | constant | name '(' args ')' | '(' expression ')'

type Token =
  | { kind: 'num'; value: number; pos: number }
  | { kind: 'name'; value: string; pos: number }
  | { kind: 'op'; value: string; pos: number }
  | { kind: 'end'; pos: number };

const FUNCTIONS: Record<string, { min: number; max: number; fn: (...a: number[]) => number }> = {
  sqrt: { min: 1, max: 1, fn: Math.sqrt },
  abs: { min: 1, max: 1, fn: Math.abs },
  round: { min: 1, max: 2, fn: (x, digits = 0) => roundHalfAwayFromZero(x, digits) },
  floor: { min: 1, max: 1, fn: Math.floor },
  ceil: { min: 1, max: 1, fn: Math.ceil },
  min: { min: 1, max: Number.POSITIVE_INFINITY, fn: Math.min },
  max: { min: 1, max: Number.POSITIVE_INFINITY, fn: Math.max },
  // log(x) is base 10 as on a pocket calculator; log(x, b) takes the base; ln is natural.
  log: {
    min: 1,
    max: 2,
    fn: (x, base) => (base === undefined ? Math.log10(x) : Math.log(x) / Math.log(base)),
  },
  log10: { min: 1, max: 1, fn: Math.log10 },
  log2: { min: 1, max: 1, fn: Math.log2 },
  ln: { min: 1, max: 1, fn: Math.log },
  exp: { min: 1, max: 1, fn: Math.exp },
  pow: { min: 2, max: 2, fn: Math.pow },
  sin: { min: 1, max: 1, fn: Math.sin },
  cos: { min: 1, max: 1, fn: Math.cos },
  tan: { min: 1, max: 1, fn: Math.tan },
};

const CONSTANTS: Record<string, number> = { pi: Math.PI, e: Math.E, tau: 2 * Math.PI };

const SYMBOLS: Record<string, string> = {
  '×': '*',
  '·': '*',
  '⋅': '*',
  '∗': '*',
  '÷': '/',
  '∕': '/',
  '−': '-',
  '–': '-',
  π: 'pi',
};

function roundHalfAwayFromZero(x: number, digits: number): number {
  if (!Number.isInteger(digits)) throw new CalculatorError('round() digits must be an integer');
  const f = 10 ** digits;
  // toPrecision first so 1.005 (stored as 1.00499999…) rounds the way it is written.
  const scaled = Number((Math.abs(x) * f).toPrecision(15));
  return (Math.sign(x) * Math.round(scaled)) / f;
}

function tokenize(src: string): Token[] {
  const tokens: Token[] = [];
  // Inside a function call's parentheses a comma separates arguments; elsewhere "1,234" is a number.
  const parens: ('call' | 'group')[] = [];
  let i = 0;
  while (i < src.length) {
    let ch = src[i]!;
    if (/\s/.test(ch)) {
      i++;
      continue;
    }
    ch = SYMBOLS[ch] ?? ch;
    if (/[0-9.]/.test(ch)) {
      const start = i;
      const inCall = parens.at(-1) === 'call';
      let text = '';
      const intPart = /^\d+/.exec(src.slice(i));
      if (intPart) {
        text += intPart[0];
        i += intPart[0].length;
        if (!inCall && intPart[0].length <= 3) {
          for (
            let g = /^,(\d{3})(?!\d)/.exec(src.slice(i));
            g;
            g = /^,(\d{3})(?!\d)/.exec(src.slice(i))
          ) {
            text += g[1];
            i += g[0].length;
          }
        }
      }
      const frac = /^\.\d*/.exec(src.slice(i));
      if (frac) {
        text += frac[0];
        i += frac[0].length;
      }
      if (text === '.' || text === '') throw new CalculatorError(`Unexpected '.'`, start);
      const expo = /^[eE][+-]?\d+/.exec(src.slice(i));
      if (expo) {
        text += expo[0];
        i += expo[0].length;
      }
      tokens.push({ kind: 'num', value: Number(text), pos: start });
      continue;
    }
    if (/[A-Za-z_]/.test(ch) || ch === 'pi') {
      const start = i;
      if (ch === 'pi') {
        i++;
        tokens.push({ kind: 'name', value: 'pi', pos: start });
        continue;
      }
      const word = /^[A-Za-z_][A-Za-z0-9_]*/.exec(src.slice(i))![0];
      i += word.length;
      tokens.push({ kind: 'name', value: word.toLowerCase(), pos: start });
      continue;
    }
    const start = i;
    if (src.startsWith('**', i) || src.startsWith('//', i)) {
      tokens.push({ kind: 'op', value: src.slice(i, i + 2), pos: start });
      i += 2;
      continue;
    }
    if ('+-*/^%(),'.includes(ch)) {
      if (ch === '(') parens.push(tokens.at(-1)?.kind === 'name' ? 'call' : 'group');
      if (ch === ')') parens.pop();
      tokens.push({ kind: 'op', value: ch, pos: start });
      i++;
      continue;
    }
    throw new CalculatorError(`Unexpected character '${src[i]}'`, start);
  }
  tokens.push({ kind: 'end', pos: src.length });
  return tokens;
}

const MAX_DEPTH = 200;
const MAX_LENGTH = 10_000;
const MAX_ARGS = 1000;

class Parser {
  #i = 0;
  #depth = 0;
  constructor(private readonly tokens: Token[]) {}

  get #tok(): Token {
    return this.tokens[this.#i]!;
  }

  #isOp(value: string): boolean {
    const t = this.#tok;
    return t.kind === 'op' && t.value === value;
  }

  #expectOp(value: string): void {
    if (!this.#isOp(value)) {
      const t = this.#tok;
      throw new CalculatorError(
        t.kind === 'end' ? `Expected '${value}' but the expression ended` : `Expected '${value}'`,
        t.pos,
      );
    }
    this.#i++;
  }

  parse(): number {
    if (this.#tok.kind === 'end') throw new CalculatorError('Empty expression');
    const value = this.#additive();
    const t: Token = this.tokens[this.#i]!;
    if (t.kind !== 'end') {
      throw new CalculatorError(
        `Unexpected ${t.kind === 'num' ? 'number' : `'${t.value}'`}`,
        t.pos,
      );
    }
    return value;
  }

  #additive(): number {
    let value = this.#multiplicative();
    while (this.#isOp('+') || this.#isOp('-')) {
      const op = (this.#tok as { value: string }).value;
      this.#i++;
      const rhs = this.#multiplicative();
      value = op === '+' ? value + rhs : value - rhs;
    }
    return value;
  }

  /** A name or '(' right after an operand multiplies it; two numbers in a row stay an error. */
  #startsImplicitFactor(): boolean {
    const t = this.#tok;
    return t.kind === 'name' || (t.kind === 'op' && t.value === '(');
  }

  #multiplicative(): number {
    let value = this.#unary();
    for (;;) {
      const t = this.#tok;
      if (t.kind === 'op' && ['*', '/', '//', '%'].includes(t.value)) {
        this.#i++;
        const rhs = this.#unary();
        if (t.value === '*') value *= rhs;
        else {
          if (rhs === 0) throw new CalculatorError('Division by zero', t.pos);
          if (t.value === '/') value /= rhs;
          else if (t.value === '//') value = Math.floor(value / rhs);
          // Python's modulo: the result has the divisor's sign.
          else value = value - rhs * Math.floor(value / rhs);
        }
      } else if (this.#startsImplicitFactor()) {
        // Implicit product: "2(3+4)", "2pi", "(1+2)(3+4)".
        value *= this.#unary();
      } else {
        return value;
      }
    }
  }

  #unary(): number {
    // Every nesting (parentheses, function calls, signs, powers) passes through here; a bound
    // keeps hostile input ("((((…" a hundred thousand deep) a CalculatorError, not a stack
    // overflow.
    if (++this.#depth > MAX_DEPTH) {
      throw new CalculatorError('The expression is nested too deeply', this.#tok.pos);
    }
    try {
      if (this.#isOp('-')) {
        this.#i++;
        return -this.#unary();
      }
      if (this.#isOp('+')) {
        this.#i++;
        return this.#unary();
      }
      return this.#power();
    } finally {
      this.#depth--;
    }
  }

  #power(): number {
    const base = this.#postfix();
    if (this.#isOp('^') || this.#isOp('**')) {
      this.#i++;
      return base ** this.#unary();
    }
    return base;
  }

  #postfix(): number {
    const value = this.#primary();
    if (this.#isOp('%')) {
      // "%" followed by an operand is modulo (handled by #multiplicative); otherwise percent.
      const next = this.tokens[this.#i + 1]!;
      const operandFollows =
        next.kind === 'num' ||
        next.kind === 'name' ||
        (next.kind === 'op' && ['(', '-', '+'].includes(next.value));
      if (!operandFollows) {
        this.#i++;
        return value / 100;
      }
    }
    return value;
  }

  #primary(): number {
    const t = this.#tok;
    if (t.kind === 'num') {
      this.#i++;
      return t.value;
    }
    if (t.kind === 'name') {
      this.#i++;
      // Own keys only: 'constructor' or '__proto__' must not find Object.prototype's members.
      const fn = Object.hasOwn(FUNCTIONS, t.value) ? FUNCTIONS[t.value] : undefined;
      if (fn && this.#isOp('(')) {
        this.#i++;
        const args: number[] = [];
        if (!this.#isOp(')')) {
          args.push(this.#additive());
          while (this.#isOp(',')) {
            this.#i++;
            if (args.length >= MAX_ARGS) {
              throw new CalculatorError(`Too many arguments (at most ${MAX_ARGS})`, t.pos);
            }
            args.push(this.#additive());
          }
        }
        this.#expectOp(')');
        if (args.length < fn.min || args.length > fn.max) {
          const want =
            fn.min === fn.max
              ? `${fn.min}`
              : fn.max === Number.POSITIVE_INFINITY
                ? `at least ${fn.min}`
                : `${fn.min} to ${fn.max}`;
          throw new CalculatorError(
            `${t.value}() takes ${want} argument(s), got ${args.length}`,
            t.pos,
          );
        }
        return fn.fn(...args);
      }
      if (Object.hasOwn(CONSTANTS, t.value)) return CONSTANTS[t.value]!;
      if (fn) throw new CalculatorError(`Function '${t.value}' needs parentheses`, t.pos);
      throw new CalculatorError(
        `Unknown name '${t.value}'. Known functions: ${Object.keys(FUNCTIONS).join(', ')}; constants: pi, e`,
        t.pos,
      );
    }
    if (t.kind === 'op' && t.value === '(') {
      this.#i++;
      const value = this.#additive();
      this.#expectOp(')');
      return value;
    }
    if (t.kind === 'end') throw new CalculatorError('The expression ended unexpectedly', t.pos);
    throw new CalculatorError(`Unexpected '${t.value}'`, t.pos);
  }
}

/** Evaluates an arithmetic expression; throws `CalculatorError` for bad input or a non-real result. */
export function evaluateExpression(expression: string): number {
  // A trailing "= result" (as in GSM8K's <<48/2=24>> notes) is ignored.
  const src = expression.replace(/=.*$/s, '');
  if (src.length > MAX_LENGTH) {
    throw new CalculatorError(`The expression is too long (more than ${MAX_LENGTH} characters)`);
  }
  const value = new Parser(tokenize(src)).parse();
  if (Number.isNaN(value)) throw new CalculatorError('The result is not a real number');
  if (!Number.isFinite(value)) throw new CalculatorError('The result is too large (overflow)');
  return value;
}

/**
 * Formats a result the way a person would write it: floating-point noise removed by rounding to
 * `significantDigits` (default 12), no trailing zeros, plain digits up to 1e21.
 */
export function formatNumber(value: number, significantDigits = 12): string {
  if (Object.is(value, -0) || value === 0) return '0';
  const rounded = Number(value.toPrecision(significantDigits));
  if (Math.abs(rounded) >= 1e21 || Math.abs(rounded) < 1e-9) {
    return rounded.toExponential().replace(/\.?0+e/, 'e');
  }
  const text = String(rounded);
  if (!text.includes('e')) return text;
  // String() switches to exponents below 1e-6; spell such numbers out.
  return rounded
    .toFixed(Math.min(100, significantDigits + Math.ceil(-Math.log10(Math.abs(rounded)))))
    .replace(/\.?0+$/, '');
}

export function calculate(expression: string): { value: number; text: string } {
  const value = evaluateExpression(expression);
  return { value, text: formatNumber(value) };
}
