import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { FileNotFoundError, type FlowGrpoErrorOptions } from '../errors.js';
import { downloadHubDataset, type HubDatasetOptions } from './dataset.js';
import {
  HubError,
  HubGatedError,
  HubNameError,
  HubNetworkError,
  HubNotFoundError,
  HubOfflineError,
} from './errors.js';
import { downloadHubModel, downloadHubTokenizer } from './model.js';
import { parseHubRepoId } from './repo-id.js';
import type { HubOptions } from './snapshot.js';

// Where a model or data file named by the user is: a path that exists locally always wins (a
// folder called Qwen/Qwen2.5-0.5B in the working directory is that folder); otherwise a name of
// the form org/name[@revision] is fetched from the hub into the HF cache; anything else is a
// missing file.

export interface ResolveOptions {
  /** Folder relative paths resolve against (default process.cwd()). */
  cwd?: string | undefined;
  /** Names the option or key in errors ("--model", "train_file"). */
  what?: string | undefined;
}

/** True when `text` would be looked up on the hub: no local path of that name, and org/name form. */
export function isHubName(text: string, cwd: string = process.cwd()): boolean {
  return !existsSync(resolve(cwd, text)) && parseHubRepoId(text) !== undefined;
}

function missing(path: string, what: string, example: string): FileNotFoundError {
  return new FileNotFoundError(path, {
    hint: `check ${what}: a local path (relative to the working directory), or a hub name such as ${example}`,
  });
}

/**
 * A name that is no local path and that the hub did not find, refused (401 is also what it
 * answers for a repo that does not exist), could not be asked for (unreachable, offline) or
 * could not take (an invalid revision): the same error (class, code, fields) said again with
 * both sides — nothing of that name in `cwd`, and what the hub answered —, since the user may
 * have meant either (a checkpoint folder sft/checkpoint-80 looks like a hub name). Errors about
 * a repo the hub did serve (no such split, wrong bytes) are left as they are. Every HubError
 * class takes (message, fields, options), and the error itself holds its fields.
 */
function neitherLocalNorHub(
  e: unknown,
  local: string,
  cwd: string,
  name: string,
  kind: string,
): unknown {
  const either = [HubNotFoundError, HubGatedError, HubNetworkError, HubOfflineError, HubNameError];
  if (!HubError.isInstance(e) || !either.some((c) => c.isInstance(e))) return e;
  const here = `no ${local}; relative paths resolve against ${cwd}`;
  const absent: boolean = HubNotFoundError.isInstance(e);
  const message = absent
    ? `${name} is neither a local path (${here}) nor a ${kind} on the hub (${e.message})`
    : `${name} is not a local path (${here}), and as a hub ${kind} name: ${e.message}`;
  const Same = e.constructor as new (
    message: string,
    fields: HubError,
    options: FlowGrpoErrorOptions,
  ) => HubError;
  return new Same(message, e, {
    cause: e,
    hint: `if you meant a local folder, check the path; if a hub name: ${e.hint ?? 'check it'}`,
  });
}

/**
 * A model folder: `nameOrPath` itself when it exists, else the hub model's snapshot folder.
 * `tokenizerOnly`: the hub model's tokenizer files only, not its weights.
 */
export async function resolveModelSource(
  nameOrPath: string,
  options: ResolveOptions & HubOptions & { tokenizerOnly?: boolean | undefined } = {},
): Promise<string> {
  const cwd = options.cwd ?? process.cwd();
  const local = resolve(cwd, nameOrPath);
  if (existsSync(local)) return local;
  if (!parseHubRepoId(nameOrPath))
    throw missing(local, options.what ?? 'the model path', 'Qwen/Qwen2.5-0.5B-Instruct');
  const download = options.tokenizerOnly ? downloadHubTokenizer : downloadHubModel;
  try {
    return (await download(nameOrPath, options)).dir;
  } catch (e) {
    throw neitherLocalNorHub(e, local, cwd, nameOrPath, 'model');
  }
}

/**
 * A data file: `nameOrPath` itself when it exists, else the hub data set's split file. A split
 * stored in several files (shards) is refused: the trainer reads one file.
 */
export async function resolveDataSource(
  nameOrPath: string,
  options: ResolveOptions & HubDatasetOptions = {},
): Promise<string> {
  const cwd = options.cwd ?? process.cwd();
  const local = resolve(cwd, nameOrPath);
  if (existsSync(local)) return local;
  if (!parseHubRepoId(nameOrPath))
    throw missing(local, options.what ?? 'the data file', 'openai/gsm8k');
  const ds = await downloadHubDataset(nameOrPath, options).catch((e: unknown) => {
    throw neitherLocalNorHub(e, local, cwd, nameOrPath, 'data set');
  });
  if (ds.paths.length > 1)
    throw new HubError(
      `${ds.repo} split '${options.split ?? 'train'}' is stored in ${ds.paths.length} files (${ds.files.join(', ')}); ${options.what ?? 'a data file'} names one file`,
      { repo: ds.repo },
      {
        hint: `they are downloaded to ${ds.dir}: combine them with flowgrpo data prepare, or name one of them`,
      },
    );
  return ds.paths[0] as string;
}
