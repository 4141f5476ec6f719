// The op registry: every op the builder can emit, keyed by its ONNX op type (ai.onnx domain).
import { elementwiseOps } from './elementwise.js';
import { indexOps } from './index-ops.js';
import { linearOps } from './linear.js';
import type { OpDef } from './op.js';
import { reduceOps } from './reduce.js';
import { shapeOps } from './shape-ops.js';
import { sliceConcatOps } from './slice-concat.js';

export const OPS: Readonly<Record<string, OpDef>> = Object.fromEntries(
  [...elementwiseOps, ...linearOps, ...reduceOps, ...shapeOps, ...sliceConcatOps, ...indexOps].map(
    (d) => [d.op, d],
  ),
);

/** Whether input `i` of `op` can carry a gradient (float dtype still required). */
export function isDifferentiableInput(op: string, i: number): boolean {
  const d = OPS[op]?.diff;
  return d === 'all' || (d?.includes(i) ?? false);
}
