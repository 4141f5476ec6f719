// The policy gateway: an OpenAI-compatible server over a local or upstream policy that records
// every call token-exactly, so agents written with any OpenAI-compatible SDK become trainable.
export * from './chat-render.js';
export * from './errors.js';
export * from './gateway.js';
export * from './gateway-agent.js';
export * from './policy-host.js';
export * from './recorder.js';
export * from './tool-calls.js';
export * from './wire.js';
