export { onnxDataTypeName, onnxDataTypeSize, shapeSize } from './data-type.js';
export { decodeModel } from './decode-model.js';
export { encodeModel, encodeModelChunks, PROTOBUF_LIMIT } from './encode-model.js';
export { OnnxDecodeError, OnnxEncodeError, OnnxModelTooLargeError } from './errors.js';
export { inlineExternalData, readExternalTensor } from './external-data.js';
export * from './model.js';
export { type OnnxTypedArray, onnxTensor } from './tensor.js';
export { WeightsFileWriter, type WeightsFileWriterOptions } from './weights-file.js';
export {
  DEFAULT_SIZE_THRESHOLD,
  type WriteModelOptions,
  type WriteModelResult,
  writeModel,
} from './write-model.js';
