// Public API of @flowgrpo/trainer: what a user calls to load a decoder LM, build its ONNX
// artifacts, generate, train it with GRPO or SFT, and serve it to agents. Everything else in src/
// is internal and may change; the independent references the tests check against are in
// '@flowgrpo/trainer/testing'.

// The policy gateway: OpenAI-compatible serving with token-exact recording, multi-role training.
export {
  type AgentProgram,
  type AgentProgramContext,
  type CallChain,
  type CallTimings,
  type ChatCompletionRequest,
  type CompletionRequest,
  chainCalls,
  chainSegments,
  createPolicyGateway,
  EnginePolicyHost,
  type EnginePolicyHostOptions,
  type GatewayAgentOptions,
  GatewayError,
  type GatewayErrorType,
  gatewayAgent,
  gatewayReward,
  hermesToolCallText,
  hermesToolSystemBlock,
  LocalPolicyHost,
  type LocalPolicyHostOptions,
  type OpenAIErrorBody,
  type ParsedToolCall,
  type PolicyGateway,
  type PolicyGatewayOptions,
  type PolicyHost,
  parseAssistantText,
  type RecordedCall,
  type RecordedRollout,
  type ResponsesRequest,
  ResponsesRequestSchema,
  ROLLOUT_HEADER,
  type RolloutBinding,
  RolloutRecorder,
  type RolloutRecorderOptions,
  renderChat,
  responsesToChat,
  rolloutTrajectory,
  runAgentProgram,
  type ServedModel,
  TOOL_CALL_CLOSE,
  TOOL_CALL_OPEN,
  type TrajectoryOptions,
  UpstreamPolicyHost,
  type UpstreamPolicyHostOptions,
  type WireMessage,
  type WireTool,
} from '@flowgrpo/gateway';
export type { SampledToken, SamplingParams } from '@flowgrpo/models';
// ONNX artifacts: the decoder's graphs (prefill, decode, logprobs, train_step, generate) on disk.
// Generation: batched sampling with logprobs, and the agent-facing policy engine.
// LoRA adapters in PEFT's layout, and merging one into the base weights.
// Models: HF folders, llama2.c checkpoints, configs, and a tiny random model for tests and demos.
// Runtime: ONNX Runtime sessions on CUDA, WebGPU or CPU, in-process or on a worker thread.
// Tokenizers.
export {
  ADAPTER_CONFIG,
  ADAPTER_WEIGHTS,
  ALL_GRAPHS,
  ARTIFACTS_MANIFEST,
  type ArtifactGraphKind,
  type ArtifactsManifest,
  type BuildArtifactsOptions,
  BYTE_LEVEL_SPECIAL_TOKENS,
  ByteLevelTokenizer,
  type ByteLevelTokenizerOptions,
  buildDecoderGraph,
  CHATML_TEMPLATE,
  type ChatTemplateOptions,
  ContextLengthExceededError,
  type CreateSessionOptions,
  chooseDevice,
  createSession,
  createTinyQwen2,
  DEFAULT_GRAPHS,
  type DecodeOptions,
  DecoderArtifacts,
  type DecoderConfig,
  type DecoderGenerateOptions,
  DecoderGenerator,
  type DecoderGraph,
  type DecoderGraphKind,
  type DecoderGraphOptions,
  type DecoderModelType,
  type Device,
  type DeviceAvailability,
  type DeviceChoice,
  type DeviceRequest,
  DeviceTensor,
  DeviceTensorAccessError,
  type DeviceTensorLocation,
  DeviceTensorStore,
  deviceAvailability,
  type EncodeOptions,
  ExecutionProviderUnavailableError,
  eosTokenIds,
  type FeedProblem,
  type FeedValue,
  type FusedGenerationOptions,
  fromOrtTensor,
  type GenerationBackend,
  type GenerationOutput,
  type GenerationRequest,
  type GraphIOSpec,
  type GraphManifest,
  greedy,
  type HfDecoderConfig,
  HfTokenizer,
  type HfTokenizerConfig,
  InvalidFeedError,
  initLoraParams,
  Llama2cTokenizer,
  LORA_TARGET_MODULES,
  type LoadDType,
  type LoadHfModelOptions,
  LocalPolicyEngine,
  type LocalPolicyEngineOptions,
  type LogSeverity,
  type LoraConfig,
  type LoraParams,
  type LoraTargetModule,
  listBackends,
  listDevices,
  llama2cConfig,
  loadDecoderConfig,
  loadDecoderModel,
  loadHfModel,
  loadLlama2cCheckpoint,
  loadLoraAdapter,
  loadTokenizer,
  ModelLoadError,
  type ModelWeights,
  mergeLora,
  type OpenArtifactsOptions,
  type ProbeResult,
  parseDecoderConfig,
  peftAdapterConfig,
  policyPromptIds,
  probeExecutionProvider,
  type RunResult,
  readArtifactsManifest,
  resolveDevice,
  type SaveHfModelOptions,
  Session,
  SessionRunError,
  SessionWorker,
  SessionWorkerError,
  SUPPORTED_MODEL_TYPES,
  saveHfModel,
  saveLoraAdapter,
  softwareVulkanAdapter,
  type TinyModel,
  type TinyQwen2Options,
  type Tokenizer,
  TokenOutOfVocabularyError,
  tinyQwen2Config,
  toHfConfigJson,
  toOrtTensor,
  UnsupportedArchitectureError,
  validateLoraConfig,
  type WeightDType,
  WeightsMismatchError,
  type WorkerGeneratorOptions,
  type WorkerRunOptions,
  WorkerSession,
  type WorkerSessionOptions,
  weightAsFloat32,
  withSampling,
} from '@flowgrpo/models';
// The embedded demo (`flowgrpo demo`): the almanac task, its agent, reward and pipeline.
export {
  type Almanac,
  type AlmanacHalf,
  type AlmanacOptions,
  createAlmanac,
  type Landmark,
  lookupAlmanac,
} from './demo/almanac.js';
export {
  type DemoBudget,
  type DemoOptions,
  type DemoResult,
  demoSettings,
  runDemo,
} from './demo/pipeline.js';
export {
  almanacTool,
  type DemoAgentOptions,
  demoAgent,
  demoPlannerPrompt,
  demoReward,
  demoTools,
} from './demo/roles.js';
export {
  type DemoQuestion,
  type KindWeights,
  makeQuestions,
  QUESTION_KINDS,
  questionRows,
  SUB_GOALS,
} from './demo/task.js';
export { type TeacherOptions, TeacherPolicy } from './demo/teacher.js';
export * from './gateway/index.js';
// "GRPO − SFT: 27.2 points", called inconclusive when the 95% intervals overlap.
export {
  type AccuracyDifference,
  accuracyDifference,
  formatAccuracyDifference,
} from './train/accuracy-difference.js';
export {
  type CheckedReward,
  InvalidRewardError,
  type RewardErrorRecord,
  scoreChecked,
} from './train/checked-reward.js';
export {
  CheckpointError,
  type LoadedCheckpoint,
  listCheckpoints,
  loadCheckpoint,
  saveCheckpoint,
  type TrainerState,
} from './train/checkpoint.js';
export { rowsFromTrajectories, type Targets, type TrainRow, targetsOf } from './train/collate.js';
// Trainers (TRL's names): GRPO over agent rollouts, SFT, their configs and the policy they update.
export {
  type GRPOConfig,
  type GRPOConfigInput,
  GRPOConfigSchema,
  LoraOptionsSchema,
  parseConfig,
  type SFTConfig,
  type SFTConfigInput,
  SFTConfigSchema,
} from './train/config.js';
// Evaluation: accuracy with a Wilson interval over held-out questions, side-by-side tables.
export {
  comparisonTable,
  type EvalResult,
  type EvalSummary,
  type EvaluateOptions,
  evaluate,
  wilsonInterval,
} from './train/evaluate.js';
export {
  GRPOTrainer,
  type GRPOTrainerOptions,
  NonFiniteLossError,
  type TrainResult,
} from './train/grpo-trainer.js';
export {
  type KlEstimatorName,
  LoraPolicy,
  type LoraPolicyOptions,
  type UpdateHyperParams,
  type UpdateInputs,
  type UpdateResult,
} from './train/lora-policy.js';
export {
  type Progress,
  type ProgressBar,
  silentProgress,
  terminalProgress,
} from './train/progress.js';
export { type ReportOptions, renderReport, writeReport } from './train/report.js';
export {
  countRolloutFailures,
  describeRolloutFailures,
  type RolloutFailureKind,
  type RolloutFailures,
  RolloutsFailedError,
  rolloutFailureMetrics,
} from './train/rollout-failures.js';
export {
  CONFIG_FILE,
  METRICS_FILE,
  type MetricsRecord,
  RunDirectory,
} from './train/run-dir.js';
export {
  claimOutputDir,
  RunLifecycle,
  type RunLifecycleOptions,
} from './train/run-lifecycle.js';
export { LOCK_FILE, RunLock, RunLockedError, type RunLockInfo } from './train/run-lock.js';
export { RunWriteError } from './train/run-write-error.js';
export {
  type SFTExample,
  type SFTResult,
  SFTTrainer,
  type SFTTrainerOptions,
  sftRows,
} from './train/sft-trainer.js';
export { buildTrainingArtifacts } from './train/training-artifacts.js';
// A training step you define yourself (any graph + autodiff + AdamW), run on a session.
export * from './train-loop/index.js';
