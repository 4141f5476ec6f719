import { join } from 'node:path';
import { ConfigError } from '../errors.js';
import type { SampleRow } from '../sample-row.js';
import { combineDatasets, countBySource, DEFAULT_DATA_SEED, reindexRows } from './combine.js';
import { type DatasetFormat, loadDataset } from './load-dataset.js';
import { writeSampleRowsParquet } from './sample-row-files.js';

/** One raw input of the mix. */
export interface DatasetSpec {
  path: string;
  format: DatasetFormat;
  /** Overrides the source tag the normaliser sets. */
  source?: string;
  /** Keep only the first `limit` rows. */
  limit?: number;
}

/**
 * The offline stand-in for the seed's DeepMath-103K + FlashRAG-NQ mix, from the shared data
 * folder: GSM8K train (math) and Search-R1's NQ train split (search), with AIME 2024 as the
 * validation set. DeepMath-103K is not in the shared folder; GSM8K is the math set that is.
 */
export function defaultSharedDataSpecs(dataDir: string): {
  train: DatasetSpec[];
  validation: DatasetSpec[];
} {
  return {
    train: [
      { path: join(dataDir, 'gsm8k', 'train.jsonl'), format: 'gsm8k' },
      { path: join(dataDir, 'search-r1-nq', 'train-5000.parquet'), format: 'search-r1' },
    ],
    validation: [{ path: join(dataDir, 'aime24', 'test.jsonl'), format: 'aime' }],
  };
}

export interface PrepareCombinedTrainSetOptions {
  /** A folder laid out like ../shared/data; supplies `train` and `validation` when they are omitted. */
  dataDir?: string;
  train?: readonly DatasetSpec[];
  /** Validation sets, kept in file order (not shuffled) and numbered 0..N-1; [] writes none. */
  validation?: readonly DatasetSpec[];
  /** Shuffle seed of the training mix (default 42, the seeds' value). */
  seed?: number | bigint | string;
  /** Folder for `combined_train.parquet` and `val.parquet`. */
  outDir?: string;
  /** Explicit training file path (overrides outDir). */
  outPath?: string;
  /** Explicit validation file path (overrides outDir). */
  valPath?: string;
}

export interface PrepareCombinedTrainSetResult {
  trainPath: string;
  valPath: string | undefined;
  /** Rows in the training file. */
  trainRows: number;
  /** Training rows per source tag. */
  counts: Record<string, number>;
  /** Rows in the validation file (0 when none was written). */
  valRows: number;
  valCounts: Record<string, number>;
  /** The written rows, for callers that go straight on to train. */
  train: SampleRow[];
  validation: SampleRow[];
}

async function loadAll(specs: readonly DatasetSpec[]): Promise<SampleRow[][]> {
  const parts: SampleRow[][] = [];
  for (const s of specs)
    parts.push(await loadDataset(s.path, s.format, { source: s.source, limit: s.limit }));
  return parts;
}

/**
 * The seeds' data preparation: normalise each source to SampleRows, concatenate, shuffle with a
 * fixed seed, renumber ids 0..N-1 and write `combined_train.parquet`; the validation sets go to
 * `val.parquet`. Returns the paths and the row counts per source.
 */
export async function prepareCombinedTrainSet(
  options: PrepareCombinedTrainSetOptions,
): Promise<PrepareCombinedTrainSetResult> {
  const defaults = options.dataDir ? defaultSharedDataSpecs(options.dataDir) : undefined;
  const trainSpecs = options.train ?? defaults?.train;
  const valSpecs = options.validation ?? defaults?.validation ?? [];
  if (!trainSpecs || trainSpecs.length === 0) {
    throw new ConfigError('prepareCombinedTrainSet needs `train` sources or a `dataDir`', {
      key: 'train',
    });
  }
  const trainPath =
    options.outPath ??
    (options.outDir ? join(options.outDir, 'combined_train.parquet') : undefined);
  if (!trainPath)
    throw new ConfigError('prepareCombinedTrainSet needs `outDir` or `outPath`', { key: 'outDir' });
  const valPath =
    valSpecs.length === 0
      ? undefined
      : (options.valPath ?? (options.outDir ? join(options.outDir, 'val.parquet') : undefined));
  if (valSpecs.length > 0 && !valPath) {
    throw new ConfigError('validation sets need `outDir` or `valPath`', { key: 'valPath' });
  }

  const train = combineDatasets(await loadAll(trainSpecs), {
    seed: options.seed ?? DEFAULT_DATA_SEED,
  });
  const validation = reindexRows((await loadAll(valSpecs)).flat());
  await writeSampleRowsParquet(trainPath, train);
  if (valPath && validation.length > 0) await writeSampleRowsParquet(valPath, validation);
  return {
    trainPath,
    valPath: validation.length > 0 ? valPath : undefined,
    trainRows: train.length,
    counts: countBySource(train),
    valRows: validation.length,
    valCounts: countBySource(validation),
    train,
    validation,
  };
}
