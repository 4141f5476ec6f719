import { readParquetTable } from './datasets/parquet-read.js';
import { type ParquetWriteOptions, writeParquetTable } from './datasets/parquet-write.js';
import { DataFormatError } from './errors.js';
import type { Trajectory } from './trajectory.js';
import { tableToTrajectories, trajectoriesToTable } from './trajectory-arrow.js';

// Rollout logs as Parquet: the same one-row-per-turn layout as trajectoriesToTable, so pandas,
// polars or DuckDB can query a training run's turns directly.

/** Writes trajectories as a (snappy) Parquet file with the trajectory Arrow schema. */
export async function writeTrajectoriesParquet(
  path: string,
  trajectories: readonly Trajectory[],
  options: Omit<ParquetWriteOptions, 'fields'> = {},
): Promise<void> {
  await writeParquetTable(path, trajectoriesToTable(trajectories), options);
}

/** Reads trajectories from a Parquet file written by `writeTrajectoriesParquet`. */
export async function readTrajectoriesParquet(path: string): Promise<Trajectory[]> {
  const table = await readParquetTable(path);
  try {
    return tableToTrajectories(table);
  } catch (e) {
    if (DataFormatError.isInstance(e)) {
      throw new DataFormatError(e.message, { file: path }, { cause: e });
    }
    throw e;
  }
}
