export * from './engines/errors.js';
export * from './engines/openai-engine.js';
export * from './engines/retry.js';
export * from './engines/semaphore.js';
export * from './structured/json-schema.js';
export * from './structured/parse-json.js';
export * from './structured/structured-output.js';
export * from './structured/structured-output-error.js';
