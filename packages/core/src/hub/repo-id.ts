// A hub name as users write it: `org/name` or `org/name@revision` (a branch, tag or commit).

export type HubRepoType = 'model' | 'dataset';

export interface HubRepoId {
  /** `org/name`. */
  repo: string;
  /** Branch, tag or commit (default `main`). */
  revision: string;
}

const SEGMENT = '[A-Za-z0-9][A-Za-z0-9._-]*';
const REPO_ID = new RegExp(`^(${SEGMENT}/${SEGMENT})(?:@([A-Za-z0-9._/-]+))?$`);
// A name ending in a data or weights extension is a file path that is missing, not a repo.
const FILE_LIKE = /\.(jsonl|json|parquet|csv|arrow|bin|safetensors|txt|gz)$/i;

/** `org/name[@revision]` parsed; undefined when `text` cannot be a hub name (a path). */
export function parseHubRepoId(text: string): HubRepoId | undefined {
  const m = REPO_ID.exec(text);
  if (!m || FILE_LIKE.test(m[1] ?? '')) return undefined;
  return { repo: m[1] as string, revision: m[2] ?? 'main' };
}

/** A 40-hex git commit: a revision that never moves, so the cache answers it without a ref. */
export function isCommitHash(revision: string): boolean {
  return /^[0-9a-f]{40}$/.test(revision);
}
