// Public API of @flowgrpo/trainer: what a user calls to load a decoder LM, build its ONNX
// artifacts, generate, train it with GRPO or SFT, and serve it to agents. Everything else in src/
// is internal and may change; the independent references the tests check against are in
// '@flowgrpo/trainer/testing'.

// ONNX artifacts: the decoder's graphs (prefill, decode, logprobs, train_step, generate) on disk.
export {
  ALL_GRAPHS,
  ARTIFACTS_MANIFEST,
  type ArtifactGraphKind,
  type ArtifactsManifest,
  type BuildArtifactsOptions,
  buildDecoderArtifacts,
  DEFAULT_GRAPHS,
  DecoderArtifacts,
  type GraphManifest,
  type OpenArtifactsOptions,
  readArtifactsManifest,
} from './artifacts/decoder-artifacts.js';
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
// The policy gateway: OpenAI-compatible serving with token-exact recording, multi-role training.
export * from './gateway/index.js';
// Generation: batched sampling with logprobs, and the agent-facing policy engine.
export {
  DecoderGenerator,
  type WorkerGeneratorOptions,
} from './generation/decoder-generator.js';
export {
  ContextLengthExceededError,
  TokenOutOfVocabularyError,
} from './generation/errors.js';
export type { FusedGenerationOptions } from './generation/fused-generator.js';
export type { GenerationBackend } from './generation/generation-backend.js';
export type {
  DecoderGenerateOptions,
  GenerationOutput,
  GenerationRequest,
} from './generation/generation-request.js';
export {
  LocalPolicyEngine,
  type LocalPolicyEngineOptions,
  policyPromptIds,
} from './generation/local-policy-engine.js';
export type { SampledToken, SamplingParams } from './generation/sampling.js';
// LoRA adapters in PEFT's layout, and merging one into the base weights.
export {
  LORA_TARGET_MODULES,
  type LoraConfig,
  type LoraTargetModule,
  validateLoraConfig,
} from './lora/lora-config.js';
export {
  ADAPTER_CONFIG,
  ADAPTER_WEIGHTS,
  initLoraParams,
  type LoraParams,
  loadLoraAdapter,
  peftAdapterConfig,
  saveLoraAdapter,
} from './lora/lora-weights.js';
export { mergeLora } from './lora/merge-lora.js';
// Models: HF folders, llama2.c checkpoints, configs, and a tiny random model for tests and demos.
export {
  type DecoderConfig,
  type DecoderModelType,
  eosTokenIds,
  type HfDecoderConfig,
  loadDecoderConfig,
  parseDecoderConfig,
  SUPPORTED_MODEL_TYPES,
  toHfConfigJson,
} from './models/config.js';
export { UnsupportedArchitectureError, WeightsMismatchError } from './models/errors.js';
export {
  buildDecoderGraph,
  type DecoderGraph,
  type DecoderGraphKind,
  type DecoderGraphOptions,
  type GraphIOSpec,
} from './models/graph/decoder-graph.js';
export { loadDecoderModel } from './models/load-model.js';
export {
  createTinyQwen2,
  type TinyModel,
  type TinyQwen2Options,
  tinyQwen2Config,
} from './models/tiny-factory.js';
export {
  type LoadDType,
  type LoadHfModelOptions,
  llama2cConfig,
  loadHfModel,
  loadLlama2cCheckpoint,
  type ModelWeights,
  type SaveHfModelOptions,
  saveHfModel,
  type WeightDType,
  weightAsFloat32,
} from './models/weights/index.js';
// Runtime: ONNX Runtime sessions on CUDA, WebGPU or CPU, in-process or on a worker thread.
export {
  type CreateSessionOptions,
  chooseDevice,
  createSession,
  type Device,
  type DeviceAvailability,
  type DeviceChoice,
  type DeviceRequest,
  DeviceTensor,
  DeviceTensorAccessError,
  type DeviceTensorLocation,
  DeviceTensorStore,
  deviceAvailability,
  ExecutionProviderUnavailableError,
  type FeedProblem,
  type FeedValue,
  fromOrtTensor,
  InvalidFeedError,
  type LogSeverity,
  listBackends,
  listDevices,
  ModelLoadError,
  type ProbeResult,
  probeExecutionProvider,
  type RunResult,
  resolveDevice,
  Session,
  SessionRunError,
  SessionWorker,
  SessionWorkerError,
  softwareVulkanAdapter,
  toOrtTensor,
  type WorkerRunOptions,
  WorkerSession,
  type WorkerSessionOptions,
} from './runtime/index.js';
// Tokenizers.
export {
  BYTE_LEVEL_SPECIAL_TOKENS,
  ByteLevelTokenizer,
  type ByteLevelTokenizerOptions,
  CHATML_TEMPLATE,
  type ChatTemplateOptions,
  type DecodeOptions,
  type EncodeOptions,
  HfTokenizer,
  type HfTokenizerConfig,
  Llama2cTokenizer,
  loadTokenizer,
  type Tokenizer,
} from './tokenizers/index.js';
// "GRPO − SFT: 27.2 points", called inconclusive when the 95% intervals overlap.
export {
  type AccuracyDifference,
  accuracyDifference,
  formatAccuracyDifference,
} from './train/accuracy-difference.js';
export {
  ALARM_MEANINGS,
  ALARM_NAMES,
  type AlarmName,
  type AlarmResult,
  type AlarmsConfig,
  type AlarmsConfigInput,
  AlarmsConfigSchema,
  alarmMetrics,
  computeAlarms,
} from './train/alarms.js';
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
// The one GRPO update every trainer runs: scored trajectories → ScoredBatch → grpoUpdate.
export {
  AGGREGATION,
  type GrpoUpdateOptions,
  type GrpoUpdateResult,
  grpoUpdate,
  type LogprobMismatch,
} from './train/grpo-update.js';
export {
  type KlEstimatorName,
  LoraPolicy,
  type LoraPolicyOptions,
  type UpdateHyperParams,
  type UpdateInputs,
  type UpdateResult,
} from './train/lora-policy.js';
export { NonFiniteGuard } from './train/non-finite-guard.js';
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
export { greedy, withSampling } from './train/sampling-override.js';
export { type ScoredBatch, scoreBatch } from './train/scored-batch.js';
export {
  type SFTExample,
  type SFTResult,
  SFTTrainer,
  type SFTTrainerOptions,
  sftRows,
} from './train/sft-trainer.js';
// A training step you define yourself (any graph + autodiff + AdamW), run on a session.
export * from './train-loop/index.js';
