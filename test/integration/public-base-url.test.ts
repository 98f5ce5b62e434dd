// The public base URL (OpenAPI servers[0].url) and the default issuer when PUBLIC_BASE_URL is not set:
// a URL any client can parse, also when HOST is an IPv6 address.
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeJwt } from 'jose';
import { defaultBaseUrl, loadConfig } from '../../src/config/config.js';
import { AdminClient, postJson } from '../../kit/admin.js';
import { startService, type ServiceHandle } from '../support/service.js';
import { missingOutsideCi } from '../support/tools.js';

describe('default base URL (in process)', () => {
  it('is localhost on a wildcard address, the host otherwise, IPv6 literals in brackets', () => {
    expect(defaultBaseUrl('0.0.0.0', 8080)).toBe('http://localhost:8080');
    expect(defaultBaseUrl('::', 8080)).toBe('http://localhost:8080');
    expect(defaultBaseUrl('127.0.0.1', 8080)).toBe('http://127.0.0.1:8080');
    expect(defaultBaseUrl('::1', 8080)).toBe('http://[::1]:8080');
    expect(defaultBaseUrl('2001:db8::7', 9000)).toBe('http://[2001:db8::7]:9000');
    expect(defaultBaseUrl('api.internal', 80)).toBe('http://api.internal:80');
    for (const host of ['::1', '2001:db8::7', '127.0.0.1', 'api.internal']) expect(() => new URL(defaultBaseUrl(host, 1))).not.toThrow();
  });

  it('is what the configuration uses for PUBLIC_BASE_URL and ISSUER, unless they are set', () => {
    const config = loadConfig({ HOST: '::1', PORT: '8123' });
    expect(config.publicBaseUrl).toBe('http://[::1]:8123');
    expect(config.issuer).toBe('http://[::1]:8123');
    const set = loadConfig({ HOST: '::1', PORT: '8123', PUBLIC_BASE_URL: 'https://ace.example.org/' });
    expect(set.publicBaseUrl).toBe('https://ace.example.org');
    expect(set.issuer).toBe('https://ace.example.org');
  });
});

const ipv6Loopback = await new Promise<boolean>((resolve) => {
  const probe = net.createServer().once('error', () => resolve(false));
  probe.listen(0, '::1', () => probe.close(() => resolve(true)));
});

describe.skipIf(missingOutsideCi(!ipv6Loopback, 'an IPv6 loopback (::1), in CI a failure'))('HOST=::1 over HTTP', () => {
  let service: ServiceHandle;
  let base: string;
  beforeAll(async () => {
    service = await startService({ mode: 'real', env: { HOST: '::1' } });
    base = `http://[::1]:${service.env.PORT}`;
  });
  afterAll(async () => {
    await service?.dispose();
  });

  it('answers on [::1], with servers[0].url and the token issuer both http://[::1]:PORT', async () => {
    const document = (await (await fetch(`${base}/openapi.json`)).json()) as { servers: { url: string }[] };
    expect(document.servers[0].url).toBe(base);
    const { platform, agent } = await new AdminClient(service).seed();
    const issued = await postJson(`${base}/api/v1/auth/token`, {
      api_key_id: agent.api_key_id,
      secret: agent.secret,
      platform_id: platform.platform_id,
    });
    expect(issued.status).toBe(200);
    expect(decodeJwt(issued.body.access_token).iss).toBe(base);
    // The start-up log names the same issuer and base URL as the tokens and the OAuth metadata.
    const metadata = (await (await fetch(`${base}/.well-known/oauth-authorization-server`)).json()) as { issuer: string; token_endpoint: string };
    expect(metadata.issuer).toBe(base);
    const ready = service
      .output()
      .split('\n')
      .filter((line) => line.includes('agent credential exchange ready'))
      .map((line) => JSON.parse(line) as Record<string, unknown>)[0];
    expect(ready).toMatchObject({ issuer: base, public_url: new URL(metadata.token_endpoint).origin });
  });
});
