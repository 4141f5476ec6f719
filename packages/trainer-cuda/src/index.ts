// Public API of @flowgrpo/trainer.

export * from './graph/index.js';
export * from './onnx/index.js';
export * from './ops/index.js';
export * from './optim/index.js';
export * from './runtime/index.js';
