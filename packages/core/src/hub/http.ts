import { HubError, HubGatedError, HubNetworkError, HubNotFoundError } from './errors.js';
import type { HubSettings } from './settings.js';

// The few requests the hub client sends, with the hub's status codes turned into typed errors
// that say what to do (a 401 is a licence to accept and a token to set, not "Unauthorized").

export function authHeaders(settings: HubSettings): Record<string, string> {
  return settings.token ? { authorization: `Bearer ${settings.token}` } : {};
}

/** fetch(), with a failure to connect as a HubNetworkError naming the endpoint. */
export async function hubFetch(
  url: string,
  init: RequestInit,
  repo: string,
  settings: HubSettings,
): Promise<Response> {
  try {
    return await fetch(url, init);
  } catch (cause) {
    const why = (cause as { cause?: { code?: string; message?: string } }).cause;
    throw new HubNetworkError(
      `could not reach the hub at ${settings.endpoint} for ${repo}: ${why?.code ?? why?.message ?? (cause as Error).message}`,
      { repo },
      {
        cause,
        hint: 'check the network (or HF_ENDPOINT); to use only what is cached, set HF_HUB_OFFLINE=1',
      },
    );
  }
}

/** Throws the typed error for a non-success status; `what` names what was asked for. */
export function checkStatus(
  res: Response,
  repo: string,
  what: string,
  settings: HubSettings,
): void {
  if (res.ok || (res.status >= 300 && res.status < 400)) return;
  const page = `${settings.endpoint}/${repo}`;
  if (res.status === 401 || res.status === 403)
    throw new HubGatedError(
      `${repo} is gated or private: the hub refused ${what} (HTTP ${res.status}${settings.token ? ', with the token in HF_TOKEN' : ', no HF_TOKEN set'})`,
      { repo },
      { hint: `accept the licence at ${page} and set HF_TOKEN to a token of that account` },
    );
  if (res.status === 404)
    throw new HubNotFoundError(
      `${what} not found on the hub (${settings.endpoint}): no such repo, revision or file`,
      { repo },
      {
        hint: `check the name and revision at ${page} (a private repo also answers 404 without HF_TOKEN)`,
      },
    );
  throw new HubError(
    `the hub answered HTTP ${res.status} for ${what}`,
    { repo },
    {
      hint: 'try again later; if it persists, check HF_ENDPOINT',
    },
  );
}
