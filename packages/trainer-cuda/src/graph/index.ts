export { type GradOptions, grad } from './autodiff.js';
export { GraphBuilder, type Ints, type Operand } from './builder.js';
export { GraphError } from './errors.js';
export { evaluate } from './evaluate.js';
export { type ExportOptions, ONNX_DTYPE, toOnnxModel } from './export-onnx.js';
export { checkGradients, type GradCheckResult } from './gradcheck.js';
export { Graph, type Node, type Value, type ValueKind } from './graph.js';
export {
  fromFloat16Bits,
  numel,
  type TensorInput,
  tensor,
  tensorBytes,
  toFloat16Bits,
  toTypedArray,
} from './tensor.js';
export {
  type Attrs,
  type AttrValue,
  type Dim,
  type DType,
  type ExternalRef,
  isFloat,
  type Shape,
  type Tensor,
} from './types.js';
