import { braceGroup } from './math-extract.js';

// Rewriting an answer string into a canonical LaTeX-ish form before it is parsed or compared.
// Each rule removes a way of writing the same value that graders should not care about.

const TEXT_COMMANDS = [
  'text',
  'textbf',
  'textit',
  'textrm',
  'texttt',
  'mathrm',
  'mathbf',
  'mathit',
  'mbox',
  'operatorname',
  'boldsymbol',
  'boxed',
  'fbox',
];

const TEXT_COMMAND_RE = new RegExp(`\\\\(?:${TEXT_COMMANDS.join('|')})\\s*\\{`, 'g');

/** Replaces `\cmd{X}` by `X` for the text-like commands (brace-balanced). */
function unwrapTextCommands(s: string): string {
  if (!s.includes('\\')) return s;
  const re = TEXT_COMMAND_RE;
  re.lastIndex = 0;
  for (let m = re.exec(s); m; m = re.exec(s)) {
    const open = m.index + m[0].length - 1;
    const group = braceGroup(s, open);
    if (!group) break;
    s = s.slice(0, m.index) + group.content + s.slice(group.end);
    re.lastIndex = m.index;
  }
  return s;
}

const SHORT_ARG = '(\\{[^{}]*\\}|[0-9a-zA-Z])';
const SHORT_FRAC_RE = new RegExp(`\\\\frac\\s*${SHORT_ARG}\\s*${SHORT_ARG}`, 'g');

/** `\frac12` → `\frac{1}{2}`, `\sqrt2` → `\sqrt{2}`: braces around single-token arguments. */
function braceShortArguments(s: string): string {
  if (!s.includes('\\')) return s;
  s = s.replace(/\\sqrt\s*([0-9a-zA-Z])/g, '\\sqrt{$1}');
  return s.replace(SHORT_FRAC_RE, (_m, a: string, b: string) => {
    const wrap = (x: string) => (x.startsWith('{') ? x : `{${x}}`);
    return `\\frac${wrap(a)}${wrap(b)}`;
  });
}

export interface NormalizedAnswer {
  /** The canonical string. */
  text: string;
  /** A percent sign was removed (50% may then mean 50 or 0.5). */
  percent: boolean;
}

// Attached unit abbreviations ("5cm", "12kg"); single letters are left alone (5m could be 5·m).
const UNIT_SUFFIX =
  /^([\d.,+-]*\d)\s*(?:cm|mm|km|kg|mg|lbs?|oz|ft|mph|kmh|ml|mL|sec|min|hrs?)(?:\^?\{?[23]\}?)?$/;

/**
 * Canonical form of one answer. Handles: math delimiters ($…$, \(…\), \[…\]), \left/\right,
 * LaTeX spacing, \dfrac/\tfrac, \text-like wrappers, degree marks, percent, currency ($ € £ ¥),
 * thousands separators (`1,450,000`, `1{,}000`), unicode √ π × · − ∞, short \frac/\sqrt arguments,
 * a single-letter left-hand side (`x = 5` → `5`), mixed numbers (`3 1/2`, `3\frac{1}{2}`),
 * `a \times 10^{b}` stays an expression, and trailing unit words (`18 dollars`, `5 cm`).
 */
export function normalizeMathAnswer(raw: string): NormalizedAnswer {
  let s = raw.trim();
  s = s.replace(/^\\\[|\\\]$/g, '').replace(/^\\\(|\\\)$/g, '');
  s = s.replace(/\\\$/g, '').replace(/\$/g, '');
  s = s.replace(/[€£¥]/g, '');
  s = s.replace(/\\(?:displaystyle|textstyle)/g, '');
  s = s.replace(/\\left\s*\./g, '').replace(/\\right\s*\./g, '');
  s = s.replace(/\\(?:left|right|bigl|bigr|Bigl|Bigr|big|Big)(?![a-zA-Z])/g, '');
  s = s
    .replace(/(?<!\\)\\[,;:! ]/g, ' ')
    .replace(/\\q?quad/g, ' ')
    .replace(/~/g, ' ');
  s = s.replace(/\\[dt]frac/g, '\\frac');
  s = unwrapTextCommands(s);
  s = s.replace(/\^\s*\{\s*\\circ\s*\}|\^\s*\\circ|\\circ|°|\\degree/g, '');
  let percent = false;
  s = s.replace(/\\?%/g, () => {
    percent = true;
    return '';
  });
  s = s
    .replace(/−|–/g, '-')
    .replace(/×/g, '\\times ')
    .replace(/[·⋅]/g, '\\cdot ')
    .replace(/π/g, '\\pi ')
    .replace(/∞/g, '\\infty ')
    .replace(/√\s*(\d+(?:\.\d+)?|[a-zA-Z])/g, '\\sqrt{$1}')
    .replace(/√/g, '\\sqrt');
  s = s.replace(/\{,\}/g, ',');
  s = braceShortArguments(s);
  s = s.trim().replace(/\.$/, '').trim();

  // `x = 5`, `k=-2`: a lone variable on the left names the answer, it is not part of it.
  const lhs = /^[a-zA-Z](?:_\{?\w+\}?)?\s*=\s*([^=]+)$/.exec(s);
  if (lhs) s = lhs[1]!.trim();

  // Thousands separators only when the whole answer is one number (else commas list items).
  const thousands = /^([+-]?\d{1,3}(?:,\d{3})+(?:\.\d+)?)(?![\d,])(.*)$/.exec(s);
  if (thousands && !/^\s*,/.test(thousands[2]!))
    s = thousands[1]!.replace(/,/g, '') + thousands[2]!;

  // Trailing unit words after a number: "18 dollars", "5 square units", "3 cm^2".
  const words = /^([^a-zA-Z\\]*\d[^a-zA-Z\\]*?)\s+[a-zA-Z]{2,}[a-zA-Z ]*(?:\^?\{?[23]\}?)?$/.exec(
    s,
  );
  if (words) s = words[1]!.trim();
  const unit = UNIT_SUFFIX.exec(s);
  if (unit) s = unit[1]!;

  // Mixed numbers: "3 1/2" and "3\frac{1}{2}" (proper fraction after an integer) mean 3 + 1/2.
  const mixed =
    /^(-?)(\d+)\s+(\d+)\s*\/\s*(\d+)$/.exec(s) ?? /^(-?)(\d+)\s*\\frac\{(\d+)\}\{(\d+)\}$/.exec(s);
  if (mixed && Number(mixed[3]) < Number(mixed[4]) && Number(mixed[4]) > 0) {
    const [, sign, whole, num, den] = mixed;
    s = `${sign}(${whole}+\\frac{${num}}{${den}})`;
  }
  return { text: s.replace(/\s+/g, ' ').trim(), percent };
}

/** The canonical string with all whitespace removed, for literal comparison. */
export function compactMath(s: string): string {
  return s.replace(/\s+/g, '');
}
