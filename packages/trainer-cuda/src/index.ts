// Public API of @flowgrpo/trainer.
export * from './onnx/index.js';
