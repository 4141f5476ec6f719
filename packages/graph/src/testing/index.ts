// Test helpers for code built on @flowgrpo/graph (`@flowgrpo/graph/testing`): seeded random
// tensors, hand-written ONNX models, and a bounded tensor comparison. Runtime-free, like the rest
// of the package; the ORT parity helpers live with the tests that need a runtime.
export { type Mismatch, tensorMismatch } from './compare.js';
export { testModel, testModelBytes } from './onnx-models.js';
export { randomTensor, testRandom } from './random.js';
