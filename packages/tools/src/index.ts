export * from './calculator.js';
export * from './calculator-tool.js';
export * from './errors.js';
export * from './python-sandbox.js';
export * from './python-tool.js';
export * from './tool.js';
export * from './tool-registry.js';
export * from './workspace.js';
