// Snippets of docs/guides/core.md. Each `#region` is copied verbatim into the guide; the test
// command compiles this file (root tsconfig.json) and docs/test checks the copies match.
import {
  combineDatasets,
  countBySource,
  createRng,
  loadDataset,
  readSampleRows,
  type SampleRow,
  writeSampleRows,
} from '@flowgrpo/core';

export async function mixTwoSets(dataDir: string): Promise<SampleRow[]> {
  // #region datasets
  // Raw files in their public layouts → SampleRows {id, question, chain, result, source, extra_info}.
  const math = await loadDataset(`${dataDir}/gsm8k/train.jsonl`, 'gsm8k');
  const nq = await loadDataset(`${dataDir}/search-r1-nq/train-5000.parquet`, 'search-r1');
  // Concatenate, shuffle with seed 42, renumber ids 0..N-1 (the seeds' recipe).
  const mixed = combineDatasets([nq, math], { seed: 42 });
  console.log(countBySource(mixed)); // { nq: 5000, gsm8k: 7473 } (order of first appearance)
  await writeSampleRows('out/data/combined_train.parquet', mixed);
  const back = await readSampleRows('out/data/combined_train.parquet'); // validated on read
  // #endregion datasets
  return back;
}

export function seededStreams(): number[] {
  // #region rng
  // One seed, many independent streams: fork by label, never by reusing a number.
  const rng = createRng(42);
  const order = rng.fork('datasets.shuffle').permutation(10);
  const u = rng.fork('sampling').next(); // uniform in [0, 1)
  // #endregion rng
  return [...order, u];
}
