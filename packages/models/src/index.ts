// Public API of @flowgrpo/models: load a decoder LM (HF folder or llama2.c checkpoint), its
// tokenizer and LoRA adapters, build its ONNX inference artifacts, run them with ONNX Runtime on
// CUDA, WebGPU or CPU, and generate — the transformers + ONNX Runtime layer that the gateway
// serves and the trainer trains. Everything else in src/ is internal; the independent references
// the tests check against are in '@flowgrpo/models/testing'.

// ONNX artifacts: the decoder's graphs (prefill, decode, logprobs, generate; further kinds such as
// train_step come in as builders) on disk.
export {
  ALL_GRAPHS,
  ARTIFACTS_MANIFEST,
  type ArtifactGraphBuilder,
  type ArtifactGraphBuilders,
  type ArtifactGraphKind,
  type ArtifactGraphOptions,
  type ArtifactsManifest,
  type BuildArtifactsOptions,
  buildArtifactGraph,
  buildDecoderArtifacts,
  DEFAULT_GRAPHS,
  DecoderArtifacts,
  type GraphManifest,
  type OpenArtifactsOptions,
  readArtifactsManifest,
  samplingGraph,
} from './artifacts/decoder-artifacts.js';
export { ArtifactsDirNotEmptyError } from './artifacts/errors.js';
// Generation: batched sampling with logprobs, and the agent-facing policy engine.
export {
  DecoderGenerator,
  type WorkerGeneratorOptions,
} from './generation/decoder-generator.js';
export {
  ContextLengthExceededError,
  TokenOutOfVocabularyError,
} from './generation/errors.js';
export {
  type FusedGenerationOptions,
  ONE_THREAD_MAX_WEIGHT_BYTES,
} from './generation/fused-generator.js';
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
  type StreamingPolicyRequest,
} from './generation/local-policy-engine.js';
export type { SampledToken, SamplingParams } from './generation/sampling.js';
// Sampling overrides: greedy evaluation, and the sampling a training run imposes on its policy.
export {
  greedy,
  imposeSampling,
  type SamplingWarner,
  samplingWarner,
  type TrainingSampling,
  trainingSampling,
  withSampling,
} from './generation/sampling-override.js';
export type { TokenListener } from './generation/token-stream.js';
// LoRA adapters in PEFT's layout, and merging one into the base weights.
export {
  LORA_TARGET_MODULES,
  type LoraConfig,
  type LoraTargetModule,
  loraFitsBuilt,
  loraParamSpecs,
  loraScaling,
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
// The decoder graph's building blocks and tensor names: what a train_step graph (or any graph of
// your own over the same weights) is built from.
export {
  type BaseWeights,
  type ProjectionDtype,
  ROPE_COS,
  ROPE_SIN,
  ropeTables,
  writeBaseWeights,
} from './models/graph/base-weights.js';
export {
  ATTENTION_MASK,
  addDecoderInputs,
  addLoraInputs,
  addTargetInputs,
  buildDecoderGraph,
  type DecoderForwardOptions,
  type DecoderGraph,
  type DecoderGraphKind,
  type DecoderGraphOptions,
  decoderForward,
  decoderGraphOf,
  type GraphIOSpec,
  INPUT_IDS,
  LORA_SCALE,
  POSITION_IDS,
  pastKeyName,
  pastValueName,
  presentKeyName,
  presentValueName,
  SEGMENT_IDS,
  TARGET_IDS,
  TARGET_POSITIONS,
  type TargetLogprobsOptions,
  TEMPERATURE,
  targetLogprobs,
  useWeightInputs,
} from './models/graph/decoder-graph.js';
export { DEFAULT_VOCAB_CHUNK_SIZE, vocabChunks } from './models/graph/vocab-chunks.js';
export { loadDecoderModel } from './models/load-model.js';
export {
  createTinyQwen2,
  initTinyWeights,
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
export { EMBED_TOKENS, expectedTensorShapes, LM_HEAD } from './models/weights/tensor-names.js';
export { ortBinaryDir } from './runtime/devices.js';
// Runtime: ONNX Runtime sessions on CUDA, WebGPU or CPU, in-process or on a worker thread.
export {
  type CpuKernelInfo,
  type CreateSessionOptions,
  chooseDevice,
  cpuKernelInfo,
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
  hasVulkanLoader,
  InvalidFeedError,
  type KernelIsa,
  kernelIsa,
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
  startModuleWorker,
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
