// Public API of @flowgrpo/gateway: an OpenAI-compatible server over a local or upstream policy
// that records every call token-exactly, so agents written with any OpenAI-compatible SDK become
// trainable — the vLLM-serve layer. The trainers that drive it are in @flowgrpo/trainer.
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
  runAgentProgram,
} from './gateway-agent.js';
export {
  EnginePolicyHost,
  type EnginePolicyHostOptions,
  LocalPolicyHost,
  type LocalPolicyHostOptions,
  type PolicyHost,
  type ServedModel,
  UpstreamPolicyHost,
  type UpstreamPolicyHostOptions,
} from './policy-host.js';
export {
  type CallChain,
  type CallTimings,
  chainCalls,
  chainSegments,
  type RecordedCall,
  type RecordedRollout,
  RolloutRecorder,
  type RolloutRecorderOptions,
  rolloutTrajectory,
  type TrajectoryOptions,
} from './recorder.js';
export { type ResponsesRequest, ResponsesRequestSchema, responsesToChat } from './responses.js';
export {
  type ParsedToolCall,
  parseAssistantText,
  TOOL_CALL_CLOSE,
  TOOL_CALL_OPEN,
} from './tool-calls.js';
export type { ChatCompletionRequest, CompletionRequest, WireMessage, WireTool } from './wire.js';
