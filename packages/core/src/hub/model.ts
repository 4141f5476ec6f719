import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { HubError } from './errors.js';
import { checkRepoFilePath, type HubRepoId } from './repo-id.js';
import { type HubOptions, openHubRevision } from './snapshot.js';

// A model by hub name: only what loading it needs — the config, the tokenizer's files and the
// safetensors weights (one file, or the shards a model.safetensors.index.json names) — never
// the .bin / .h5 / .onnx copies many repos also hold.

const TOKENIZER = ['tokenizer.json', 'tokenizer_config.json', 'special_tokens_map.json'];
const METADATA = ['config.json', 'generation_config.json', ...TOKENIZER];
const INDEX = 'model.safetensors.index.json';

export interface HubSnapshot {
  /** The snapshot folder: a HF model folder (or a data set's files) inside the HF cache. */
  dir: string;
  repo: string;
  revision: string;
  commit: string;
  /** The files this call put in the snapshot (repo paths). */
  files: string[];
  /** Those of them downloaded now (the rest were cached). */
  downloaded: string[];
}

/** Downloads (or finds in the cache) the model `org/name[@revision]`; returns its folder. */
export async function downloadHubModel(
  id: string | HubRepoId,
  options: HubOptions = {},
): Promise<HubSnapshot> {
  const rev = await openHubRevision(id, 'model', options);
  const has = new Set(rev.files);
  const where = `${rev.repo}@${rev.revision}`;
  if (!has.has('config.json'))
    throw new HubError(
      `${where} has no config.json: not a transformers model repo`,
      { repo: rev.repo },
      { hint: 'name a model repo with config.json and safetensors weights' },
    );
  const wanted = METADATA.filter((f) => has.has(f));
  if (has.has(INDEX)) wanted.push(INDEX);
  else if (has.has('model.safetensors')) wanted.push('model.safetensors');
  else
    throw new HubError(
      `${where} has no safetensors weights (model.safetensors or ${INDEX})${rev.offline ? ' in the cached snapshot' : ''}`,
      { repo: rev.repo },
      { hint: 'name a repo (or revision) with safetensors weights; .bin pickles are not loaded' },
    );
  const downloaded: string[] = [];
  const get = async (file: string) => {
    if (await rev.fetch(file)) downloaded.push(file);
  };
  for (const file of wanted) await get(file);
  if (has.has(INDEX)) {
    const index = JSON.parse(await readFile(join(rev.dir, INDEX), 'utf8')) as {
      weight_map?: Record<string, string>;
    };
    const shards = [...new Set(Object.values(index.weight_map ?? {}))].sort();
    // The index is a file of the repo: the shard names in it come from the hub as well.
    for (const shard of shards)
      checkRepoFilePath(rev.repo, String(shard), 'server', { subject: `${where} (${INDEX})` });
    for (const shard of shards) await get(shard);
    wanted.push(...shards);
  }
  return {
    dir: rev.dir,
    repo: rev.repo,
    revision: rev.revision,
    commit: rev.commit,
    files: wanted,
    downloaded,
  };
}

/**
 * Only the tokenizer files of the model `org/name[@revision]` (tokenizer.json,
 * tokenizer_config.json, special_tokens_map.json): a tokenizer without the weights.
 */
export async function downloadHubTokenizer(
  id: string | HubRepoId,
  options: HubOptions = {},
): Promise<HubSnapshot> {
  const rev = await openHubRevision(id, 'model', options);
  if (!rev.files.includes('tokenizer.json'))
    throw new HubError(
      `${rev.repo}@${rev.revision} has no tokenizer.json${rev.offline ? ' in the cached snapshot' : ''}`,
      { repo: rev.repo },
      { hint: 'name a repo with a fast tokenizer (tokenizer.json)' },
    );
  const files = TOKENIZER.filter((f) => rev.files.includes(f));
  const downloaded: string[] = [];
  for (const file of files) if (await rev.fetch(file)) downloaded.push(file);
  return {
    dir: rev.dir,
    repo: rev.repo,
    revision: rev.revision,
    commit: rev.commit,
    files,
    downloaded,
  };
}
