// Shape-inference helpers shared by the op rules.
import type { InferCtx, ValueType } from '../ops/op.js';
import { dimMul } from './dim-algebra.js';
import type { Dim, Shape } from './types.js';

export const isStatic = (s: Shape | undefined): s is readonly number[] =>
  s?.every((d) => typeof d === 'number') === true;

/** Normalises a possibly negative axis against a rank. */
export function normAxis(ctx: InferCtx, axis: number, rank: number): number {
  const a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank) ctx.fail(`axis ${axis} is out of range for rank ${rank}`);
  return a;
}

/** Numpy multidirectional broadcasting over symbolic dims. */
export function broadcast(
  ctx: InferCtx,
  shapes: readonly (Shape | undefined)[],
): Shape | undefined {
  if (shapes.some((s) => s === undefined)) return undefined;
  const ss = shapes as readonly Shape[];
  const rank = Math.max(0, ...ss.map((s) => s.length));
  const out: Dim[] = [];
  for (let i = 0; i < rank; i++) {
    const dims = ss
      .map((s) => s[s.length - rank + i])
      .filter((d): d is Dim => d !== undefined && d !== 1);
    const nums = [...new Set(dims.filter((d) => typeof d === 'number'))];
    const syms = [...new Set(dims.filter((d) => typeof d === 'string'))];
    if (nums.length > 1) ctx.fail(`cannot broadcast dims ${nums.join(' and ')} (axis ${i - rank})`);
    if (nums.length === 1) out.push(nums[0]!);
    else if (syms.length === 0) out.push(1);
    else if (syms.length === 1) out.push(syms[0]!);
    else out.push(ctx.fresh());
  }
  return out;
}

/** The input at `i`, failing when it is absent. */
export function req(ctx: InferCtx, i: number): ValueType {
  const v = ctx.inputs[i];
  if (!v) ctx.fail(`input ${i} is required`);
  return v;
}

/** The input's rank, failing when unknown. */
export function rankOf(ctx: InferCtx, i: number): number {
  const s = req(ctx, i).shape;
  if (!s) ctx.fail(`input ${i} needs a known rank`);
  return s.length;
}

/** Statically known integer values of an input (e.g. axes, starts), numbers only. */
export function knownInts(ctx: InferCtx, i: number): number[] | undefined {
  const k = ctx.inputs[i]?.known;
  return k?.every((d) => typeof d === 'number') ? (k as number[]) : undefined;
}

/** The product of dims: a number when all are numbers, a symbolic monomial (dim-algebra.ts) otherwise. */
export const dimProduct = (dims: readonly Dim[]): Dim | undefined => dimMul(dims);
