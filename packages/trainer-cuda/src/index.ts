// Public API of @flowgrpo/trainer: the trainers (TRL's names) — GRPO over agent rollouts, SFT,
// and the trainers driven through the policy gateway — with their configs, checkpoints,
// evaluation, report, and the train_step graph added to @flowgrpo/models' artifacts. Models,
// tokenizers, generation and ONNX Runtime are @flowgrpo/models'; the OpenAI-compatible server is
// @flowgrpo/gateway's; the embedded demo is '@flowgrpo/trainer/demo'. Everything else in src/ is
// internal and may change.

// "GRPO − SFT: 27.2 points", called inconclusive when the 95% intervals overlap.
export {
  type AccuracyDifference,
  accuracyDifference,
  formatAccuracyDifference,
} from './eval/accuracy-difference.js';
export type { RewardErrorRecord } from './eval/checked-reward.js';
// Evaluation: accuracy with a Wilson interval over held-out questions, side-by-side tables.
export {
  comparisonTable,
  type EvalResult,
  type EvalSummary,
  type EvaluateOptions,
  evaluate,
  wilsonInterval,
} from './eval/evaluate.js';
export {
  type RolloutFailureKind,
  type RolloutFailures,
  RolloutsFailedError,
} from './eval/rollout-failures.js';
export { buildTrainingArtifacts } from './graphs/training-artifacts.js';
// A training step you define yourself (any graph + autodiff + AdamW), run on a session.
export { TrainLoopError } from './optimizer-step/errors.js';
export {
  type TrainStepBuild,
  type TrainStepOptimizer,
  type TrainStepResult,
  TrainStepRunner,
  type TrainStepRunnerOptions,
  type TrainStepSessionOptions,
  type TrainStepState,
} from './optimizer-step/train-step-runner.js';
export { type ReportOptions, writeReport } from './report/report.js';
// Reward-integrity alarms: computed every step into metrics.jsonl as alarms/<name>.
export {
  type AlarmName,
  AlarmStopError,
  type AlarmsConfig,
  type AlarmsConfigInput,
} from './run/alarms.js';
export {
  CheckpointError,
  type LoadedCheckpoint,
  listCheckpoints,
  loadCheckpoint,
  type TrainerState,
} from './run/checkpoint.js';
// Trainers (TRL's names): GRPO over agent rollouts, SFT, their configs and the policy they update.
export {
  type BaseWeightsDtypeKey,
  checkArtifactsBaseWeights,
  checkArtifactsCheckpointing,
  checkArtifactsSamplingWeights,
  checkSftConfig,
  type GRPOConfig,
  type GRPOConfigInput,
  GRPOConfigSchema,
  LoraOptionsSchema,
  parseConfig,
  resolveBaseWeightsDtype,
  type SFTConfig,
  type SFTConfigInput,
  SFTConfigSchema,
} from './run/config.js';
export { type AvailableMemory, availableMemory } from './run/memory-available.js';
export {
  checkGrpoMemory,
  checkSamplingMemory,
  checkSftMemory,
  type GrpoMemoryConfig,
  type GrpoMemoryFacts,
  grpoMemoryShape,
  InsufficientMemoryError,
  type RunMemoryFacts,
  type SftMemoryConfig,
  sftMemoryShape,
} from './run/memory-check.js';
export {
  describeEstimate,
  estimateMemory,
  formatBytes,
  type MemoryEstimate,
  type MemoryShape,
  type MemoryTerm,
} from './run/memory-estimate.js';
export {
  OutputDirNotEmptyError,
  OutputOverlapsInputError,
  type Overlap,
  outputDirProblems,
  outputOverlaps,
  type RunInput,
} from './run/output-dir-checks.js';
export {
  type Progress,
  type ProgressBar,
  silentProgress,
  terminalProgress,
} from './run/progress.js';
export {
  type MetricsRecord,
  RunDirectory,
} from './run/run-dir.js';
export { claimOutputDir } from './run/run-lifecycle.js';
export { RunLock, RunLockedError, type RunLockInfo } from './run/run-lock.js';
// Trainers driven through the policy gateway: online GRPO over recorded rollouts, and one LoRA
// adapter per role.
export {
  MultiRoleGRPOTrainer,
  type MultiRoleGRPOTrainerOptions,
  type MultiRoleTrainResult,
} from './served/multi-role-trainer.js';
export {
  OnlineGRPOTrainer,
  type OnlineGRPOTrainerOptions,
} from './served/online-trainer.js';
export type { RoleSpec, ServedRole } from './served/role-policies.js';
export {
  GRPOTrainer,
  type GRPOTrainerOptions,
  NonFiniteLossError,
  type TrainResult,
} from './trainers/grpo-trainer.js';
export {
  type SFTExample,
  type SFTResult,
  SFTTrainer,
  type SFTTrainerOptions,
  sftRows,
} from './trainers/sft-trainer.js';
export { rowsFromTrajectories, type Targets, type TrainRow, targetsOf } from './update/collate.js';
// The one GRPO update every trainer runs: scored trajectories → ScoredBatch → grpoUpdate.
export {
  type GrpoUpdateOptions,
  type GrpoUpdateResult,
  grpoUpdate,
  type LogprobMismatch,
} from './update/grpo-update.js';
export {
  type KlEstimatorName,
  LoraPolicy,
  type LoraPolicyOptions,
  type UpdateHyperParams,
  type UpdateInputs,
  type UpdateResult,
} from './update/lora-policy.js';
export { type ScoredBatch, scoreBatch } from './update/scored-batch.js';
