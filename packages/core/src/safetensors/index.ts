export * from './errors.js';
export * from './header.js';
export * from './read.js';
export * from './sharded.js';
export * from './write.js';
