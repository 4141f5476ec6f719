import { FlowGrpoError } from '@flowgrpo/core';

// Preflight's check of the servers a run will call — the Flow roles' and tools' engine
// (agent.engine), the judge, the remote rollout servers — before anything is built: one real
// request to each (GET <base_url>/models, which vLLM, SGLang, Ollama, llama.cpp's llama-server
// and OpenAI all serve) with a short timeout. Without it a run whose server is down passes
// `--dry-run` and then fails every rollout.

/** A server the run will call, under the config key that names it. */
export interface EndpointUse {
  /** 'agent.engine', 'judge', 'rollout.base_urls'. */
  key: string;
  baseUrl: string;
  /** The API key to send (from the variable the config names), when there is one. */
  apiKey?: string | undefined;
  /** What to do besides starting the server (e.g. how to run without it). */
  alternative?: string;
}

/** A server a run needs did not answer (refused, timed out, or answered with an error status). */
export class EndpointUnreachableError extends FlowGrpoError {
  static override readonly code = 'ENDPOINT_UNREACHABLE';
  /** The config keys that name the server. */
  readonly keys: readonly string[];
  readonly url: string;
  /** The HTTP status when the server answered with an error; undefined when nothing answered. */
  readonly status: number | undefined;
  constructor(
    message: string,
    fields: { keys: readonly string[]; url: string; status?: number | undefined },
    options?: { hint?: string; cause?: unknown },
  ) {
    super(message, options);
    this.keys = fields.keys;
    this.url = fields.url;
    this.status = fields.status;
  }
}

/** The default wait for a server's answer: a local server answers in milliseconds. */
export const ENDPOINT_TIMEOUT_MS = 5000;

/** The socket error's code under a fetch error (its causes, an AggregateError's errors). */
function errorCode(e: unknown, depth = 0): string | undefined {
  if (typeof e !== 'object' || e === null || depth > 5) return undefined;
  const { code, cause, errors } = e as { code?: unknown; cause?: unknown; errors?: unknown };
  if (typeof code === 'string' && /^E[A-Z_]+$/.test(code)) return code;
  for (const inner of [cause, ...(Array.isArray(errors) ? errors : [])]) {
    const found = errorCode(inner, depth + 1);
    if (found) return found;
  }
  return undefined;
}

/** Why a fetch failed, in words: the socket error's code when there is one. */
function failure(e: unknown, timeoutMs: number): string {
  if (e instanceof Error && (e.name === 'TimeoutError' || e.name === 'AbortError'))
    return `no answer within ${timeoutMs / 1000} s`;
  const code = errorCode(e);
  if (code === 'ECONNREFUSED') return 'connection refused';
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return 'host not found';
  if (typeof code === 'string') return code;
  return e instanceof Error ? e.message : String(e);
}

function fixFor(status: number | undefined, url: string, alternative: string | undefined): string {
  const or = alternative ? `, or ${alternative}` : '';
  if (status === undefined)
    return `start the server at ${url} (e.g. vllm serve <model> --port N), or fix base_url${or}`;
  if (status === 401 || status === 403)
    return `check the API key for ${url} (api_key_env names the variable that holds it)`;
  if (status === 404) return `check base_url: ${url} has no /models (it usually ends in /v1)`;
  return `the server at ${url} is failing (HTTP ${status}): check its log${or}`;
}

/**
 * One GET <base_url>/models per distinct server in `uses`; an EndpointUnreachableError, naming
 * the keys and the URL with the fix, for each that does not answer with a 2xx in `timeoutMs`.
 */
export async function checkEndpoints(
  uses: readonly EndpointUse[],
  o: { timeoutMs?: number } = {},
): Promise<EndpointUnreachableError[]> {
  const timeoutMs = o.timeoutMs ?? ENDPOINT_TIMEOUT_MS;
  const byUrl = new Map<string, EndpointUse[]>();
  for (const use of uses) {
    const url = use.baseUrl.replace(/\/+$/, '');
    byUrl.set(url, [...(byUrl.get(url) ?? []), use]);
  }
  const checks = [...byUrl].map(async ([url, group]) => {
    const keys = [...new Set(group.map((u) => u.key))];
    const apiKey = group.find((u) => u.apiKey)?.apiKey;
    const alternative = group.find((u) => u.alternative)?.alternative;
    const fail = (why: string, status?: number, cause?: unknown) =>
      new EndpointUnreachableError(
        `${url} did not answer GET /models (${why})`,
        { keys, url, status },
        { hint: fixFor(status, url, alternative), cause },
      );
    try {
      const r = await fetch(`${url}/models`, {
        headers: apiKey ? { authorization: `Bearer ${apiKey}` } : {},
        signal: AbortSignal.timeout(timeoutMs),
      });
      await r.body?.cancel();
      return r.ok ? undefined : fail(`HTTP ${r.status}`, r.status);
    } catch (e) {
      return fail(failure(e, timeoutMs), undefined, e);
    }
  });
  return (await Promise.all(checks)).filter((e) => e !== undefined);
}
