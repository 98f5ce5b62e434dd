// The jwks_uri fetch of agents' and workload issuers' keys: scheme and host rules, private and loopback
// ranges refused at connection time (also behind a host name), a JSON media type, size and time bounds, no redirects.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { guardedFetch, refusedAddress, refusedUri } from '../../src/adapters/crypto/guarded-fetch.js';

const strict = { allowLoopback: false, allowPrivate: false };

describe('which addresses and URIs a jwks_uri may name', () => {
  it('refuses loopback, private and special-purpose addresses unless allowed', () => {
    for (const address of ['127.0.0.1', '127.8.9.10', '::1']) {
      expect(refusedAddress(address, strict)).toMatch(/loopback/);
      expect(refusedAddress(address, { allowLoopback: true, allowPrivate: false })).toBeUndefined();
    }
    for (const address of ['10.1.2.3', '172.16.0.1', '192.168.1.1', '169.254.169.254', '100.64.0.1', 'fc00::1', 'fe80::1', '::ffff:10.0.0.1', '::ffff:a00:1', '::ffff:7f00:1']) {
      expect(refusedAddress(address, strict), address).toMatch(/private|loopback/);
      if (address !== '::ffff:7f00:1') expect(refusedAddress(address, { allowLoopback: false, allowPrivate: true }), address).toBeUndefined();
    }
    // IPv6 ranges embedding or reaching an IPv4 address, and other special-purpose ones.
    for (const address of ['::ffff:0:a9fe:a9fe', '2002:a9fe:a9fe::1', '2001:0:4136:e378:8000:63bf:3fff:fdd2', '64:ff9b::a00:1', '64:ff9b:1::a00:1', '100::1', 'fec0::1']) {
      expect(refusedAddress(address, strict), address).toMatch(/private|loopback/);
      expect(refusedAddress(address, { allowLoopback: false, allowPrivate: true }), address).toBeUndefined();
    }
    // The unspecified and "this network" addresses connect to the host itself, and IPv6 forms carrying them or
    // loopback reach it too: refused whatever the operator allows.
    const everything = { allowLoopback: true, allowPrivate: true };
    for (const address of ['0.0.0.0', '0.1.2.3', '::', '::0.0.0.0', '::127.0.0.1', '::a00:1', '::ffff:0.0.0.0', '::ffff:0:0', '::ffff:0:7f00:1', '::ffff:0:0:0',
      '64:ff9b::7f00:1', '64:ff9b::', '64:ff9b:1::7f00:1', '2002:7f00:1::', '2002::1', '0:0:0:0:0:0:0:0']) {
      expect(refusedAddress(address, everything), address).toMatch(/unspecified|reaches/);
    }
    expect(refusedAddress('::1', everything)).toBeUndefined();
    expect(refusedAddress('127.0.0.1', everything)).toBeUndefined();
    for (const address of ['93.184.216.34', '2606:2800:220:1:248:1893:25c8:1946', '2001:4860:4860::8888', '2a00:1450:4001:800::200e', '8.8.8.8']) expect(refusedAddress(address, strict), address).toBeUndefined();
  });

  it('takes https only (http on a loopback host only when allowed), no credentials, no fragment', () => {
    expect(refusedUri('https://issuer.example/keys', strict)).toBeUndefined();
    expect(refusedUri('http://issuer.example/keys', strict)).toMatch(/https/);
    expect(refusedUri('http://127.0.0.1:9/keys', strict)).toMatch(/https/);
    expect(refusedUri('http://127.0.0.1:9/keys', { allowLoopback: true })).toBeUndefined();
    expect(refusedUri('http://[::1]:9/keys', { allowLoopback: true })).toBeUndefined();
    expect(refusedUri('http://issuer.example/keys', { allowLoopback: true })).toMatch(/loopback/);
    expect(refusedUri('https://u:p@issuer.example/keys', strict)).toMatch(/credentials/);
    expect(refusedUri('https://issuer.example/keys#x', strict)).toMatch(/fragment/);
    expect(refusedUri('ftp://issuer.example/keys', strict)).toMatch(/https/);
    expect(refusedUri('not a url', strict)).toMatch(/absolute/);
    for (const uri of ['https://0.0.0.0:9/keys', 'https://0:9/keys', 'https://[::]:9/keys', 'https://[::ffff:0.0.0.0]:9/keys', 'https://[64:ff9b::7f00:1]/keys']) {
      expect(refusedUri(uri, { allowLoopback: true }), uri).toMatch(/unspecified|reaches/);
    }
  });
});

describe('guardedFetch against servers on loopback', () => {
  let server: http.Server;
  let base: string;
  beforeAll(async () => {
    server = http.createServer((req, res) => {
      if (req.url === '/big') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(`{"keys":[],"pad":"${'x'.repeat(200_000)}"}`);
      } else if (req.url === '/slow') {
        setTimeout(() => res.end('{"keys":[]}'), 5000).unref();
      } else if (req.url === '/html') {
        res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
        res.end('{"keys":[]}');
      } else if (req.url === '/jwk-set') {
        res.writeHead(200, { 'content-type': 'application/jwk-set+json; charset=utf-8' });
        res.end('{"keys":[]}');
      } else if (req.url === '/redirect') {
        res.writeHead(302, { location: 'http://169.254.169.254/latest/meta-data' });
        res.end();
      } else {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"keys":[]}');
      }
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => {
    server.closeAllConnections();
    server.close();
  });
  const init = () => ({ headers: new Headers(), signal: AbortSignal.timeout(10_000) });

  it('fetches a JWK Set where loopback is allowed', async () => {
    const response = await guardedFetch({ allowLoopback: true, allowPrivate: false, timeoutMs: 2000, maxBytes: 65_536 })(`${base}/keys`, init());
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ keys: [] });
  });

  it('takes a JSON media type only (application/json, application/jwk-set+json, any +json)', async () => {
    const fetchJwks = guardedFetch({ allowLoopback: true, allowPrivate: false, timeoutMs: 2000, maxBytes: 65_536 });
    expect(await (await fetchJwks(`${base}/jwk-set`, init())).json()).toEqual({ keys: [] });
    await expect(fetchJwks(`${base}/html`, init())).rejects.toThrow(/text\/html.*not JSON/);
  });

  it('refuses loopback by address and by a name that resolves to it', async () => {
    const fetchJwks = guardedFetch({ ...strict, timeoutMs: 2000, maxBytes: 65_536 });
    await expect(fetchJwks(`${base}/keys`, init())).rejects.toThrow(/https|loopback/);
    const port = (server.address() as AddressInfo).port;
    await expect(guardedFetch({ allowLoopback: false, allowPrivate: false, timeoutMs: 2000, maxBytes: 65_536 })(`https://localhost:${port}/keys`, init())).rejects.toThrow(/loopback/);
  });

  it('refuses the unspecified addresses even with private ranges allowed: a connect to them reaches this host', async () => {
    const port = (server.address() as AddressInfo).port;
    for (const allowLoopback of [false, true]) {
      const fetchJwks = guardedFetch({ allowLoopback, allowPrivate: true, timeoutMs: 2000, maxBytes: 65_536 });
      for (const uri of [`https://0.0.0.0:${port}/keys`, `https://0:${port}/keys`, `https://[::]:${port}/keys`, `https://[::ffff:0.0.0.0]:${port}/keys`, `https://[64:ff9b::7f00:1]:${port}/keys`]) {
        await expect(fetchJwks(uri, init()), uri).rejects.toThrow(/unspecified|reaches/);
      }
    }
  });

  it('stops at the size bound and the time bound, and follows no redirect', async () => {
    const fetchJwks = guardedFetch({ allowLoopback: true, allowPrivate: false, timeoutMs: 300, maxBytes: 65_536 });
    await expect(fetchJwks(`${base}/big`, init())).rejects.toThrow(/larger than 65536/);
    await expect(fetchJwks(`${base}/slow`, init())).rejects.toThrow(/no answer within 300 ms/);
    expect((await fetchJwks(`${base}/redirect`, init())).status).toBe(302);
  });
});
