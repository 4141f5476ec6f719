// Public API of @flowgrpo/trainer: the trainers (TRL's names) — GRPO over agent rollouts, SFT,
// and the trainers driven through the policy gateway — with their configs, checkpoints,
// evaluation, report, and the train_step graph added to @flowgrpo/models' artifacts. Models,
// tokenizers, generation and ONNX Runtime are @flowgrpo/models'; the OpenAI-compatible server is
// @flowgrpo/gateway's; the embedded demo is '@flowgrpo/trainer/demo'. Everything else in src/ is
// internal and may change.

// Trainers driven through the policy gateway: online GRPO over recorded rollouts, and one LoRA
// adapter per role.
export {
  MultiRoleGRPOTrainer,
  type MultiRoleGRPOTrainerOptions,
  type MultiRoleTrainResult,
} from './gateway/multi-role-trainer.js';
export {
  OnlineGRPOTrainer,
  type OnlineGRPOTrainerOptions,
  rolloutGroupKey,
} from './gateway/online-trainer.js';
export type { RoleSpec, ServedRole } from './gateway/role-policies.js';
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
// "GRPO − SFT: 27.2 points", called inconclusive when the 95% intervals overlap.
export {
  type AccuracyDifference,
  accuracyDifference,
  formatAccuracyDifference,
} from './train/accuracy-difference.js';
// Reward-integrity alarms: computed every step into metrics.jsonl as alarms/<name>.
export {
  ALARM_MEANINGS,
  ALARM_NAMES,
  type AlarmName,
  type AlarmResult,
  AlarmStopError,
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
  OutputDirNotEmptyError,
  OutputOverlapsInputError,
  type Overlap,
  outputDirProblems,
  outputOverlaps,
  type RunInput,
} from './train/output-dir-checks.js';
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
export { type ScoredBatch, scoreBatch } from './train/scored-batch.js';
export {
  type SFTExample,
  type SFTResult,
  SFTTrainer,
  type SFTTrainerOptions,
  sftRows,
} from './train/sft-trainer.js';
export { buildTrainingArtifacts } from './train/training-artifacts.js';
