// Secure by default: the middleware refuses a plain-http:// serviceUrl (or jwksUrl) to a host that is not
// loopback, since anyone on that path could rewrite the JWKS and mint tokens the platform accepts, unless
// allowInsecureServiceUrl says so, and then it warns. Both entry points (Node and edge) share the check.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createVerifier as createEdgeVerifier, type CoreVerifierOptions } from '../../packages/middleware/src/verifier.js';
import { createVerifier as createNodeVerifier } from '../../packages/middleware/src/node.js';

const scopesDocument = {
  schema: 'SvcScopesYaml',
  version: 1,
  platform_id: '11111111-1111-4111-8111-111111111111',
  scopes: [{ name: 'read', description: 'read' }],
  routes: [{ method: 'GET', path: '/x', scopes: ['read'] }],
};

const make = (options: Partial<CoreVerifierOptions>, entry: 'edge' | 'node' = 'edge') => {
  const all = { serviceUrl: 'https://ace.example.com', scopesDocument, revocationFeed: false, ...options } as CoreVerifierOptions;
  const verifier = entry === 'edge' ? createEdgeVerifier(all) : createNodeVerifier(all);
  verifier.close();
  return verifier;
};

afterEach(() => vi.restoreAllMocks());

describe('serviceUrl must be https:// unless loopback', () => {
  const loopback = ['http://127.0.0.1:8080', 'http://127.1.2.3', 'http://127.1', 'http://[::1]:3000', 'http://[0:0:0:0:0:0:0:1]', 'http://localhost:3000', 'http://LOCALHOST'];
  const exposed = ['http://ace.example.com', 'http://10.0.0.7:8080', 'http://192.168.1.2', 'http://localhost.example.com', 'http://127.0.0.1.nip.io', 'http://[::ffff:127.0.0.1]', 'http://[::2]', 'http://128.0.0.1'];

  for (const url of ['https://ace.example.com', 'https://10.0.0.7:8443', ...loopback]) {
    it(`accepts ${url}`, () => expect(() => make({ serviceUrl: url })).not.toThrow());
  }
  for (const url of exposed) {
    it(`refuses ${url}, in both entry points, naming the option that allows it`, () => {
      expect(() => make({ serviceUrl: url })).toThrow(/https:\/\/.*allowInsecureServiceUrl/);
      expect(() => make({ serviceUrl: url }, 'node')).toThrow(/https:\/\/.*allowInsecureServiceUrl/);
    });
  }

  it('refuses another scheme, and a serviceUrl that is no URL', () => {
    expect(() => make({ serviceUrl: 'ws://ace.example.com' })).toThrow(/https:\/\//);
    expect(() => make({ serviceUrl: 'ace.example.com' })).toThrow(/not a URL/);
  });

  it('checks jwksUrl the same way', () => {
    expect(() => make({ jwksUrl: 'http://keys.example.com/jwks.json' })).toThrow(/jwksUrl .*allowInsecureServiceUrl/);
    expect(() => make({ jwksUrl: 'http://127.0.0.1:9/jwks.json' })).not.toThrow();
  });

  it('allowInsecureServiceUrl: true starts, and warns loudly (the feed warn hook, else console.warn)', () => {
    const warnings: string[] = [];
    make({ serviceUrl: 'http://ace.internal:8080', allowInsecureServiceUrl: true, feedToken: 'acef_x', revocationFeed: { warn: (message) => warnings.push(message) } });
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/^INSECURE: serviceUrl http:\/\/ace\.internal:8080 is plain http:\/\//);
    const console = vi.spyOn(globalThis.console, 'warn').mockImplementation(() => undefined);
    make({ serviceUrl: 'http://ace.internal:8080', allowInsecureServiceUrl: true });
    expect(console).toHaveBeenCalledOnce();
    expect(String(console.mock.calls[0]![0])).toMatch(/INSECURE/);
  });

  it('allowInsecureServiceUrl other than true (a string from an environment variable) allows nothing', () => {
    expect(() => make({ serviceUrl: 'http://ace.example.com', allowInsecureServiceUrl: 'false' as unknown as boolean })).toThrow(/allowInsecureServiceUrl/);
  });
});
