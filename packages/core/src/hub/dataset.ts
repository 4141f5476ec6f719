import { join } from 'node:path';
import { HubError } from './errors.js';
import type { HubSnapshot } from './model.js';
import type { HubRepoId } from './repo-id.js';
import { type HubOptions, openHubRevision } from './snapshot.js';

// A data set by hub name, as TRL names it (dataset_name, dataset_config, the split): the split's
// data files, found by the layout the hub's data-files resolution uses — one folder per config
// (openai/gsm8k: main/, socratic/) or data/ for a single one, and files named after their split
// (train-00000-of-00001.parquet, test.jsonl). Only the split's files are downloaded.

const DATA_FILE = /\.(parquet|jsonl|json)$/i;

export interface HubDatasetOptions extends HubOptions {
  /** The config (subset), e.g. gsm8k's 'main'; needed when the repo has several. */
  config?: string | undefined;
  /** The split (default 'train'). */
  split?: string | undefined;
}

/** A data file's config: its first folder, unless that is data/ (the default config's place). */
function configOf(file: string): string {
  const slash = file.indexOf('/');
  const top = slash < 0 ? '' : file.slice(0, slash);
  return top === '' || top === 'data' ? 'default' : top;
}

function isSplit(file: string, split: string): boolean {
  const parts = file.split('/');
  const base = parts.pop() ?? '';
  return (
    parts.includes(split) || new RegExp(`^${split.replace(/\W/g, '\\$&')}([-_.]|$)`).test(base)
  );
}

/** Picks the files of `config` / `split` among a repo's files; throws what to name otherwise. */
export function datasetSplitFiles(
  repo: string,
  files: readonly string[],
  config: string | undefined,
  split: string,
): string[] {
  const data = files.filter((f) => DATA_FILE.test(f) && !f.startsWith('.'));
  const configs = [...new Set(data.map(configOf))].sort();
  if (config !== undefined && !configs.includes(config))
    throw new HubError(
      `data set ${repo} has no config '${config}' (it has ${configs.join(', ') || 'no data files'})`,
      { repo },
      { hint: `set dataset_config (--config) to one of: ${configs.join(', ')}` },
    );
  const chosen =
    config ??
    (configs.length === 1 ? configs[0] : configs.includes('default') ? 'default' : undefined);
  if (chosen === undefined)
    throw new HubError(
      `data set ${repo} has several configs (${configs.join(', ')}); say which`,
      { repo },
      { hint: `set dataset_config (--config) to one of: ${configs.join(', ')}` },
    );
  const inConfig = data.filter((f) => configOf(f) === chosen);
  const picked = inConfig.filter((f) => isSplit(f, split)).sort();
  if (picked.length === 0) {
    const splits = [
      ...new Set(inConfig.map((f) => (f.split('/').pop() ?? '').split(/[-_.]/)[0])),
    ].sort();
    throw new HubError(
      `data set ${repo} (config ${chosen}) has no split '${split}' (its files name: ${splits.join(', ')})`,
      { repo },
      {
        hint: `name one of its splits (dataset_train_split / dataset_test_split / --split): ${splits.join(', ')}`,
      },
    );
  }
  return picked;
}

/** Downloads (or finds in the cache) one split of the data set `org/name[@revision]`. */
export async function downloadHubDataset(
  id: string | HubRepoId,
  options: HubDatasetOptions = {},
): Promise<HubSnapshot & { paths: string[] }> {
  const rev = await openHubRevision(id, 'dataset', options);
  const files = datasetSplitFiles(rev.repo, rev.files, options.config, options.split ?? 'train');
  const downloaded: string[] = [];
  for (const file of files) if (await rev.fetch(file)) downloaded.push(file);
  return {
    dir: rev.dir,
    repo: rev.repo,
    revision: rev.revision,
    commit: rev.commit,
    files,
    downloaded,
    paths: files.map((f) => join(rev.dir, f)),
  };
}
