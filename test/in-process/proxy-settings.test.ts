// TRUST_PROXY stays an alias of one proxy hop; TRUST_PROXY_HOPS wins; TRUST_PROXY_CIDRS is validated at start.
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config/config.js';

describe('proxy settings', () => {
  it('TRUST_PROXY=true means one hop; TRUST_PROXY_HOPS wins when set', () => {
    expect(loadConfig({}).trustProxyHops).toBe(0);
    expect(loadConfig({ TRUST_PROXY: 'true' }).trustProxyHops).toBe(1);
    expect(loadConfig({ TRUST_PROXY: 'true', TRUST_PROXY_HOPS: '0' }).trustProxyHops).toBe(0);
    expect(loadConfig({ TRUST_PROXY_HOPS: '2' }).trustProxyHops).toBe(2);
  });

  it('refuses TRUST_PROXY_CIDRS entries that are not addresses or ranges', () => {
    expect(loadConfig({ TRUST_PROXY_CIDRS: '10.0.0.0/8, fd00::/8' }).trustProxyCidrs).toBe('10.0.0.0/8, fd00::/8');
    expect(() => loadConfig({ TRUST_PROXY_CIDRS: '10.0.0.0/8, proxy.internal' })).toThrow(ConfigError);
    expect(() => loadConfig({ TRUST_PROXY_CIDRS: '10.0.0.0/8, proxy.internal' })).toThrow('"proxy.internal"');
  });

  it('declares the admin token limit with its defaults', () => {
    const config = loadConfig({});
    expect([config.adminAuthFailPoints, config.adminAuthFailWindowSeconds]).toEqual([20, 60]);
  });
});
