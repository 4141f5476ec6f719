export type { AttrType, InferCtx, OpDef, ValueType, VjpCtx } from './op.js';
export { isDifferentiableInput, OPS } from './registry.js';
