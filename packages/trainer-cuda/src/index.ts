// Public API of @flowgrpo/trainer.
export * from './onnx/index.js';
export * from './runtime/index.js';
export * from './graph/index.js';
export * from './ops/index.js';
export * from './optim/index.js';
