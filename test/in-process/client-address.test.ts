// Which address the per-address limits count: the hop the configured proxies appended (counted from the
// right), validated as an IP address, IPv6 grouped per /64; anything else falls back to the socket peer.
import { describe, expect, it } from 'vitest';
import { addressKey, clientAddress, MAX_FORWARDED_CHARS, NO_PROXY, parseIp, parseProxyList, PRIVATE_RANGES } from '../../src/support/client-address.js';

const SOCKET = '192.0.2.200';
const oneHop = { hops: 1 };

describe('parseIp', () => {
  it('accepts bare IPv4 and IPv6, drops an IPv6 zone, maps IPv4-mapped IPv6 to IPv4', () => {
    expect(parseIp(' 198.51.100.7 ')).toEqual({ family: 4, address: '198.51.100.7' });
    expect(parseIp('fe80::1%eth0')?.address).toBe('fe80::1');
    expect(parseIp('::ffff:198.51.100.7')).toEqual({ family: 4, address: '198.51.100.7' });
    // How uWS reports an IPv4 peer on a dual-stack socket.
    expect(parseIp('0000:0000:0000:0000:0000:ffff:7f00:0001')).toEqual({ family: 4, address: '127.0.0.1' });
    expect(parseIp('2001:DB8::1')?.hextets).toEqual([0x2001, 0xdb8, 0, 0, 0, 0, 0, 1]);
    expect(parseIp('::1.2.3.4')?.hextets).toEqual([0, 0, 0, 0, 0, 0, 0x102, 0x304]);
  });

  it('refuses brackets, ports, names, leading zeros, empty and long text', () => {
    for (const bad of ['', ' ', '[::1]', '[::1]:80', '198.51.100.7:80', 'localhost', 'unknown', '01.2.3.4', '1.2.3', '1.2.3.4.5', '::g', 'a'.repeat(100), '_hidden', '1.2.3.4 5.6.7.8']) {
      expect(parseIp(bad), bad).toBeUndefined();
    }
  });
});

describe('addressKey', () => {
  it('is the IPv4 address, or the /64 of an IPv6 one', () => {
    expect(addressKey(parseIp('198.51.100.7')!)).toBe('198.51.100.7');
    expect(addressKey(parseIp('2001:db8:0:1::1')!)).toBe('2001:db8:0:1::/64');
    expect(addressKey(parseIp('2001:0db8:0000:0001:ffff:eeee:dddd:cccc')!)).toBe('2001:db8:0:1::/64');
    expect(addressKey(parseIp('2001:db8:0:2::1')!)).toBe('2001:db8:0:2::/64');
    expect(addressKey(parseIp('::1')!)).toBe('0:0:0:0::/64');
  });
});

describe('clientAddress with a hop count', () => {
  it('ignores the header without trusted proxies', () => {
    expect(clientAddress('203.0.113.9', SOCKET, NO_PROXY)).toBe(SOCKET);
  });

  it('takes the hop the proxies appended, never the client-written left-most one', () => {
    expect(clientAddress('203.0.113.9', SOCKET, oneHop)).toBe('203.0.113.9');
    expect(clientAddress('1.1.1.1, 2.2.2.2, 203.0.113.9', SOCKET, oneHop)).toBe('203.0.113.9');
    expect(clientAddress('1.1.1.1,203.0.113.9,10.0.0.2', SOCKET, { hops: 2 })).toBe('203.0.113.9');
    // Rotating the left-most value changes nothing.
    for (let i = 0; i < 20; i++) expect(clientAddress(`198.51.100.${i}, 203.0.113.9`, SOCKET, oneHop)).toBe('203.0.113.9');
  });

  it('takes the left-most hop when the chain is shorter than configured', () => {
    expect(clientAddress('203.0.113.9', SOCKET, { hops: 3 })).toBe('203.0.113.9');
  });

  it('falls back to the socket address when the chosen hop is not an IP address', () => {
    for (const bad of ['garbage', '203.0.113.9, unknown', '[2001:db8::1]:443', '203.0.113.9:80', ' ', ',', 'x'.repeat(60_000)]) {
      expect(clientAddress(bad, SOCKET, oneHop), bad.slice(0, 40)).toBe(SOCKET);
    }
  });

  it('reads only the tail of a long header', () => {
    const long = `${'9.9.9.9, '.repeat(7000)}203.0.113.9`;
    expect(long.length).toBeGreaterThan(60_000);
    expect(clientAddress(long, SOCKET, oneHop)).toBe('203.0.113.9');
    // A hop cut by the 1 KiB window is never used: 16 hops back from the right is the most read.
    const cutHop = `${'1'.repeat(MAX_FORWARDED_CHARS)}, 1.2.3.4`;
    expect(clientAddress(cutHop, SOCKET, { hops: 2 })).toBe('1.2.3.4');
  });

  it('groups IPv6 clients per /64 and maps IPv4-mapped addresses to IPv4', () => {
    expect(clientAddress('2001:db8:0:1::a', SOCKET, oneHop)).toBe(clientAddress('2001:db8:0:1:ffff::b', SOCKET, oneHop));
    expect(clientAddress('2001:db8:0:1::a', SOCKET, oneHop)).not.toBe(clientAddress('2001:db8:0:2::a', SOCKET, oneHop));
    expect(clientAddress('::ffff:203.0.113.9', SOCKET, oneHop)).toBe('203.0.113.9');
    expect(clientAddress('', '0000:0000:0000:0000:0000:ffff:7f00:0001', oneHop)).toBe('127.0.0.1');
    expect(clientAddress('', '2001:0db8:0000:0001:0000:0000:0000:0001', NO_PROXY)).toBe('2001:db8:0:1::/64');
  });
});

describe('clientAddress with a hop count and trusted peers', () => {
  const peers = parseProxyList(PRIVATE_RANGES).proxies!;

  it('reads the header only from a peer in the trusted ranges (loopback and private by default)', () => {
    for (const proxy of ['127.0.0.1', '10.1.2.3', '172.20.0.5', '192.168.1.1', '100.64.0.9', '::1', 'fd00::7', '::ffff:10.0.0.1']) {
      expect(clientAddress('203.0.113.9', proxy, { hops: 1, peers }), proxy).toBe('203.0.113.9');
    }
  });

  it('ignores the header from any other peer, and says so', () => {
    const ignored: string[] = [];
    const trust = { hops: 1, peers, onUntrustedPeer: (peer: string) => ignored.push(peer) };
    expect(clientAddress('203.0.113.9', '198.51.100.4', trust)).toBe('198.51.100.4');
    expect(clientAddress('203.0.113.9', '2001:db8::1', trust)).toBe('2001:db8:0:0::/64');
    expect(ignored).toEqual(['198.51.100.4', '2001:db8::1']);
    // No header: nothing to ignore, nothing reported.
    expect(clientAddress('', '198.51.100.4', trust)).toBe('198.51.100.4');
    expect(ignored.length).toBe(2);
  });
});

describe('clientAddress with proxy ranges', () => {
  const { proxies } = parseProxyList('10.0.0.0/8, fd00::/8, 192.0.2.200');
  const trust = { hops: 0, proxies };

  it('reads the header only from a proxy, and skips proxy hops from the right', () => {
    expect(clientAddress('203.0.113.9', '198.51.100.1', trust)).toBe('198.51.100.1');
    expect(clientAddress('1.1.1.1, 203.0.113.9, 10.1.2.3, fd00::5', SOCKET, trust)).toBe('203.0.113.9');
    expect(clientAddress('203.0.113.9', '10.9.9.9', trust)).toBe('203.0.113.9');
    expect(clientAddress('203.0.113.9', '::ffff:10.9.9.9', trust)).toBe('203.0.113.9');
  });

  it('uses the nearest proxy-range hop when the rest is not an address, and the socket when nothing is', () => {
    expect(clientAddress('garbage, 10.0.0.7', SOCKET, trust)).toBe('10.0.0.7');
    expect(clientAddress('10.0.0.8, 10.0.0.7', SOCKET, trust)).toBe('10.0.0.8');
    expect(clientAddress('garbage', SOCKET, trust)).toBe(SOCKET);
  });
});

describe('parseProxyList', () => {
  it('accepts addresses and ranges, and names the invalid entries', () => {
    expect(parseProxyList('').proxies).toBeUndefined();
    expect(parseProxyList(' 10.0.0.0/8 ,192.0.2.1, 2001:db8::/32, ::1 ').invalid).toEqual([]);
    expect(parseProxyList('10.0.0.0/33, example.com, 10.0.0.0/8/1, fe80::/129, [::1], ::ffff:10.0.0.0/104, 1.2.3.4/x').invalid).toEqual([
      '10.0.0.0/33', 'example.com', '10.0.0.0/8/1', 'fe80::/129', '[::1]', '::ffff:10.0.0.0/104', '1.2.3.4/x',
    ]);
  });
});
