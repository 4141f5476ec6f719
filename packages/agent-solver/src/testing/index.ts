// Test helpers for code built on @flowgrpo/agent (`@flowgrpo/agent/testing`): a real
// OpenAI-compatible HTTP server on 127.0.0.1 whose replies a test scripts, and a responder that
// answers the Flow solver's structured requests from the JSON schema they carry. Runtime-free
// of any test framework (no vitest import), so an app's own tests can use them with any runner.
export { type Gate, gate } from './gate.js';
export {
  type Behaviour,
  countWords,
  embedText,
  exampleFromJsonSchema,
  type JsonObject,
  OpenAITestServer,
  type OpenAITestServerOptions,
  promptText,
  type RecordedRequest,
  type ReplyUsage,
  type RequestBody,
  reply,
  type TestServerRoute,
  type TextReply,
  type TokenInfo,
} from './openai-server.js';
export { type ResponderScript, type SchemaResponder, schemaResponder } from './solver-responder.js';
export {
  checkVllmRequest,
  type FieldSpec,
  type RequestCheck,
  SGLANG_LOAD_LORA,
  SGLANG_UNLOAD_LORA,
  VLLM_CHAT_REQUEST,
  VLLM_COMPLETION_REQUEST,
  VLLM_LOAD_LORA,
  VLLM_RESPONSES,
  VLLM_UNLOAD_LORA,
  vllmResponseProblems,
  type WireType,
} from './vllm-protocol.js';
