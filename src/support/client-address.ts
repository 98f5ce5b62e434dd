// Which address a request comes from, as the per-address limits count it. X-Forwarded-For is written
// left to right: the client may put anything in it, and each proxy appends the address it received the
// request from. So only the hops the configured proxies appended, counted from the right, can be trusted;
// the left-most hop is whatever the client chose.
import type { IncomingMessage } from 'node:http';
import { BlockList, isIP } from 'node:net';
import proxyaddr from 'proxy-addr';

export interface ProxyTrust {
  /** Proxies in front of the listener: the client is this many hops from the right (0: ignore the header). */
  hops: number;
  /** When set, proxies are recognised by address instead of counted (see clientAddress). */
  proxies?: BlockList;
  /**
   * With `hops`: the direct peers that may be the last proxy (TRUST_PROXY_PEERS, by default loopback and
   * private ranges). From any other peer the header is ignored: with no proxy in front, a hop count
   * would let every client choose its own address (and spend someone else's failure budget).
   */
  peers?: BlockList;
  /** Called when a request carries X-Forwarded-For that is ignored because its peer is no trusted proxy. */
  onUntrustedPeer?: (peer: string) => void;
}

/** Where a proxy in front of the service usually sits: loopback, private, CGNAT, link-local, ULA. */
export const PRIVATE_RANGES = '127.0.0.0/8,10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,100.64.0.0/10,169.254.0.0/16,::1/128,fc00::/7,fe80::/10';

export const NO_PROXY: ProxyTrust = { hops: 0 };

/**
 * Only the header's tail is read: each trusted proxy appends one short address, so anything beyond the
 * last 1 KiB (or 16 hops) is the client's own text, and a 60 KB value costs no more than a short one.
 */
export const MAX_FORWARDED_CHARS = 1024;
export const MAX_FORWARDED_HOPS = 16;

export interface ParsedIp {
  family: 4 | 6;
  /** Dotted IPv4 (also for IPv4-mapped IPv6), or the IPv6 text as given (zone removed). */
  address: string;
  /** The eight 16-bit groups of an IPv6 address. */
  hextets?: number[];
}

/**
 * A bare IP address or nothing: no brackets, no ports, no names. An IPv6 zone (`%eth0`) is dropped;
 * IPv4-mapped IPv6 (`::ffff:192.0.2.1`, as dual-stack sockets report IPv4 peers) becomes IPv4.
 */
export function parseIp(text: string): ParsedIp | undefined {
  let candidate = text.trim();
  if (candidate.length === 0 || candidate.length > 64) return undefined;
  if (candidate.includes(':')) candidate = candidate.replace(/%[^%]*$/, '');
  const family = isIP(candidate);
  if (family === 4) return { family, address: candidate };
  if (family !== 6) return undefined;
  const hextets = expandIpv6(candidate.toLowerCase());
  if (hextets.slice(0, 5).every((h) => h === 0) && hextets[5] === 0xffff) {
    const [hi, lo] = [hextets[6], hextets[7]];
    return { family: 4, address: `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}` };
  }
  return { family: 6, address: candidate.toLowerCase(), hextets };
}

/** Groups of an address already validated by isIP (one `::` at most, optional dotted IPv4 tail). */
function expandIpv6(address: string): number[] {
  const groups = (part: string): number[] =>
    part === ''
      ? []
      : part.split(':').flatMap((group) => {
          if (!group.includes('.')) return [parseInt(group, 16)];
          const [a, b, c, d] = group.split('.').map(Number);
          return [(a << 8) | b, (c << 8) | d];
        });
  const [head, tail] = address.split('::');
  if (tail === undefined) return groups(head);
  const left = groups(head);
  const right = groups(tail);
  return [...left, ...new Array<number>(8 - left.length - right.length).fill(0), ...right];
}

/**
 * The key the per-address limits count under. An IPv6 client typically holds a whole /64 (SLAAC,
 * privacy addresses), so counting single IPv6 addresses would give it 2^64 budgets: count the /64.
 */
export function addressKey(ip: ParsedIp): string {
  if (ip.family === 4 || !ip.hextets) return ip.address;
  return `${ip.hextets.slice(0, 4).map((h) => h.toString(16)).join(':')}::/64`;
}

/**
 * The client's address key: the forwarded hop the configuration trusts when it is a valid IP address,
 * else the socket peer's. The header is read only from a peer in `proxies` (when set), else in `peers`
 * (when set).
 * - `proxies` set: the header is read only when the peer is one of the proxies; walking from the right,
 *   hops inside the proxy ranges are skipped and the first one outside them is the client.
 * - else `hops` = N: the N-th hop from the right (the left-most when there are fewer, as a chain shorter
 *   than configured leaves nothing better).
 */
export function clientAddress(forwardedFor: string, socketAddress: string, trust: ProxyTrust): string {
  const socket = parseIp(socketAddress);
  const forwarded = forwardedFor ? forwardedHop(forwardedFor, socket, trust) : undefined;
  if (forwarded) return addressKey(forwarded);
  // The peer address comes from the kernel; it is short and never attacker-chosen text.
  return socket ? addressKey(socket) : socketAddress;
}

/**
 * The walk itself is proxy-addr's (what Express and Fastify use): the peer and the hops from the right are
 * handed to its trust function until one is not trusted. Here the trust function is the configuration:
 * the peer must be a proxy (`proxies`) or an allowed peer (`peers`), then either the next `hops - 1` hops
 * are trusted, or every hop inside the proxy ranges. Only the header's tail is handed over.
 */
function forwardedHop(header: string, socket: ParsedIp | undefined, trust: ProxyTrust): ParsedIp | undefined {
  if (!trust.proxies && trust.hops <= 0) return undefined;
  const from = trust.proxies ?? trust.peers;
  if (from && !(socket && isProxy(from, socket))) {
    trust.onUntrustedPeer?.(socket?.address ?? '');
    return undefined;
  }
  const cut = header.length > MAX_FORWARDED_CHARS;
  const hops = (cut ? header.slice(-MAX_FORWARDED_CHARS) : header).split(',');
  if (cut) hops.shift(); // the first piece may be half a hop
  const tail = hops.slice(-MAX_FORWARDED_HOPS).join(',');
  if (tail.trim() === '') return undefined;
  const { proxies, hops: trustedHops } = trust;
  const trusted: (address: string, index: number) => boolean = proxies
    ? (address, index) => {
        if (index === 0) return true; // the peer, checked above
        const hop = parseIp(address);
        return hop !== undefined && isProxy(proxies, hop);
      }
    : (_address, index) => index < trustedHops;
  // proxy-addr's list is [peer, nearest hop, ..., the hop it stopped at].
  const walked = proxyaddr.all({ headers: { 'x-forwarded-for': tail }, connection: { remoteAddress: socket?.address } } as unknown as IncomingMessage, trusted);
  const client = walked.length > 1 ? parseIp(walked[walked.length - 1]!) : undefined;
  if (client || !proxies) return client;
  // Not an address: the client's own text, so the last proxy-range hop read (if any) is the client.
  return walked.length > 2 ? parseIp(walked[walked.length - 2]!) : undefined;
}

function isProxy(proxies: BlockList, ip: ParsedIp): boolean {
  return proxies.check(ip.address, ip.family === 4 ? 'ipv4' : 'ipv6');
}

/**
 * TRUST_PROXY_CIDRS: comma-separated addresses or ranges (`10.0.0.0/8`, `fd00::/8`, `192.0.2.7`).
 * Returns the list, or the entries that are not valid.
 */
export function parseProxyList(text: string): { proxies: BlockList | undefined; invalid: string[] } {
  const entries = text.split(',').map((e) => e.trim()).filter((e) => e.length > 0);
  if (entries.length === 0) return { proxies: undefined, invalid: [] };
  const proxies = new BlockList();
  const invalid: string[] = [];
  for (const entry of entries) {
    const [address, prefixText, extra] = entry.split('/');
    const ip = extra === undefined && !address.includes('%') ? parseIp(address) : undefined;
    const maxPrefix = ip?.family === 4 ? 32 : 128;
    const prefix = prefixText === undefined ? maxPrefix : /^\d{1,3}$/.test(prefixText) ? Number(prefixText) : -1;
    // An IPv4-mapped range would be ambiguous: ask for the IPv4 spelling.
    if (!ip || prefix < 0 || prefix > maxPrefix || (ip.family === 4 && address.includes(':'))) {
      invalid.push(entry);
      continue;
    }
    proxies.addSubnet(ip.address, prefix, ip.family === 4 ? 'ipv4' : 'ipv6');
  }
  return { proxies, invalid };
}
