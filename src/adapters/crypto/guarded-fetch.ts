// Fetching a JWK Set from a URI an operator registered (an agent's or a workload issuer's jwks_uri) without
// turning the service into a way into the network it runs in: https only (plain http and loopback hosts
// only when the operator allows them, for development and tests), every address the name resolves to
// checked against private, loopback, link-local and other special ranges *at connection time* (the
// resolver's answer is the one connected to: no rebinding between check and connect), no redirects, a JSON
// media type, a time bound and a size bound. Shaped as jose's FetchImplementation (createRemoteJWKSet's customFetch).
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import { BlockList, isIP, type LookupFunction } from 'node:net';

export interface GuardedFetchOptions {
  /** Allow http:// and loopback addresses (127.0.0.0/8, ::1): development and tests only. */
  allowLoopback: boolean;
  /** Allow private and special ranges (10/8, 172.16/12, 192.168/16, fc00::/7, link-local, CGNAT, ...). */
  allowPrivate: boolean;
  timeoutMs: number;
  maxBytes: number;
}

const LOOPBACK = new BlockList();
LOOPBACK.addSubnet('127.0.0.0', 8, 'ipv4');
LOOPBACK.addAddress('::1', 'ipv6');

// Addresses no public JWKS lives at (RFC 6890 special-purpose registries, the parts that matter here).
const SPECIAL = new BlockList();
for (const [net, prefix] of [
  ['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['169.254.0.0', 16], ['172.16.0.0', 12], ['192.0.0.0', 24],
  ['192.0.2.0', 24], ['192.168.0.0', 16], ['198.18.0.0', 15], ['198.51.100.0', 24], ['203.0.113.0', 24], ['224.0.0.0', 4], ['240.0.0.0', 4],
] as const) SPECIAL.addSubnet(net, prefix, 'ipv4');
// The IPv6 ranges that carry or reach an IPv4 address (IPv4-compatible ::/96, SIIT ::ffff:0:0:0/96, 6to4,
// Teredo, NAT64) could lead to any private IPv4 one: refused whole.
for (const [net, prefix] of [
  ['::', 96], ['::ffff:0:0:0', 96], ['64:ff9b::', 96], ['64:ff9b:1::', 48], ['100::', 64], ['2001::', 32], ['2001:db8::', 32], ['2002::', 16],
  ['fc00::', 7], ['fec0::', 10], ['fe80::', 10], ['ff00::', 8],
] as const) SPECIAL.addSubnet(net, prefix, 'ipv6');

// Refused whatever the operator allows: "this network" 0.0.0.0/8 and the unspecified ::, which a connect
// turns into the host itself (loopback, behind the loopback switch), and the deprecated IPv4-compatible
// ::/96 (RFC 4291 §2.5.5.1), which no public JWKS uses.
const NEVER = new BlockList();
NEVER.addSubnet('0.0.0.0', 8, 'ipv4');
NEVER.addSubnet('::', 96, 'ipv6');

// IPv6 forms that carry an IPv4 address (SIIT ::ffff:0:0:0/96, NAT64 64:ff9b::/96 and 64:ff9b:1::/48 in
// the last 32 bits; 6to4 2002::/16 in bits 16-47): the IPv4 address they reach, to refuse what it refuses.
function embeddedIpv4(address: string): string | undefined {
  if (isIP(address) !== 6) return undefined;
  const groups = expandIpv6(address);
  const v4 = (high: number, low: number) => [high >> 8, high & 255, low >> 8, low & 255].join('.');
  const zero = (from: number, to: number) => groups.slice(from, to).every((g) => g === 0);
  if (zero(0, 4) && groups[4] === 0xffff && groups[5] === 0) return v4(groups[6]!, groups[7]!);
  if (groups[0] === 0x64 && groups[1] === 0xff9b && (zero(2, 6) || groups[2] === 1)) return v4(groups[6]!, groups[7]!);
  if (groups[0] === 0x2002) return v4(groups[1]!, groups[2]!);
  return undefined;
}

function expandIpv6(address: string): number[] {
  let text = address.toLowerCase();
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.includes('::') ? text.split('::') as [string, string] : [text, undefined];
  const parse = (part: string) => (part === '' ? [] : part.split(':').map((g) => parseInt(g, 16)));
  const left = parse(head);
  if (tail === undefined) return left;
  const right = parse(tail);
  return [...left, ...new Array<number>(8 - left.length - right.length).fill(0), ...right];
}

/** Why `address` may not be connected to, or undefined. */
export function refusedAddress(given: string, options: Pick<GuardedFetchOptions, 'allowLoopback' | 'allowPrivate'>): string | undefined {
  // An IPv4-mapped IPv6 address (::ffff:10.0.0.1) is the IPv4 address it carries.
  const dotted = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(given);
  const hex = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/i.exec(given);
  const fromHex = (h: string) => [parseInt(h, 16) >> 8, parseInt(h, 16) & 255];
  const address = dotted ? dotted[1]! : hex ? [...fromHex(hex[1]!), ...fromHex(hex[2]!)].join('.') : given;
  const family = isIP(address) === 6 ? 'ipv6' : 'ipv4';
  if (NEVER.check(address, family) && !(family === 'ipv6' && LOOPBACK.check(address, family))) return 'an unspecified or "this network" address';
  const carried = embeddedIpv4(address);
  if (carried !== undefined && (NEVER.check(carried, 'ipv4') || LOOPBACK.check(carried, 'ipv4'))) return `an address that reaches ${carried}`;
  if (LOOPBACK.check(address, family)) return options.allowLoopback ? undefined : 'a loopback address';
  if (SPECIAL.check(address, family)) return options.allowPrivate ? undefined : 'a private or special-purpose address';
  return undefined;
}

/** Why this URI cannot be fetched by its form (scheme, credentials, fragment), or undefined. */
export function refusedUri(uri: string, options: Pick<GuardedFetchOptions, 'allowLoopback'>): string | undefined {
  let url: URL;
  try {
    url = new URL(uri);
  } catch {
    return 'must be an absolute URL';
  }
  if (uri.length > 2048) return 'must be at most 2048 characters';
  if (url.username !== '' || url.password !== '') return 'must not carry credentials';
  if (url.hash !== '') return 'must not have a fragment';
  // An address no setting allows is refused when registered, not only when fetched.
  const host = url.hostname.replace(/^\[|\]$/g, '');
  const never = isIP(host) !== 0 ? refusedAddress(host, { allowLoopback: true, allowPrivate: true }) : undefined;
  if (never) return `must not name ${never}`;
  if (url.protocol === 'https:') return undefined;
  if (url.protocol === 'http:' && options.allowLoopback && isLoopbackHost(url.hostname)) return undefined;
  return options.allowLoopback ? 'must be https (or http on a loopback host)' : 'must be https';
}

function isLoopbackHost(hostname: string): boolean {
  const host = hostname.replace(/^\[|\]$/g, '');
  return host === 'localhost' || (isIP(host) !== 0 && LOOPBACK.check(host, isIP(host) === 6 ? 'ipv6' : 'ipv4'));
}

/** application/json, application/jwk-set+json or another +json type (RFC 6839), parameters aside. */
function isJsonMediaType(contentType: string | undefined): boolean {
  const type = (contentType ?? '').split(';')[0]!.trim().toLowerCase();
  return type === 'application/json' || /^application\/[a-z0-9!#$&^_.-]+\+json$/.test(type);
}

export class GuardedFetchError extends Error {}

export function guardedFetch(options: GuardedFetchOptions) {
  const lookup: LookupFunction = (hostname, lookupOptions, callback) => {
    dnsLookup(hostname, { ...lookupOptions, all: true }, (error, addresses: LookupAddress[]) => {
      if (error) return callback(error, '', 0);
      for (const { address } of addresses) {
        const refused = refusedAddress(address, options);
        if (refused) return callback(new GuardedFetchError(`${hostname} resolves to ${refused}`), '', 0);
      }
      const first = addresses[0]!;
      if (lookupOptions.all) (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, addresses);
      else callback(null, first.address, first.family);
    });
  };

  return (uri: string, init: { headers?: Headers | Record<string, string>; signal?: AbortSignal }): Promise<Response> => {
    const refused = refusedUri(uri, options);
    if (refused) return Promise.reject(new GuardedFetchError(`jwks_uri ${refused}`));
    const url = new URL(uri);
    const host = url.hostname.replace(/^\[|\]$/g, '');
    if (isIP(host) !== 0) {
      const refusedIp = refusedAddress(host, options);
      if (refusedIp) return Promise.reject(new GuardedFetchError(`jwks_uri names ${refusedIp}`));
    }
    return new Promise<Response>((resolve, reject) => {
      const client = url.protocol === 'https:' ? https : http;
      const request = client.request(url, { method: 'GET', headers: { accept: 'application/json, application/jwk-set+json' }, lookup, timeout: options.timeoutMs, signal: init.signal }, (answer) => {
        // A JWK Set is JSON: an HTML page (a login wall, an error page of something else) is not one, whatever it holds.
        if (answer.statusCode === 200 && !isJsonMediaType(answer.headers['content-type'])) {
          request.destroy(new GuardedFetchError(`the JWK Set is served as ${answer.headers['content-type'] ?? 'no media type'}, not JSON`));
          return;
        }
        const chunks: Buffer[] = [];
        let size = 0;
        answer.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > options.maxBytes) {
            request.destroy(new GuardedFetchError(`the JWK Set is larger than ${options.maxBytes} bytes`));
            return;
          }
          chunks.push(chunk);
        });
        answer.on('end', () => {
          // Redirects are not followed (jose asks for redirect: 'manual'): a 3xx is an error like any non-200.
          resolve(new Response(Buffer.concat(chunks), { status: answer.statusCode ?? 502, headers: { 'content-type': String(answer.headers['content-type'] ?? '') } }));
        });
        answer.on('error', reject);
      });
      request.on('timeout', () => request.destroy(new GuardedFetchError(`no answer within ${options.timeoutMs} ms`)));
      request.on('error', reject);
      request.end();
    });
  };
}
