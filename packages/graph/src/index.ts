// Public API of @flowgrpo/graph: build a graph, differentiate it, check it, export it to ONNX.
// The op registry, shape rules and protobuf internals stay internal; test helpers live behind
// the `@flowgrpo/graph/testing` subpath.

// The IR: build, differentiate, evaluate, check.
export { type GradOptions, grad } from './ir/autodiff.js';
export { GraphBuilder, type Ints, type Operand } from './ir/builder.js';
export type { CustomVjp, CustomVjpContext } from './ir/custom-vjp.js';
export { GraphError } from './ir/errors.js';
export { evaluate } from './ir/evaluate.js';
export { type ExportOptions, toOnnxModel } from './ir/export-onnx.js';
export { checkGradients, type GradCheckResult } from './ir/gradcheck.js';
export { Graph, type Node, type Value, type ValueKind } from './ir/graph.js';
export { type TensorInput, tensor, toTypedArray } from './ir/tensor.js';
export type {
  Attrs,
  AttrValue,
  Dim,
  ElemType,
  ExternalRef,
  HostTensor,
  Shape,
} from './ir/types.js';

// ONNX protobuf: a plain model description, its encoder/decoder, external weights.
export { decodeModel } from './onnx/decode-model.js';
export { encodeModel, PROTOBUF_LIMIT } from './onnx/encode-model.js';
export { OnnxDecodeError, OnnxEncodeError, OnnxModelTooLargeError } from './onnx/errors.js';
export { inlineExternalData, readExternalTensor } from './onnx/external-data.js';
export {
  DEFAULT_IR_VERSION,
  DEFAULT_OPSET,
  type OnnxAttributeValue,
  OnnxDataType,
  type OnnxDim,
  type OnnxExternalData,
  type OnnxGraph,
  type OnnxModel,
  type OnnxNode,
  type OnnxOpsetImport,
  type OnnxTensor,
  type OnnxValueInfo,
} from './onnx/model.js';
export { type OnnxTypedArray, onnxTensor } from './onnx/tensor.js';
export { WeightsFileWriter, type WeightsFileWriterOptions } from './onnx/weights-file.js';
export { type WriteModelOptions, type WriteModelResult, writeModel } from './onnx/write-model.js';

// Optimizer graphs.
export {
  type AdamWGraphOptions,
  type AdamWHyperParams,
  type AdamWParamSpec,
  type AdamWResult,
  appendAdamW,
  buildAdamWGraph,
} from './optim/adamw.js';
