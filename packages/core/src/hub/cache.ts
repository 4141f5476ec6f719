import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { checkHubCommit, type HubRepoType, isCommitHash } from './repo-id.js';

// Python huggingface_hub's cache layout, so both share one cache:
//   <cache>/models--org--name/blobs/<etag>                 the bytes, named by their hash
//   <cache>/models--org--name/refs/<revision>               the commit a branch or tag points at
//   <cache>/models--org--name/snapshots/<commit>/<file>     a relative link to ../../blobs/<etag>
// Data sets live beside them under datasets--org--name/.

/** The cache folder of one repo. */
export function repoCacheFolder(cacheDir: string, type: HubRepoType, repo: string): string {
  return join(cacheDir, `${type}s--${repo.split('/').join('--')}`);
}

/** The snapshot folder of `commit` in a repo's cache folder. */
export function snapshotFolder(repoFolder: string, commit: string): string {
  return join(repoFolder, 'snapshots', commit);
}

/**
 * The commit the cache holds for `revision`: the revision itself when it is a commit with a
 * snapshot, else what refs/<revision> says; undefined when the cache never saw it. The ref is
 * a file (written by flowgrpo or Python, or by hand): what it holds must be a commit id before it
 * names a snapshot folder.
 */
export function cachedCommit(
  repoFolder: string,
  repo: string,
  revision: string,
): string | undefined {
  if (isCommitHash(revision))
    return existsSync(snapshotFolder(repoFolder, revision)) ? revision : undefined;
  const ref = join(repoFolder, 'refs', revision);
  if (!existsSync(ref)) return undefined;
  const commit = readFileSync(ref, 'utf8').trim();
  checkHubCommit(repo, commit, 'cache', { subject: `${repo}@${revision}`, at: ref });
  return existsSync(snapshotFolder(repoFolder, commit)) ? commit : undefined;
}
