import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { cachedCommit, repoCacheFolder, snapshotFolder } from './cache.js';
import { downloadHubFile, type HubProgress, writeRef } from './download.js';
import { HubError, HubIntegrityError, HubNotFoundError, HubOfflineError } from './errors.js';
import { authHeaders, checkStatus, hubFetch } from './http.js';
import {
  checkHubCommit,
  checkHubRepoId,
  checkHubRevision,
  checkRepoFilePath,
  type HubRepoId,
  type HubRepoType,
  isCommitHash,
  parseHubRepoId,
} from './repo-id.js';
import { type HubSettings, hubSettings } from './settings.js';

// A revision of a repo and the files in it: from the hub (`/api/{models,datasets}/{repo}/revision/
// {rev}`: the commit and every file's name), or with HF_HUB_OFFLINE from the cache alone, without
// a request. The model and data-set resolvers pick the files they need from it. Every name on
// the way — the repo id and revision asked for, the commit and file names answered — is checked
// (repo-id.ts) before any request or write it leads to.

export interface HubOptions {
  /** Environment to read HF_* from (default process.env). */
  env?: NodeJS.ProcessEnv | undefined;
  /** Settings to use instead of the environment's. */
  settings?: HubSettings | undefined;
  /** A progress bar per downloaded file. */
  progress?: HubProgress | undefined;
  /** Notes on the way (waiting for another process that downloads the same file). */
  log?: ((line: string) => void) | undefined;
}

/** One revision of a repo, ready to fetch files from into its snapshot folder. */
export interface HubRevision {
  type: HubRepoType;
  repo: string;
  revision: string;
  commit: string;
  /** Every file of the revision (offline: those in the cached snapshot). */
  files: readonly string[];
  /** snapshots/<commit>/ in the cache. */
  dir: string;
  offline: boolean;
  /** Brings `file` into the snapshot (a no-op when cached); true when bytes were downloaded. */
  fetch(file: string): Promise<boolean>;
}

/**
 * `id` parsed and checked (repo-id.ts) before anything uses it: a repo id or revision that
 * breaks the rules is HubNameError naming it, from the user (or the calling code).
 */
export function toRepoId(id: string | HubRepoId, type: HubRepoType): HubRepoId {
  const parsed = typeof id === 'string' ? parseHubRepoId(id) : id;
  if (!parsed) {
    const repo = String(id).split('@')[0] ?? '';
    checkHubRepoId(repo, 'user');
    // A valid repo id that is still no hub name: it ends like a data or weights file.
    throw new HubError(
      `'${id}' is not a hub ${type} name (org/name or org/name@revision)`,
      { repo: String(id) },
      {
        hint: `write the ${type} as org/name, e.g. ${type === 'model' ? 'Qwen/Qwen2.5-0.5B-Instruct' : 'openai/gsm8k'}`,
      },
    );
  }
  checkHubRepoId(parsed.repo, 'user');
  checkHubRevision(parsed.repo, parsed.revision, 'user');
  return parsed;
}

function listFiles(dir: string, prefix = ''): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? listFiles(join(dir, e.name), `${prefix}${e.name}/`) : [`${prefix}${e.name}`],
  );
}

/** Opens `id`'s revision: from the hub, or from the cache when HF_HUB_OFFLINE is set. */
export async function openHubRevision(
  id: string | HubRepoId,
  type: HubRepoType,
  options: HubOptions = {},
): Promise<HubRevision> {
  const { repo, revision } = toRepoId(id, type);
  const settings = options.settings ?? hubSettings(options.env);
  const repoFolder = repoCacheFolder(settings.cacheDir, type, repo);
  const base = { type, repo, revision, offline: settings.offline };
  if (settings.offline) {
    const commit = cachedCommit(repoFolder, repo, revision);
    if (!commit)
      throw new HubOfflineError(
        `${type} ${repo}@${revision} is not in the cache (${repoFolder}) and HF_HUB_OFFLINE=1`,
        { repo },
        {
          hint: 'unset HF_HUB_OFFLINE and run once with the network to download it, or point HF_HOME at a cache that has it',
        },
      );
    const dir = snapshotFolder(repoFolder, commit);
    const files = listFiles(dir);
    return {
      ...base,
      commit,
      files,
      dir,
      async fetch(file) {
        if (files.includes(file)) return false;
        throw new HubOfflineError(
          `${repo}@${revision}: ${file} is not in the cached snapshot (${dir}) and HF_HUB_OFFLINE=1`,
          { repo },
          { hint: 'unset HF_HUB_OFFLINE and run once with the network to complete the download' },
        );
      },
    };
  }
  const url = `${settings.endpoint}/api/${type}s/${repo}/revision/${encodeURIComponent(revision)}`;
  const res = await hubFetch(url, { headers: authHeaders(settings) }, repo, settings);
  checkStatus(res, repo, `${type} ${repo}@${revision}`, settings);
  const info = (await res.json().catch(() => ({}))) as {
    sha?: unknown;
    siblings?: { rfilename?: unknown }[];
  };
  if (typeof info.sha !== 'string' || !Array.isArray(info.siblings))
    throw new HubError(
      `${url} did not answer with a revision ({sha, siblings})`,
      { repo },
      { hint: 'check HF_ENDPOINT: it must serve the Hugging Face Hub API' },
    );
  // The commit and the file names become paths in the cache (snapshots/<commit>/<file>): all
  // are checked before the ref, or anything else, is written.
  const subject = `${repo}@${revision}`;
  const at = `at ${settings.endpoint}`;
  const commit = info.sha;
  checkHubCommit(repo, commit, 'server', { subject, at });
  if (isCommitHash(revision) && commit !== revision)
    throw new HubIntegrityError(
      `${subject}: the hub at ${settings.endpoint} answered the commit ${commit} for the commit ${revision}`,
      { repo },
      { hint: 'check HF_ENDPOINT: it must serve the Hugging Face Hub API' },
    );
  const files = info.siblings.map((s) => s.rfilename);
  for (const file of files) {
    if (typeof file !== 'string')
      throw new HubError(
        `${url} listed a file with no name (rfilename ${JSON.stringify(file)})`,
        { repo },
        { hint: 'check HF_ENDPOINT: it must serve the Hugging Face Hub API' },
      );
    checkRepoFilePath(repo, file, 'server', { subject, at });
  }
  const names = files as string[];
  await writeRef(repoFolder, revision, commit);
  return {
    ...base,
    commit,
    files: names,
    dir: snapshotFolder(repoFolder, commit),
    async fetch(file) {
      // Only what the (checked) listing names reaches the disk.
      if (!names.includes(file))
        throw new HubNotFoundError(
          `${subject} has no file ${JSON.stringify(file)}`,
          { repo },
          { hint: `check the file name against the repo's files at ${settings.endpoint}/${repo}` },
        );
      const r = await downloadHubFile({
        settings,
        type,
        repo,
        commit,
        file,
        repoFolder,
        progress: options.progress,
        log: options.log,
      });
      return r.downloaded;
    },
  };
}
