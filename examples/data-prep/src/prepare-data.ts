// The Flow-GRPO seed's data preparation with @flowgrpo/core: a math set and Natural Questions
// normalised to the seeds' common row schema ({id, question, chain, result, source, extra_info}),
// cleaned (NQ questions end with '?', golden answers flattened, stringified, empty ones dropped,
// joined with '; '), merged, shuffled with seed 42, re-indexed 0..N-1 and written as Parquet; and
// AIME 2024 as the validation set. Then both files are read back to show what a trainer gets.
import { join, resolve } from 'node:path';
import {
  type DatasetSpec,
  DEFAULT_DATA_SEED,
  defaultSharedDataSpecs,
  prepareCombinedTrainSet,
  readSampleRows,
  type SampleRow,
} from '@flowgrpo/core';

export interface PrepareDataOptions {
  /** A folder laid out like ../shared/data (gsm8k/, search-r1-nq/, aime24/). */
  dataDir?: string;
  /** The same sources as files found elsewhere (the hub's, data-source.ts): math (GSM8K) and NQ, then validation. */
  sources?: { train: DatasetSpec[]; validation: DatasetSpec[] };
  /** DeepMath-103K Parquet file(s) (HF zwhe99/DeepMath-103K data/*.parquet): the seed's math set. */
  math?: string[];
  /** FlashRAG NQ train Parquet/JSONL (golden_answers), the seed's search set. */
  nq?: string;
  /** AIME 2024 Parquet/JSONL (HF AI-MO/aimo-validation-aime or Maxwell-Jia/AIME_2024). */
  aime?: string;
  /** Output folder for combined_train.parquet and val.parquet. */
  out: string;
  seed?: number;
  /** Keep the first `limit` rows of each source (the --quick path). */
  limit?: number;
  log?: (line: string) => void;
}

export interface PrepareDataResult {
  trainPath: string;
  valPath: string | undefined;
  counts: Record<string, number>;
  valCounts: Record<string, number>;
  train: SampleRow[];
  validation: SampleRow[];
}

/** Which files to read: the user's full HF files where given, else the shared folder's (or the hub's). */
export function sourceSpecs(o: PrepareDataOptions): {
  train: DatasetSpec[];
  validation: DatasetSpec[];
} {
  const shared = o.dataDir ? defaultSharedDataSpecs(o.dataDir) : o.sources;
  const limit = o.limit === undefined ? {} : { limit: o.limit };
  const math: DatasetSpec[] = o.math
    ? o.math.map((path) => ({ path: resolve(path), format: 'deepmath' }))
    : shared
      ? shared.train.filter((s) => s.format === 'gsm8k')
      : [];
  const nq: DatasetSpec[] = o.nq
    ? [{ path: resolve(o.nq), format: 'nq' }]
    : shared
      ? shared.train.filter((s) => s.format !== 'gsm8k')
      : [];
  const validation: DatasetSpec[] = o.aime
    ? [{ path: resolve(o.aime), format: 'aime' }]
    : (shared?.validation ?? []);
  // NQ first, then math: the order the seed concatenates them in (shuffling mixes them anyway).
  return {
    train: [...nq, ...math].map((s) => ({ ...s, ...limit })),
    validation,
  };
}

export async function prepareData(o: PrepareDataOptions): Promise<PrepareDataResult> {
  const log = o.log ?? console.log;
  const specs = sourceSpecs(o);
  if (specs.train.length === 0)
    throw new Error(
      'no training sources: give --data-dir (or ../shared), --math and --nq, or sources',
    );
  log('sources:');
  for (const s of specs.train)
    log(`  train  ${s.format.padEnd(9)} ${s.path}${s.limit ? ` (first ${s.limit} rows)` : ''}`);
  for (const s of specs.validation) log(`  val    ${s.format.padEnd(9)} ${s.path}`);

  const seed = o.seed ?? DEFAULT_DATA_SEED;
  const started = performance.now();
  const r = await prepareCombinedTrainSet({
    train: specs.train,
    validation: specs.validation,
    seed,
    outDir: resolve(o.out),
  });
  const secs = ((performance.now() - started) / 1000).toFixed(1);

  // Read the files back, as a trainer would, to show they hold what was written.
  const train = await readSampleRows(r.trainPath);
  const validation = r.valPath ? await readSampleRows(r.valPath) : [];
  const ids = train.map((row) => row.id);
  const reindexed = ids.every((id, i) => id === i);

  log('');
  log(
    `train: ${train.length} rows → ${r.trainPath} (shuffled with seed ${seed}, ids ${reindexed ? `0..${train.length - 1}` : 'NOT consecutive'}) in ${secs} s`,
  );
  for (const [source, n] of Object.entries(r.counts).sort()) log(`  ${source.padEnd(10)} ${n}`);
  log(
    `  first 10 sources after the shuffle: ${train
      .slice(0, 10)
      .map((row) => row.source)
      .join(' ')}`,
  );
  if (r.valPath) {
    log(`validation: ${validation.length} rows → ${r.valPath}`);
    for (const [source, n] of Object.entries(r.valCounts).sort())
      log(`  ${source.padEnd(10)} ${n}`);
  }
  log('');
  log('sample training row:');
  log(JSON.stringify(train[0], null, 2));
  const other = train.find((row) => row.source !== train[0]!.source);
  if (other) {
    log(`sample training row from another source (${other.source}):`);
    log(JSON.stringify(other, null, 2));
  }
  if (validation[0]) {
    log('sample validation row (solution cut to 200 characters here):');
    const v = validation[0];
    log(JSON.stringify({ ...v, chain: `${v.chain.slice(0, 200)}…` }, null, 2));
  }
  return {
    trainPath: r.trainPath,
    valPath: r.valPath,
    counts: r.counts,
    valCounts: r.valCounts,
    train,
    validation,
  };
}

/** Default output folder, relative to where the example runs. */
export const DEFAULT_OUT = join('out', 'data-prep');
