import { HttpRequestError } from './errors.js';
import { createGuardedFetch, policyErrorIn } from './guarded-fetch.js';
import { htmlToText } from './html-to-text.js';
import { DEFAULT_USER_AGENT, type FetchLike, httpRequest } from './http.js';
import { checkUrl, type LookupAll } from './url-policy.js';

export interface FetchPageOptions {
  /**
   * HTTP client. Default: a client that checks every address when it connects (see
   * `createGuardedFetch`), or plain `fetch` with `allowPrivateNetwork`. An injected fetch gets the
   * URL checks of every hop but cannot be checked at connect time.
   */
  fetch?: FetchLike;
  timeoutMs?: number;
  /** Bytes of body read; the rest is dropped (and `truncated` set). Default 2 MiB. */
  maxBytes?: number;
  /** Allow loopback/private/link-local hosts; default false. */
  allowPrivateNetwork?: boolean;
  lookup?: LookupAll;
  maxRedirects?: number;
  userAgent?: string;
  signal?: AbortSignal;
}

export interface WebPage {
  /** The URL finally read, after redirects. */
  url: string;
  title: string;
  text: string;
  contentType: string;
  truncated: boolean;
}

/**
 * Downloads a page and returns its text. Every URL — the first and each redirect target — must
 * pass `checkUrl` (http/https to public addresses unless `allowPrivateNetwork`), and every
 * connection is checked again when it is made (the guarded client), so a DNS answer that changes
 * between the check and the connection cannot reach a private address.
 */
export async function fetchWebPage(
  rawUrl: string,
  options: FetchPageOptions = {},
): Promise<WebPage> {
  const policy = {
    ...(options.allowPrivateNetwork !== undefined && {
      allowPrivateNetwork: options.allowPrivateNetwork,
    }),
    ...(options.lookup && { lookup: options.lookup }),
  };
  const url = (await checkUrl(rawUrl, policy)).href;
  const guarded =
    options.fetch || options.allowPrivateNetwork
      ? undefined
      : createGuardedFetch(options.lookup ? { lookup: options.lookup } : {});
  try {
    return await followRedirects(url, options, policy, guarded ?? options.fetch);
  } catch (error) {
    // A refusal at connect time arrives wrapped in the client's network error.
    throw policyErrorIn(error) ?? error;
  } finally {
    await guarded?.close();
  }
}

async function followRedirects(
  startUrl: string,
  options: FetchPageOptions,
  policy: { allowPrivateNetwork?: boolean; lookup?: LookupAll },
  fetchImpl: FetchLike | undefined,
): Promise<WebPage> {
  const maxRedirects = options.maxRedirects ?? 5;
  let url = startUrl;
  for (let hop = 0; ; hop++) {
    const response = await httpRequest(
      url,
      {
        method: 'GET',
        redirect: 'manual',
        headers: {
          'user-agent': options.userAgent ?? DEFAULT_USER_AGENT,
          accept: 'text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.5',
        },
      },
      {
        maxBytes: options.maxBytes ?? 2 * 1024 * 1024,
        ...(fetchImpl && { fetch: fetchImpl }),
        ...(options.timeoutMs !== undefined && { timeoutMs: options.timeoutMs }),
        ...(options.signal && { signal: options.signal }),
      },
    );
    if (response.status >= 300 && response.status < 400) {
      const location = response.headers.get('location');
      if (!location) {
        throw new HttpRequestError(`HTTP ${response.status} without a Location header`, {
          url,
          status: response.status,
        });
      }
      if (hop >= maxRedirects) {
        throw new HttpRequestError(`Too many redirects (more than ${maxRedirects})`, { url });
      }
      url = (await checkUrl(new URL(location, url).href, policy)).href;
      continue;
    }
    if (response.status < 200 || response.status >= 300) {
      throw new HttpRequestError(`GET ${url} returned HTTP ${response.status}`, {
        url,
        status: response.status,
      });
    }
    const contentType = (response.headers.get('content-type') ?? '').toLowerCase();
    const isHtml = contentType.includes('html') || (!contentType && /^\s*</.test(response.text));
    if (!isHtml && contentType && !contentType.startsWith('text/')) {
      throw new HttpRequestError(`Unsupported content type '${contentType}' (only HTML and text)`, {
        url,
        status: response.status,
      });
    }
    const { title, text } = isHtml ? htmlToText(response.text) : { title: '', text: response.text };
    return { url, title, text, contentType, truncated: response.truncated };
  }
}
