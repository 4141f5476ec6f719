export * from './almanac.js';
export * from './pipeline.js';
export * from './roles.js';
export * from './task.js';
export * from './teacher.js';
