import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';

// The environment variables Python's huggingface_hub reads, read the same way, so a model that
// `huggingface-cli download` fetched is found here and the other way round.

export interface HubSettings {
  /** Base URL of the hub (HF_ENDPOINT; default https://huggingface.co), no trailing slash. */
  endpoint: string;
  /** The cache folder holding `models--org--name/` (HF_HUB_CACHE, else $HF_HOME/hub). */
  cacheDir: string;
  /**
   * Bearer token: HF_TOKEN, else the file `hf auth login` / `huggingface-cli login` writes
   * (HF_TOKEN_PATH, default $HF_HOME/token), as huggingface_hub reads them.
   */
  token: string | undefined;
  /** HF_HUB_OFFLINE: serve from the cache only, never send a request. */
  offline: boolean;
}

const TRUE = new Set(['1', 'true', 'yes', 'on']);

/** The hub settings in `env` (process.env by default), with huggingface_hub's defaults. */
export function hubSettings(env: NodeJS.ProcessEnv = process.env): HubSettings {
  const xdg = env.XDG_CACHE_HOME || join(homedir(), '.cache');
  const home = resolve(env.HF_HOME || join(xdg, 'huggingface'));
  const cacheDir = resolve(env.HF_HUB_CACHE || env.HUGGINGFACE_HUB_CACHE || join(home, 'hub'));
  const endpoint = (env.HF_ENDPOINT || 'https://huggingface.co').replace(/\/+$/, '');
  return {
    endpoint,
    cacheDir,
    token:
      env.HF_TOKEN ||
      env.HUGGING_FACE_HUB_TOKEN ||
      storedToken(resolve(env.HF_TOKEN_PATH || join(home, 'token'))),
    offline: TRUE.has((env.HF_HUB_OFFLINE ?? '').toLowerCase()),
  };
}

/** The token a login left in `path`, trimmed; none when the file is missing, unreadable or empty. */
function storedToken(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8').trim() || undefined;
  } catch {
    return undefined;
  }
}
