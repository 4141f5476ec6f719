import { lookup as dnsLookup } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';
import { UrlPolicyError } from './errors.js';

// Addresses a tool must not reach on a user's behalf unless explicitly allowed: loopback,
// private (RFC 1918, ULA), link-local (incl. cloud metadata 169.254.169.254), CGNAT, unspecified,
// multicast, and reserved/documentation ranges.
const blocked = new BlockList();
for (const [net, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const) {
  blocked.addSubnet(net, prefix, 'ipv4');
}
for (const [net, prefix] of [
  ['::', 128],
  ['::1', 128],
  ['fc00::', 7],
  ['fe80::', 10],
  ['fec0::', 10],
  ['ff00::', 8],
  ['2001:db8::', 32],
  ['100::', 64],
] as const) {
  blocked.addSubnet(net, prefix, 'ipv6');
}

/** The IPv4 address embedded in an IPv4-mapped (::ffff:a.b.c.d), -compatible or NAT64 address. */
function embeddedIPv4(address: string): string | undefined {
  const lower = address.toLowerCase();
  const dotted = /^(?:::ffff:|::|64:ff9b::)(\d+\.\d+\.\d+\.\d+)$/.exec(lower);
  if (dotted) return dotted[1];
  const hex = /^(?:::ffff:|64:ff9b::)([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(lower);
  if (hex) {
    const hi = Number.parseInt(hex[1]!, 16);
    const lo = Number.parseInt(hex[2]!, 16);
    return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
  }
  return undefined;
}

/** True for loopback, private, link-local, unspecified, multicast and reserved addresses. */
export function isPrivateAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return blocked.check(address, 'ipv4');
  if (family === 6) {
    const v4 = embeddedIPv4(address);
    if (v4 !== undefined) return blocked.check(v4, 'ipv4');
    return blocked.check(address, 'ipv6');
  }
  return true;
}

export type LookupAll = (hostname: string) => Promise<{ address: string; family: number }[]>;

export interface UrlPolicyOptions {
  /** Allow loopback/private/link-local targets (tests, intranet deployments). Default false. */
  allowPrivateNetwork?: boolean;
  /** Resolver; default `dns.lookup(host, { all: true })`. */
  lookup?: LookupAll;
}

const defaultLookup: LookupAll = (hostname) => dnsLookup(hostname, { all: true, verbatim: true });

/**
 * Parses `raw` and refuses it unless it is http(s) and every address its host resolves to is
 * public. The check happens before the request; a host that changes its DNS answer between the
 * check and the connection (DNS rebinding) is not caught.
 */
export async function checkUrl(raw: string, options: UrlPolicyOptions = {}): Promise<URL> {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new UrlPolicyError(`Not a valid URL: ${raw}`, { url: raw });
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new UrlPolicyError(`Only http and https URLs are allowed, got ${url.protocol}`, {
      url: raw,
    });
  }
  if (url.username || url.password) {
    throw new UrlPolicyError('URLs with credentials are not allowed', { url: raw });
  }
  if (options.allowPrivateNetwork) return url;
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  let addresses: string[];
  if (isIP(host)) {
    addresses = [host];
  } else {
    try {
      addresses = (await (options.lookup ?? defaultLookup)(host)).map((a) => a.address);
    } catch (error) {
      throw new UrlPolicyError(
        `Cannot resolve host ${host}: ${error instanceof Error ? error.message : String(error)}`,
        { url: raw },
      );
    }
  }
  const bad = addresses.filter(isPrivateAddress);
  if (addresses.length === 0 || bad.length > 0) {
    throw new UrlPolicyError(
      `Refusing ${url.origin}: it resolves to a private, loopback or link-local address (${bad.join(', ') || 'none'})`,
      { url: raw, addresses },
    );
  }
  return url;
}
