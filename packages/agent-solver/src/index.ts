// Public API of @flowgrpo/agent: LLM engines (OpenAI-compatible servers, local transformers.js),
// structured output, the Flow solver and its events, the tag agent, policy engines and server
// pools for rollouts, and the rollout recorders; the prompts of the Flow roles and of the tag
// agent (so SFT data can match what GRPO shows the model). Retry and backoff internals, the
// semaphore, the JSON Schema conversion and the solver's zod schemas stay internal; the test
// server lives behind the `@flowgrpo/agent/testing` subpath.

export { LLMResponseTooLargeError } from './engines/capped-fetch.js';
export {
  LLMAbortError,
  LLMMalformedReplyError,
  LLMRefusalError,
  LLMRequestError,
  LLMTimeoutError,
} from './engines/errors.js';
export { OpenAIEngine, type OpenAIEngineOptions } from './engines/openai-engine.js';
export type { RetryOptions } from './engines/retry.js';
export {
  TransformersEngine,
  type TransformersEngineOptions,
} from './engines/transformers-engine.js';
export { Memory, type MemoryAction } from './memory/memory.js';
export type { SerializableValue } from './memory/serialize.js';
export {
  OpenAIPolicyEngine,
  type OpenAIPolicyEngineOptions,
} from './policy/openai-policy-engine.js';
export {
  type AdapterRef,
  type PolicyEngine,
  type PolicyGenerateRequest,
  type PolicyGenerateResult,
  PolicyResponseError,
  type PolicyTokenizer,
  promptKind,
} from './policy/policy-engine.js';
export {
  type BalanceStrategy,
  type PooledServer,
  ServerPool,
  type ServerPoolOptions,
} from './policy/server-pool.js';
export {
  FlowRollout,
  type FlowRolloutOptions,
  type PolicySampling,
} from './rollout/flow-rollout.js';
export {
  type RolloutAgent,
  type RolloutContext,
  type RolloutGroupOptions,
  rolloutGroup,
} from './rollout/rollout-agent.js';
export { PlannerParseError, SolveFailedError } from './solver/errors.js';
export {
  type RoleError,
  SOLVER_ROLES,
  type SolverEvent,
  type SolverEventListener,
  type SolverRole,
} from './solver/events.js';
export {
  type FinalAnswerSource,
  type ParsedFinalAnswer,
  parseFinalAnswer,
} from './solver/final-answer.js';
export type {
  ResolvedEngines,
  RoleGenerateOptions,
  SolverEngines,
  SolveTimings,
  SolveUsage,
} from './solver/flow-run.js';
export {
  FlowSolver,
  type FlowSolverOptions,
  type SolveOptions,
  type SolveResult,
  type SolveStep,
} from './solver/flow-solver.js';
export {
  analyzerMessages,
  compactPlannerPrompt,
  executorMessages,
  generatorMessages,
  type PromptContext,
  plannerMessages,
  policyPlannerMessages,
  verifierMessages,
} from './solver/prompts.js';
export type {
  MemoryVerification,
  NextStep,
  QueryAnalysis,
  ToolCommand,
} from './solver/schemas.js';
export type { JsonSchema } from './structured/json-schema.js';
export {
  generateStructured,
  type ParseStructuredResult,
  parseStructured,
  type ResponseFormat,
  type StructuredOutputMode,
  type StructuredOutputOptions,
  type StructuredTextCall,
} from './structured/structured-output.js';
export { StructuredOutputError } from './structured/structured-output-error.js';
export {
  defaultTagPrompt,
  TagAgent,
  type TagAgentEvent,
  type TagAgentOptions,
} from './tag-agent/tag-agent.js';
export type { TagAction } from './tag-agent/tag-protocol.js';
