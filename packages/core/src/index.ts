// Public API of @flowgrpo/core: the data types and their zod schemas (trajectories, sample rows,
// the LLM engine contract), typed errors, the seeded RNG, tensors and dtype conversions,
// safetensors, the data-set readers, writers and normalisers, and the Hugging Face Hub client
// (hub names → HF's cache layout). Schema plumbing between
// Parquet, Arrow and JS rows, safetensors header parsing and per-row normaliser helpers stay
// internal.

// Filesystem and signal helpers the packages share: a folder written all at once, and
// abort-listener accounting for many rollouts on one signal.
export { expectAbortListeners } from './abort-listeners.js';
export { writeDirAtomically, writeDirAtomicallySync } from './atomic-dir.js';
export { closestName, didYouMean } from './closest-name.js';
export { parseCommandLine } from './command-line.js';
export { type ArrowIpcFormat, readArrowIpc, writeArrowIpc } from './datasets/arrow-ipc.js';
export {
  arrowTableToRows,
  type Int64Mode,
  type RowsToTableOptions,
  rowsToArrowTable,
  type TableToRowsOptions,
} from './datasets/arrow-table.js';
export {
  type Batch,
  type BatchOptions,
  type BatchPosition,
  batches,
  epochOrder,
  nextBatchPosition,
  stepsPerEpoch,
} from './datasets/batches.js';
export { type ColumnField, type ColumnType, inferFields } from './datasets/column-types.js';
export {
  type CombineDatasetsOptions,
  combineDatasets,
  countBySource,
  DEFAULT_DATA_SEED,
  reindexRows,
  shuffleRows,
} from './datasets/combine.js';
export {
  type HotpotQaOriginalRow,
  hotpotQaOriginalRow,
  readHotpotQaHubRows,
} from './datasets/hotpotqa-hub.js';
export {
  type JsonlRecord,
  readJsonl,
  readJsonlAll,
  readJsonlRecords,
  toJsonl,
  writeJsonl,
} from './datasets/jsonl.js';
export {
  DATASET_FORMATS,
  type DatasetFormat,
  type LoadDatasetOptions,
  loadDataset,
} from './datasets/load-dataset.js';
export { normalizeAime, normalizeAimeRow } from './datasets/normalizers/aime.js';
export { normalizeDeepMath, normalizeDeepMathRow } from './datasets/normalizers/deepmath.js';
export { GOLDEN_ANSWER_SEPARATOR } from './datasets/normalizers/golden-answers.js';
export { normalizeGsm8k, normalizeGsm8kRow } from './datasets/normalizers/gsm8k.js';
export {
  normalizeHotpotQa,
  normalizeHotpotQaRow,
  type SupportingFact,
} from './datasets/normalizers/hotpotqa.js';
export { normalizeMath500, normalizeMath500Row } from './datasets/normalizers/math500.js';
export {
  normalizeNq,
  normalizeNqRow,
  normalizeSearchR1,
  normalizeSearchR1Row,
} from './datasets/normalizers/nq.js';
export {
  normalizePlain,
  normalizePlainRow,
  type PlainRowShape,
  plainRowShape,
} from './datasets/normalizers/plain.js';
export type { NormalizeOptions } from './datasets/normalizers/row-fields.js';
export {
  type ParquetReadOptions,
  type ParquetSource,
  readParquetFields,
  readParquetMetadata,
  readParquetRows,
  readParquetTable,
} from './datasets/parquet-read.js';
export {
  type ParquetWriteOptions,
  rowsToParquetBuffer,
  writeParquet,
  writeParquetTable,
} from './datasets/parquet-write.js';
export {
  type DatasetSpec,
  defaultSharedDataSpecs,
  type PrepareCombinedTrainSetOptions,
  type PrepareCombinedTrainSetResult,
  prepareCombinedTrainSet,
} from './datasets/prepare-combined.js';
export { readSampleRows, writeSampleRows } from './datasets/sample-row-files.js';
export {
  bytesOf,
  createTensor,
  DTYPES,
  type DType,
  type DTypeArray,
  dtypeByteSize,
  float32ToTensor,
  isDType,
  shapeSize,
  type Tensor,
  type TypedArray,
  tensorToFloat32,
  typedArrayFromBytes,
} from './dtype.js';
export {
  bf16ArrayToF32,
  bf16ToF32,
  f16ArrayToF32,
  f16ToF32,
  f32ArrayToBf16,
  f32ArrayToF16,
  f32ToBf16,
  f32ToF16,
} from './dtype-convert.js';
export {
  ConfigError,
  DataFormatError,
  FileNotFoundError,
  FlowGrpoError,
  type FlowGrpoErrorOptions,
  ValidationError,
} from './errors.js';
export { datasetSplitFiles, downloadHubDataset, type HubDatasetOptions } from './hub/dataset.js';
export type { HubProgress } from './hub/download.js';
export {
  HubError,
  HubGatedError,
  HubIntegrityError,
  HubNameError,
  type HubNameKind,
  type HubNameSource,
  HubNetworkError,
  HubNotFoundError,
  HubOfflineError,
} from './hub/errors.js';
export { downloadHubFiles, type HubFilesOptions } from './hub/files.js';
export { downloadHubModel, downloadHubTokenizer, type HubSnapshot } from './hub/model.js';
export {
  type HubRepoId,
  type HubRepoType,
  hubRepoIdProblem,
  hubRevisionProblem,
  parseHubRepoId,
  repoFilePathProblem,
} from './hub/repo-id.js';
export {
  isHubName,
  type ResolveOptions,
  resolveDataSource,
  resolveModelSource,
} from './hub/resolve.js';
export { type HubSettings, hubSettings } from './hub/settings.js';
export type { HubOptions } from './hub/snapshot.js';
export {
  checkFolderInside,
  isWithin,
  makeFolderInside,
  PathOutsideFolderError,
  pathInside,
  realPathOf,
  SymlinkRefusedError,
} from './inside-folder.js';
export {
  addUsage,
  type ChatMessage,
  type ChatRole,
  emptyUsage,
  type FinishReason,
  type GenerateObjectOptions,
  type GenerateObjectResult,
  type GenerateOptions,
  type GenerateTextResult,
  type LLMEngine,
  type LLMUsage,
} from './llm.js';
export { checkOutputFile, writeOutputFile } from './output-file.js';
export { createRng, RNG_ALGORITHM, type Rng, type RngState, rngFromState } from './rng.js';
export { SafetensorsError, type SafetensorsErrorReason } from './safetensors/errors.js';
export type { SafetensorsHeader, SafetensorsTensorInfo } from './safetensors/header.js';
export {
  openSafetensors,
  parseSafetensors,
  readSafetensors,
  type SafetensorsContents,
  type SafetensorsFile,
  type SafetensorsReader,
} from './safetensors/read.js';
export {
  DEFAULT_MAX_SHARD_BYTES,
  openSafetensorsModel,
  openShardedSafetensors,
  readSafetensorsIndex,
  type SafetensorsIndex,
  type ShardedSafetensors,
  safetensorsIndexName,
  type WriteShardedOptions,
  type WrittenShardedSafetensors,
  writeShardedSafetensors,
} from './safetensors/sharded.js';
export {
  serializeSafetensors,
  type TensorSource,
  type TensorSources,
  type WriteSafetensorsOptions,
  type WrittenSafetensors,
  writeSafetensors,
} from './safetensors/write.js';
export { type SampleRow, SampleRowExtraInfoSchema, SampleRowSchema } from './sample-row.js';
export {
  AddressInUseError,
  DiskFullError,
  FileSystemError,
  IsADirectoryError,
  NotADirectoryError,
  PermissionDeniedError,
  ReadOnlyFileSystemError,
  systemError,
} from './system-errors.js';
export {
  type Group,
  GroupSchema,
  type SegmentKind,
  SegmentKindSchema,
  type StopReason,
  StopReasonSchema,
  TimingsSchema,
  type TokenSegment,
  type TokenSegmentInput,
  TokenSegmentSchema,
  type Trajectory,
  type TrajectoryInput,
  TrajectorySchema,
  type Turn,
  type TurnInput,
  TurnSchema,
} from './trajectory.js';
export {
  readTrajectoriesArrow,
  TRAJECTORY_ARROW_SCHEMA,
  type TrajectoryIpcFormat,
  tableToTrajectories,
  trajectoriesFromIPC,
  trajectoriesToIPC,
  trajectoriesToTable,
  writeTrajectoriesArrow,
} from './trajectory-arrow.js';
export {
  type GroupJson,
  groupFromJson,
  groupToJson,
  type JsonFloat,
  type TokenSegmentJson,
  type TrajectoryJson,
  type TurnJson,
  trajectoryFromJson,
  trajectoryToJson,
} from './trajectory-json.js';
export { readTrajectoriesParquet, writeTrajectoriesParquet } from './trajectory-parquet.js';
