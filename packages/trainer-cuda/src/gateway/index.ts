// The policy gateway: an OpenAI-compatible server over a local or upstream policy that records
// every call token-exactly, so agents written with any OpenAI-compatible SDK become trainable.
export { hermesToolCallText, hermesToolSystemBlock, renderChat } from './chat-render.js';
export { GatewayError, type GatewayErrorType, type OpenAIErrorBody } from './errors.js';
export {
  createPolicyGateway,
  type PolicyGateway,
  type PolicyGatewayOptions,
  ROLLOUT_HEADER,
  type RolloutBinding,
} from './gateway.js';
export {
  type AgentProgram,
  type AgentProgramContext,
  type GatewayAgentOptions,
  gatewayAgent,
  gatewayReward,
} from './gateway-agent.js';
export * from './multi-role-trainer.js';
export * from './online-trainer.js';
export * from './policy-host.js';
export * from './recorder.js';
export { type ResponsesRequest, ResponsesRequestSchema, responsesToChat } from './responses.js';
export * from './role-policies.js';
export {
  type ParsedToolCall,
  parseAssistantText,
  TOOL_CALL_CLOSE,
  TOOL_CALL_OPEN,
} from './tool-calls.js';
export type { ChatCompletionRequest, CompletionRequest, WireMessage, WireTool } from './wire.js';
