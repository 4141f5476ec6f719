// Hand-written ONNX model descriptions (no IR): for tests of writers, readers and runtimes.
import {
  DEFAULT_IR_VERSION,
  DEFAULT_OPSET,
  encodeModel,
  type OnnxGraph,
  type OnnxModel,
} from '../index.js';

/** A model around `graph` at flowgrpo's default opset and IR version. */
export function testModel(graph: OnnxGraph, extra: Partial<OnnxModel> = {}): OnnxModel {
  return {
    irVersion: DEFAULT_IR_VERSION,
    opsetImports: [{ domain: '', version: DEFAULT_OPSET }],
    producerName: 'flowgrpo-test',
    producerVersion: '0',
    graph,
    ...extra,
  };
}

/** The encoded bytes of `testModel(graph)`. */
export function testModelBytes(graph: OnnxGraph): Uint8Array {
  return encodeModel(testModel(graph));
}
