import { lookup as dnsLookup } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';
import { UrlPolicyError } from './errors.js';

// Addresses a tool must not reach on a user's behalf unless explicitly allowed: loopback,
// private (RFC 1918), link-local (incl. cloud metadata 169.254.169.254), CGNAT, unspecified,
// multicast, and reserved/documentation ranges.
const blockedV4 = new BlockList();
for (const [net, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.88.99.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const) {
  blockedV4.addSubnet(net, prefix, 'ipv4');
}

// IPv6 ranges refused outright (prefix as 8 hextets, prefix length in bits). Ranges that embed an
// IPv4 address are not here: they are decoded and the IPv4 address is judged instead.
const BLOCKED_V6: readonly (readonly [string, number])[] = [
  ['fc00::', 7], // unique local
  ['fe80::', 10], // link-local
  ['fec0::', 10], // site-local (deprecated)
  ['ff00::', 8], // multicast
  ['2001:db8::', 32], // documentation
  ['3fff::', 20], // documentation (RFC 9637)
  ['100::', 64], // discard-only
  ['2001::', 32], // Teredo: the client's IPv4 address is obfuscated, so the whole range is refused
  ['2001:10::', 28], // ORCHID
  ['2001:20::', 28], // ORCHIDv2
  ['64:ff9b:1::', 48], // local-use NAT64 (RFC 8215): translates to any IPv4 the site chooses
  ['5f00::', 16], // SRv6 SIDs
];

/** The 8 hextets of an IPv6 address (`::` expanded, a trailing dotted quad converted). */
export function parseIPv6(address: string): number[] | undefined {
  let text = address.toLowerCase();
  const zone = text.indexOf('%');
  if (zone >= 0) text = text.slice(0, zone);
  if (isIP(text) !== 6) return undefined;
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.includes('::') ? text.split('::') : [text, undefined];
  const parse = (part: string | undefined) =>
    part ? part.split(':').map((h) => Number.parseInt(h, 16)) : [];
  const left = parse(head);
  const right = parse(tail);
  if (tail === undefined) return left.length === 8 ? left : undefined;
  return [...left, ...new Array<number>(8 - left.length - right.length).fill(0), ...right];
}

function inPrefix(hextets: readonly number[], prefix: string, bits: number): boolean {
  const net = parseIPv6(prefix)!;
  for (let i = 0; bits > 0; i++, bits -= 16) {
    const mask = bits >= 16 ? 0xffff : (0xffff << (16 - bits)) & 0xffff;
    if ((hextets[i]! & mask) !== (net[i]! & mask)) return false;
  }
  return true;
}

const v4 = (hi: number, lo: number) => `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;

/**
 * The IPv4 address an IPv6 address carries, for every form that routes to (or is treated by
 * some stack as) that IPv4 host: IPv4-compatible `::a.b.c.d` (::/96, `::1` included),
 * IPv4-mapped `::ffff:a.b.c.d`, IPv4-translated `::ffff:0:a.b.c.d`, NAT64 `64:ff9b::a.b.c.d`
 * and 6to4 `2002:AABB:CCDD::` (the IPv4 address in bits 16–48).
 */
export function embeddedIPv4(address: string): string | undefined {
  const h = parseIPv6(address);
  if (!h) return undefined;
  const zeros = (n: number) => h.slice(0, n).every((x) => x === 0);
  if (zeros(6)) return v4(h[6]!, h[7]!);
  if (zeros(5) && h[5] === 0xffff) return v4(h[6]!, h[7]!);
  if (zeros(4) && h[4] === 0xffff && h[5] === 0) return v4(h[6]!, h[7]!);
  if (inPrefix(h, '64:ff9b::', 96)) return v4(h[6]!, h[7]!);
  if (h[0] === 0x2002) return v4(h[1]!, h[2]!);
  return undefined;
}

/**
 * True for loopback, private, link-local, CGNAT, unspecified, multicast and reserved addresses,
 * IPv4 or IPv6, including IPv6 forms that embed such an IPv4 address. Anything that is not an
 * IP address counts as private (refused).
 */
export function isPrivateAddress(address: string): boolean {
  const family = isIP(address.replace(/%.*$/, ''));
  if (family === 4) return blockedV4.check(address, 'ipv4');
  if (family === 6) {
    const embedded = embeddedIPv4(address);
    if (embedded !== undefined) return blockedV4.check(embedded, 'ipv4');
    const h = parseIPv6(address);
    if (!h) return true;
    return BLOCKED_V6.some(([net, bits]) => inPrefix(h, net, bits));
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

/** `dns.lookup(host, { all: true })` in the resolver's own order. */
export const defaultLookup: LookupAll = (hostname) =>
  dnsLookup(hostname, { all: true, verbatim: true });

/**
 * Parses `raw` and refuses it unless it is http(s) and every address its host resolves to is
 * public. This is the early check (a clear error before any request); the connection itself is
 * checked again, address by address, by `createGuardedFetch`, which is what stops a host that
 * changes its DNS answer between this check and the connection (DNS rebinding).
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
