import { HubNameError, type HubNameKind, type HubNameSource } from './errors.js';

// A hub name as users write it: `org/name` or `org/name@revision` (a branch, tag or commit), and
// the rules every name from outside must meet before it reaches a URL or a path in the cache.
// Each one becomes part of a path there — models--org--name/, refs/<revision>,
// snapshots/<commit>/<file> — so a repo id, a revision, a commit or a file name that the user
// typed, the hub answered or a cache file holds is checked here, before any request or write.
// The rules are huggingface_hub's: validate_repo_id for repo ids, a commit is 40 lowercase hex
// digits (REGEX_COMMIT_HASH), a repo file name is a relative path with no '..' part
// (_validate_relative_filename); a revision follows git's ref-name rules (git check-ref-format),
// which keep '..', absolute paths and empty parts out while branches such as refs/pr/1 or
// feature/x stay valid (sent URL-encoded, stored as nested refs/ files as Python stores them).

export type HubRepoType = 'model' | 'dataset';

export interface HubRepoId {
  /** `org/name`. */
  repo: string;
  /** Branch, tag or commit (default `main`). */
  revision: string;
}

// validate_repo_id's REPO_ID_REGEX (re.ASCII): word characters, '-' and '.', starting and ending
// with a word character; the name at most 96 characters.
const NAMESPACE = /^[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?$/;
const NAME = /^[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,94}[A-Za-z0-9_])?$/;
// A name ending in a data or weights extension is a file path that is missing, not a repo.
const FILE_LIKE = /\.(jsonl|json|parquet|csv|arrow|bin|safetensors|txt|gz)$/i;
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point
const CONTROL = /[\u0000-\u001f\u007f]/;
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point
const CONTROL_OR_SPACE = /[\u0000-\u0020\u007f]/;
/** The longest file name most file systems hold: one revision is one refs/ file. */
const MAX_REVISION = 255;

/** Why `repo` is no `org/name` repo id by huggingface_hub's rules; undefined when it is one. */
export function hubRepoIdProblem(repo: string): string | undefined {
  const parts = repo.split('/');
  if (parts.length !== 2) return "it must be org/name, with exactly one '/'";
  const [namespace, name] = parts as [string, string];
  if (!NAMESPACE.test(namespace) || !NAME.test(name))
    return "use letters, digits, '-', '_' and '.', neither first nor last '-' or '.', the name at most 96 characters";
  if (repo.includes('--') || repo.includes('..')) return "it cannot contain '--' or '..'";
  if (repo.endsWith('.git')) return "it cannot end in '.git'";
  return undefined;
}

/** Why `revision` is no branch, tag or commit name (git's ref-name rules); undefined when valid. */
export function hubRevisionProblem(revision: string): string | undefined {
  if (revision === '') return 'it is empty';
  if (revision.length > MAX_REVISION) return `it is longer than ${MAX_REVISION} characters`;
  // Control characters (NUL included) and spaces, then the characters git reserves.
  if (CONTROL_OR_SPACE.test(revision)) return 'it contains a space or a control character';
  const reserved = /[\\~^:?*[]/.exec(revision);
  if (reserved) return `it contains '${reserved[0]}'`;
  if (revision.includes('..')) return "it contains '..'";
  if (revision === '@') return "it is '@'";
  if (revision.includes('@{')) return "it contains '@{'";
  if (revision.startsWith('/')) return "it starts with '/' (an absolute path)";
  if (revision.endsWith('/') || revision.includes('//'))
    return "it has an empty part ('//' or a trailing '/')";
  if (revision.endsWith('.')) return "it ends with '.'";
  for (const part of revision.split('/')) {
    if (part.startsWith('.')) return `its part '${part}' starts with '.'`;
    if (part.endsWith('.lock')) return `its part '${part}' ends with '.lock'`;
  }
  return undefined;
}

/** A 40-hex git commit: a revision that never moves, so the cache answers it without a ref. */
export function isCommitHash(revision: string): boolean {
  return /^[0-9a-f]{40}$/.test(revision);
}

/**
 * Why `file` is no path inside a repo (a repo file name is '/'-separated and relative);
 * undefined when it is one. As huggingface_hub's _validate_relative_filename, under both POSIX
 * and Windows rules, and stricter: no empty or '.' part, no backslash, no control character.
 */
export function repoFilePathProblem(file: string): string | undefined {
  if (file === '') return 'it is empty';
  if (CONTROL.test(file)) return 'it contains a control character';
  if (file.includes('\\')) return "it contains '\\'";
  if (file.startsWith('/')) return "it starts with '/' (an absolute path)";
  for (const part of file.split('/')) {
    if (part === '') return "it has an empty part ('//' or a trailing '/')";
    if (part === '..') return "it has a '..' part";
    if (part === '.') return "it has a '.' part";
    // A drive ('C:') is an absolute path where the file would be used on Windows.
    if (/^[A-Za-z]:/.test(part)) return `its part '${part}' starts with a drive letter`;
  }
  return undefined;
}

const FROM: Record<HubNameSource, string> = {
  user: 'from the user',
  server: 'from the hub',
  cache: 'from the cache',
};

const FIX: Record<HubNameKind, string> = {
  'repo id':
    "write it as org/name: letters, digits, '-', '_' and '.', neither first nor last '-' or '.', no '--' or '..', the name at most 96 characters (huggingface_hub's rules)",
  revision:
    "name a branch, tag or commit (main, v1.0, refs/pr/1, a 40-hex id): no '..', no leading '/' or '.', no spaces or control characters, none of \\ ~ ^ : ? * [",
  commit: 'a commit id is 40 lowercase hex digits',
  'file name': "name a file by its path inside the repo (a/b.json): relative, no '..' part",
};

/**
 * The error for a name that breaks the rules. `where` says more about its source (the hub's
 * URL, the cache file it was read from); `subject` what it belongs to (`org/name@main`).
 */
function refused(
  fields: { repo: string; value: string; kind: HubNameKind; source: HubNameSource },
  problem: string,
  where?: { subject?: string | undefined; at?: string | undefined },
): HubNameError {
  const from = `${FROM[fields.source]}${where?.at ? ` ${where.at}` : ''}`;
  const hint =
    fields.source === 'user'
      ? FIX[fields.kind]
      : fields.source === 'server'
        ? 'check HF_ENDPOINT: no Hugging Face Hub answers with such a name; nothing was written'
        : `the cache file${where?.at ? ` ${where.at}` : ''} is damaged: delete it, and the next run with the network writes it again`;
  return new HubNameError(
    `${where?.subject ?? fields.repo}: the ${fields.kind} ${JSON.stringify(fields.value)} (${from}) is not valid: ${problem}`,
    fields,
    { hint },
  );
}

/** Throws HubNameError when `repo` is no valid `org/name`. */
export function checkHubRepoId(repo: string, source: HubNameSource): void {
  const problem = hubRepoIdProblem(repo);
  if (problem !== undefined)
    throw refused({ repo, value: repo, kind: 'repo id', source }, problem, {
      subject: 'hub name',
    });
}

/** Throws HubNameError when `revision` is no valid branch, tag or commit name. */
export function checkHubRevision(repo: string, revision: string, source: HubNameSource): void {
  const problem = hubRevisionProblem(revision);
  if (problem !== undefined)
    throw refused({ repo, value: revision, kind: 'revision', source }, problem);
}

/** Throws HubNameError when `commit` is no 40-hex commit id; `at` names where it was read. */
export function checkHubCommit(
  repo: string,
  commit: string,
  source: HubNameSource,
  where?: { subject?: string; at?: string },
): void {
  if (!isCommitHash(commit))
    throw refused(
      { repo, value: commit, kind: 'commit', source },
      'a commit id is 40 lowercase hex digits',
      where,
    );
}

/** Throws HubNameError when `file` is no path inside the repo. */
export function checkRepoFilePath(
  repo: string,
  file: string,
  source: HubNameSource,
  where?: { subject?: string; at?: string },
): void {
  const problem = repoFilePathProblem(file);
  if (problem !== undefined)
    throw refused({ repo, value: file, kind: 'file name', source }, problem, where);
}

/**
 * `org/name[@revision]` split into its parts; undefined when `text` cannot be a hub name (a
 * path). Only the repo id decides: `org/name@<anything>` is meant for the hub, and its revision is
 * checked by checkHubRevision when it is used (openHubRevision), so that a bad one is refused
 * naming it rather than taken for a missing file.
 */
export function parseHubRepoId(text: string): HubRepoId | undefined {
  const at = text.indexOf('@');
  const repo = at < 0 ? text : text.slice(0, at);
  if (hubRepoIdProblem(repo) !== undefined || FILE_LIKE.test(repo)) return undefined;
  return { repo, revision: at < 0 ? 'main' : text.slice(at + 1) };
}
