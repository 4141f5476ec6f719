import { join } from 'node:path';
import { HubNotFoundError } from './errors.js';
import type { HubSnapshot } from './model.js';
import { checkRepoFilePath, type HubRepoId, type HubRepoType } from './repo-id.js';
import { type HubOptions, openHubRevision, toRepoId } from './snapshot.js';

// Named files of any repo, as huggingface_hub's hf_hub_download fetches them: for what is no
// transformers model and no data set split — llama2.c checkpoints (karpathy/tinyllamas'
// stories260K/stories260K.bin), a tokenizer file, a corpus archive.

export interface HubFilesOptions extends HubOptions {
  /** The repo's kind (default 'model', as hf_hub_download's repo_type). */
  type?: HubRepoType | undefined;
}

/** Downloads (or finds in the cache) `files` of `org/name[@revision]`; `paths` in their order. */
export async function downloadHubFiles(
  id: string | HubRepoId,
  files: readonly string[],
  options: HubFilesOptions = {},
): Promise<HubSnapshot & { paths: string[] }> {
  const type = options.type ?? 'model';
  // The names are the caller's: checked before the revision is even asked for.
  const { repo } = toRepoId(id, type);
  for (const file of files) checkRepoFilePath(repo, file, 'user');
  const rev = await openHubRevision(id, type, options);
  const absent = files.filter((f) => !rev.files.includes(f));
  if (absent.length > 0)
    throw new HubNotFoundError(
      `${rev.repo}@${rev.revision} has no ${absent.join(', ')}${rev.offline ? ' in the cached snapshot' : ''}`,
      { repo: rev.repo },
      {
        hint: `check the file names against the repo's files (${rev.files.slice(0, 8).join(', ')}${rev.files.length > 8 ? ', …' : ''})`,
      },
    );
  const downloaded: string[] = [];
  for (const file of files) if (await rev.fetch(file)) downloaded.push(file);
  return {
    dir: rev.dir,
    repo: rev.repo,
    revision: rev.revision,
    commit: rev.commit,
    files: [...files],
    downloaded,
    paths: files.map((f) => join(rev.dir, f)),
  };
}
