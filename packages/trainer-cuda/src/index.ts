// Public API of @flowgrpo/trainer.

export * from './artifacts/decoder-artifacts.js';
export * from './generation/decoder-generator.js';
export * from './generation/local-policy-engine.js';
export * from './generation/sampling.js';
export * from './lora/lora-config.js';
export * from './lora/lora-weights.js';
export * from './lora/merge-lora.js';
export * from './models/config.js';
export * from './models/errors.js';
export * from './models/graph/base-weights.js';
export * from './models/graph/decoder-graph.js';
export * from './models/load-model.js';
export * from './models/reference/index.js';
export * from './models/tiny-factory.js';
export * from './models/weights/index.js';
export * from './runtime/index.js';
export * from './tokenizers/index.js';
export * from './train/collate.js';
export * from './train/lora-policy.js';
export * from './train/train-step-graph.js';
export * from './train-loop/index.js';
