// A small parser and evaluator for the constant and polynomial-like expressions that math answers
// are written in (LaTeX or plain): numbers (decimal, scientific), + − × ÷ · / ^ !, implicit
// multiplication (`2\sqrt{3}`, `3\pi`, `(a+5)(b+2)`), \frac, \sqrt, \sqrt[n], \pi, \infty,
// \sin/\cos/\tan/\cot/\sec/\csc/\ln/\log/\exp, and single-letter variables. It evaluates in floating
// point; symbolic equality is tested by evaluating both sides at the same sample points.
// Anything else (subscripts, \cup, relations, multi-letter words) is a parse failure, and callers
// fall back to comparing normalised strings.

export type Expr =
  | { kind: 'num'; value: number }
  | { kind: 'var'; name: string }
  | { kind: 'neg'; arg: Expr }
  | { kind: 'bin'; op: '+' | '-' | '*' | '/' | '^'; left: Expr; right: Expr }
  | { kind: 'fn'; name: string; arg: Expr }
  | { kind: 'root'; degree: Expr; arg: Expr }
  | { kind: 'fact'; arg: Expr };

type Token =
  | { t: 'num'; value: number }
  | { t: 'var'; name: string }
  | { t: 'cmd'; name: string }
  | { t: 'op'; op: string };

const FUNCTIONS = new Set(['sin', 'cos', 'tan', 'cot', 'sec', 'csc', 'ln', 'log', 'exp']);
const CONSTANTS: Record<string, number> = { pi: Math.PI, infty: Number.POSITIVE_INFINITY };

class ParseFailure extends Error {}

function tokenize(src: string): Token[] {
  const out: Token[] = [];
  let i = 0;
  while (i < src.length) {
    const ch = src[i]!;
    if (/\s/.test(ch)) {
      i++;
      continue;
    }
    const num = /^(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?/.exec(src.slice(i));
    if (num) {
      out.push({ t: 'num', value: Number(num[0]) });
      i += num[0].length;
      continue;
    }
    if (ch === '\\') {
      const cmd = /^\\([a-zA-Z]+)/.exec(src.slice(i));
      if (!cmd) throw new ParseFailure(`bad escape at ${i}`);
      const name = cmd[1]!;
      i += cmd[0].length;
      if (name === 'cdot' || name === 'times') out.push({ t: 'op', op: '*' });
      else if (name === 'div') out.push({ t: 'op', op: '/' });
      else out.push({ t: 'cmd', name });
      continue;
    }
    if (/[a-zA-Z]/.test(ch)) {
      out.push({ t: 'var', name: ch });
      i++;
      continue;
    }
    if ('+-*/^()[]{}!'.includes(ch)) {
      out.push({ t: 'op', op: ch });
      i++;
      continue;
    }
    throw new ParseFailure(`unexpected ${JSON.stringify(ch)} at ${i}`);
  }
  return out;
}

const CLOSE: Record<string, string> = { '(': ')', '[': ']', '{': '}' };

class Parser {
  private pos = 0;
  constructor(private readonly tokens: Token[]) {}

  parseAll(): Expr {
    const e = this.expr();
    if (this.pos !== this.tokens.length) throw new ParseFailure('trailing tokens');
    return e;
  }

  private peek(): Token | undefined {
    return this.tokens[this.pos];
  }

  private isOp(op: string): boolean {
    const t = this.peek();
    return t?.t === 'op' && t.op === op;
  }

  private expect(op: string): void {
    if (!this.isOp(op)) throw new ParseFailure(`expected ${op}`);
    this.pos++;
  }

  private expr(): Expr {
    let left = this.term();
    while (this.isOp('+') || this.isOp('-')) {
      const op = (this.tokens[this.pos++] as { op: '+' | '-' }).op;
      left = { kind: 'bin', op, left, right: this.term() };
    }
    return left;
  }

  private startsPrimary(): boolean {
    const t = this.peek();
    if (!t) return false;
    if (t.t === 'num' || t.t === 'var' || t.t === 'cmd') return true;
    return t.op === '(' || t.op === '[' || t.op === '{';
  }

  private term(): Expr {
    let left = this.unary();
    for (;;) {
      if (this.isOp('*') || this.isOp('/')) {
        const op = (this.tokens[this.pos++] as { op: '*' | '/' }).op;
        left = { kind: 'bin', op, left, right: this.unary() };
      } else if (this.startsPrimary()) {
        // Two bare numbers side by side ("1 000") are ambiguous, not a product.
        if (this.peek()?.t === 'num' && endsWithNumber(left)) throw new ParseFailure('num num');
        left = { kind: 'bin', op: '*', left, right: this.power() };
      } else return left;
    }
  }

  private unary(): Expr {
    if (this.isOp('-')) {
      this.pos++;
      return { kind: 'neg', arg: this.unary() };
    }
    if (this.isOp('+')) {
      this.pos++;
      return this.unary();
    }
    return this.power();
  }

  private power(): Expr {
    let base = this.postfix(this.primary());
    if (this.isOp('^')) {
      this.pos++;
      const exponent = this.isOp('-') || this.isOp('+') ? this.unary() : this.power();
      base = { kind: 'bin', op: '^', left: base, right: exponent };
    }
    return base;
  }

  private postfix(e: Expr): Expr {
    while (this.isOp('!')) {
      this.pos++;
      e = { kind: 'fact', arg: e };
    }
    return e;
  }

  private group(): Expr {
    const t = this.peek();
    if (t?.t === 'op' && CLOSE[t.op]) {
      this.pos++;
      const inner = this.expr();
      this.expect(CLOSE[t.op]!);
      return inner;
    }
    throw new ParseFailure('expected group');
  }

  private primary(): Expr {
    const t = this.peek();
    if (!t) throw new ParseFailure('unexpected end');
    if (t.t === 'num') {
      this.pos++;
      return { kind: 'num', value: t.value };
    }
    if (t.t === 'var') {
      this.pos++;
      return { kind: 'var', name: t.name };
    }
    if (t.t === 'op') return this.group();
    this.pos++;
    const name = t.name;
    if (name in CONSTANTS) return { kind: 'num', value: CONSTANTS[name]! };
    if (name === 'frac') {
      const num = this.braceArg();
      const den = this.braceArg();
      return { kind: 'bin', op: '/', left: num, right: den };
    }
    if (name === 'sqrt') {
      let degree: Expr = { kind: 'num', value: 2 };
      if (this.isOp('[')) degree = this.group();
      // √(x+1) arrives as \sqrt(x+1).
      const arg = this.isOp('(') ? this.group() : this.braceArg();
      return { kind: 'root', degree, arg };
    }
    if (FUNCTIONS.has(name)) {
      // \sin^2 x is written with the power on the function; we apply it to the result.
      let exponent: Expr | undefined;
      if (this.isOp('^')) {
        this.pos++;
        exponent = this.primary();
      }
      const arg = this.isOp('(') || this.isOp('{') || this.isOp('[') ? this.group() : this.power();
      const call: Expr = { kind: 'fn', name, arg };
      return exponent ? { kind: 'bin', op: '^', left: call, right: exponent } : call;
    }
    throw new ParseFailure(`unsupported command \\${name}`);
  }

  /** A LaTeX argument: `{...}` or a single token (`\frac12`). */
  private braceArg(): Expr {
    if (this.isOp('{')) return this.group();
    const t = this.peek();
    if (t?.t === 'num' || t?.t === 'var') {
      this.pos++;
      return t.t === 'num' ? { kind: 'num', value: t.value } : { kind: 'var', name: t.name };
    }
    if (t?.t === 'cmd' && t.name in CONSTANTS) return this.primary();
    throw new ParseFailure('expected argument');
  }
}

function endsWithNumber(e: Expr): boolean {
  if (e.kind === 'num') return true;
  if (e.kind === 'bin' && e.op === '*') return endsWithNumber(e.right);
  return false;
}

/** Parses an expression, or returns undefined when it is outside the supported grammar. */
export function parseExpression(src: string): Expr | undefined {
  try {
    const tokens = tokenize(src);
    if (tokens.length === 0) return undefined;
    return new Parser(tokens).parseAll();
  } catch (e) {
    if (e instanceof ParseFailure) return undefined;
    throw e;
  }
}

export function expressionVariables(e: Expr, into: Set<string> = new Set()): Set<string> {
  switch (e.kind) {
    case 'var':
      into.add(e.name);
      break;
    case 'neg':
    case 'fn':
    case 'fact':
      expressionVariables(e.arg, into);
      break;
    case 'bin':
      expressionVariables(e.left, into);
      expressionVariables(e.right, into);
      break;
    case 'root':
      expressionVariables(e.degree, into);
      expressionVariables(e.arg, into);
      break;
    case 'num':
      break;
  }
  return into;
}

function factorial(n: number): number {
  if (!Number.isInteger(n) || n < 0 || n > 170) return Number.NaN;
  let r = 1;
  for (let k = 2; k <= n; k++) r *= k;
  return r;
}

/** Evaluates with the given variable values; unknown variables give NaN. */
export function evaluateExpression(e: Expr, env: ReadonlyMap<string, number> = new Map()): number {
  switch (e.kind) {
    case 'num':
      return e.value;
    case 'var':
      return env.get(e.name) ?? Number.NaN;
    case 'neg':
      return -evaluateExpression(e.arg, env);
    case 'fact':
      return factorial(evaluateExpression(e.arg, env));
    case 'root': {
      const n = evaluateExpression(e.degree, env);
      const x = evaluateExpression(e.arg, env);
      if (n === 2) return Math.sqrt(x);
      // Odd integer roots of negatives are real (\sqrt[3]{-8} = -2).
      if (x < 0 && Number.isInteger(n) && n % 2 === 1) return -((-x) ** (1 / n));
      return x ** (1 / n);
    }
    case 'fn': {
      const x = evaluateExpression(e.arg, env);
      switch (e.name) {
        case 'sin':
          return Math.sin(x);
        case 'cos':
          return Math.cos(x);
        case 'tan':
          return Math.tan(x);
        case 'cot':
          return 1 / Math.tan(x);
        case 'sec':
          return 1 / Math.cos(x);
        case 'csc':
          return 1 / Math.sin(x);
        case 'ln':
        case 'log':
          // \log without a base is read as the natural log, as in most of MATH's solutions.
          return Math.log(x);
        default:
          return Math.exp(x);
      }
    }
    case 'bin': {
      const a = evaluateExpression(e.left, env);
      const b = evaluateExpression(e.right, env);
      switch (e.op) {
        case '+':
          return a + b;
        case '-':
          return a - b;
        case '*':
          return a * b;
        case '/':
          // x/0 is undefined, not ±∞: 1/0 must not equal 2/0.
          return b === 0 ? Number.NaN : a / b;
        default:
          return a ** b;
      }
    }
  }
}
