import { FlowGrpoError, type FlowGrpoErrorOptions } from '../errors.js';

// What can go wrong between a hub name and files on disk. Each names the repo (and file) and
// says what to do, so `flowgrpo train` with `model: org/name` fails with one readable line.

/**
 * Any failure resolving a Hugging Face Hub name; `repo` is `org/name`. Every subclass takes
 * `(message, fields, options)` with `fields` holding at least `repo`, so that an error can be
 * re-said with more context as the same class (resolve.ts does).
 */
export class HubError extends FlowGrpoError {
  static override readonly code: string = 'HUB_ERROR';
  readonly repo: string;
  constructor(message: string, fields: { repo: string }, options?: FlowGrpoErrorOptions) {
    super(message, options);
    this.repo = fields.repo;
  }
}

/** The hub answered 404: no such repo, revision or file (or a private repo without a token). */
export class HubNotFoundError extends HubError {
  static override readonly code = 'HUB_NOT_FOUND';
}

/** The hub answered 401/403: a gated or private repo and no (or an unaccepted) token. */
export class HubGatedError extends HubError {
  static override readonly code = 'HUB_GATED';
}

/** HF_HUB_OFFLINE is set and what was asked for is not in the cache. */
export class HubOfflineError extends HubError {
  static override readonly code = 'HUB_OFFLINE';
}

/** The hub could not be reached, or a download broke off (the partial file is kept to resume). */
export class HubNetworkError extends HubError {
  static override readonly code = 'HUB_NETWORK';
}

/** A downloaded file's bytes do not match the hash the hub announced (its ETag). */
export class HubIntegrityError extends HubError {
  static override readonly code = 'HUB_INTEGRITY';
}

/** Where a name the hub client refused came from: typed by the user, answered by the hub, or
 * read from a file of the cache (a refs/<revision> file). */
export type HubNameSource = 'user' | 'server' | 'cache';

/** What kind of name it was. */
export type HubNameKind = 'repo id' | 'revision' | 'commit' | 'file name';

/**
 * A repo id, revision, commit or repo file name that breaks huggingface_hub's rules, or would
 * make a path outside the HF cache; refused before any request or write it would lead to.
 * `value` is the name as given, `source` where it came from.
 */
export class HubNameError extends HubError {
  static override readonly code = 'HUB_INVALID_NAME';
  readonly value: string;
  readonly kind: HubNameKind;
  readonly source: HubNameSource;
  constructor(
    message: string,
    fields: { repo: string; value: string; kind: HubNameKind; source: HubNameSource },
    options?: FlowGrpoErrorOptions,
  ) {
    super(message, fields, options);
    this.value = fields.value;
    this.kind = fields.kind;
    this.source = fields.source;
  }
}
