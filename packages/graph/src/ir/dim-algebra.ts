import type { Dim } from './types.js';

// Symbolic dims as monomials: a number times a product of named dims, written canonically as
// "c*a*b" (factors sorted, c omitted when 1). Reshape(x, [-1, H]) of a [batch, seq, H] tensor is
// then [batch*seq, H], and Concat of two [seq] tensors is [2*seq] — the same names wherever the
// same size arises. Why it matters: where static shapes cannot prove two dims equal, a gradient
// that un-broadcasts must test at run time (a full-tensor Where + Slice per attention layer);
// equal names skip that.

interface Monomial {
  coef: number;
  /** Sorted factor names, repeated for powers. */
  syms: string[];
}

const NAME = /^[A-Za-z_][A-Za-z0-9_.]*$/;

/** A dim as a monomial; undefined for a symbolic name that is not a product of plain names. */
function parse(d: Dim): Monomial | undefined {
  if (typeof d === 'number')
    return Number.isInteger(d) && d >= 0 ? { coef: d, syms: [] } : undefined;
  const parts = d.split('*');
  let coef = 1;
  const syms: string[] = [];
  for (const p of parts) {
    if (/^\d+$/.test(p)) coef *= Number(p);
    else if (NAME.test(p)) syms.push(p);
    else return undefined;
  }
  return { coef, syms: syms.sort() };
}

function format(m: Monomial): Dim {
  if (m.syms.length === 0) return m.coef;
  return [...(m.coef === 1 ? [] : [String(m.coef)]), ...m.syms].join('*');
}

/** The product of dims; undefined when a dim is not a monomial. */
export function dimMul(dims: readonly Dim[]): Dim | undefined {
  let coef = 1;
  const syms: string[] = [];
  for (const d of dims) {
    const m = parse(d);
    if (!m) return undefined;
    coef *= m.coef;
    syms.push(...m.syms);
  }
  return format({ coef, syms: syms.sort() });
}

/** a / b when it is a monomial (b's factors all in a, coefficients divisible); else undefined. */
export function dimDiv(a: Dim, b: Dim): Dim | undefined {
  const x = parse(a);
  const y = parse(b);
  if (!x || !y || y.coef === 0 || x.coef % y.coef !== 0) return undefined;
  const syms = [...x.syms];
  for (const s of y.syms) {
    const i = syms.indexOf(s);
    if (i < 0) return undefined;
    syms.splice(i, 1);
  }
  return format({ coef: x.coef / y.coef, syms });
}

/** The sum of dims when they share the same factors (seq + seq = 2*seq); else undefined. */
export function dimSum(dims: readonly Dim[]): Dim | undefined {
  const ms = dims.map(parse);
  if (ms.some((m) => !m)) return undefined;
  const key = (m: Monomial) => m.syms.join('*');
  const k = key(ms[0]!);
  if (!ms.every((m) => key(m!) === k)) return undefined;
  return format({ coef: ms.reduce((s, m) => s + m!.coef, 0), syms: ms[0]!.syms });
}
