export * from './errors.js';
export * from './llm.js';
export * from './rng.js';
export * from './sample-row.js';
export * from './trajectory.js';
