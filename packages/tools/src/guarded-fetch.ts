import { isIP } from 'node:net';
import { Agent, buildConnector, fetch as undiciFetch } from 'undici';
import { UrlPolicyError } from './errors.js';
import type { FetchLike } from './http.js';
import { defaultLookup, isPrivateAddress, type LookupAll } from './url-policy.js';

// The network policy at connect time. `checkUrl` refuses a URL early with a clear message, but
// the address it checked is not necessarily the one a later connection uses: the HTTP client
// resolves the name again, and a hostile DNS server can answer "public" to the check and
// "127.0.0.1" to the connection (DNS rebinding). Here the connector itself resolves the name,
// checks every address, and connects to a checked address — the name is never resolved twice.

export interface GuardedFetchOptions {
  /** Resolver; default `dns.lookup(host, { all: true })`. */
  lookup?: LookupAll;
  /**
   * True for an address that must not be connected to; default `isPrivateAddress` (loopback,
   * private, link-local, CGNAT, multicast, reserved, and IPv6 forms embedding those).
   */
  isBlocked?: (address: string) => boolean;
  /** Connect timeout per address (default 10 s). */
  connectTimeoutMs?: number;
}

export interface GuardedFetch extends FetchLike {
  /** Closes the client's connections at once (requests still running fail). */
  close(): Promise<void>;
}

type Connector = ReturnType<typeof buildConnector>;

/** The undici connector that checks and pins every address it connects to. */
export function guardedConnector(options: GuardedFetchOptions = {}): Connector {
  const lookup = options.lookup ?? defaultLookup;
  const isBlocked = options.isBlocked ?? isPrivateAddress;
  const base = buildConnector({ timeout: options.connectTimeoutMs ?? 10_000 });
  return (connectOptions, callback) => {
    const host = connectOptions.hostname.replace(/^\[(.*)\]$/, '$1');
    const refuse = (addresses: string[], bad: string[]) =>
      callback(
        new UrlPolicyError(
          `Refusing to connect to ${host}: it resolves to a private, loopback or link-local address (${bad.join(', ') || 'none'})`,
          { url: `${connectOptions.protocol}//${connectOptions.hostname}`, addresses },
        ),
        null,
      );
    const resolved: Promise<string[]> = isIP(host)
      ? Promise.resolve([host])
      : lookup(host).then((answers) => answers.map((a) => a.address));
    resolved.then(
      (addresses) => {
        const bad = addresses.filter(isBlocked);
        if (addresses.length === 0 || bad.length > 0) {
          refuse(addresses, bad);
          return;
        }
        // Connect to the checked addresses in turn; TLS still verifies the certificate against
        // the name (servername), so pinning the address changes nothing else.
        const tryAddress = (i: number, lastError?: Error): void => {
          const address = addresses[i];
          if (address === undefined) {
            callback(lastError ?? new Error(`cannot connect to ${host}`), null);
            return;
          }
          base(
            {
              ...connectOptions,
              hostname: address,
              servername: connectOptions.servername ?? (isIP(host) ? undefined : host),
            },
            (error, socket) => {
              if (error) tryAddress(i + 1, error);
              else callback(null, socket);
            },
          );
        };
        tryAddress(0);
      },
      (error: unknown) =>
        callback(
          new UrlPolicyError(
            `Cannot resolve host ${host}: ${error instanceof Error ? error.message : String(error)}`,
            { url: `${connectOptions.protocol}//${connectOptions.hostname}` },
          ),
          null,
        ),
    );
  };
}

/**
 * A `fetch` whose every connection goes only to addresses that pass the policy, checked when the
 * connection is made (so DNS rebinding cannot slip a private address in after `checkUrl`).
 * Redirects are not followed by it (`redirect: 'manual'` is forced): the caller checks each hop.
 */
export function createGuardedFetch(options: GuardedFetchOptions = {}): GuardedFetch {
  const agent = new Agent({ connect: guardedConnector(options) });
  const guarded = (async (url: string, init?: RequestInit) => {
    const response = await undiciFetch(url, {
      ...(init as Record<string, unknown>),
      redirect: 'manual',
      dispatcher: agent,
    } as Parameters<typeof undiciFetch>[1]);
    return response as unknown as Response;
  }) as GuardedFetch;
  guarded.close = () => agent.destroy();
  return guarded;
}

/** The refusal inside a fetch error (undici wraps connector errors in `TypeError: fetch failed`). */
export function policyErrorIn(error: unknown): UrlPolicyError | undefined {
  for (let e = error, depth = 0; e && depth < 5; depth++) {
    if (UrlPolicyError.isInstance(e)) return e;
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}
