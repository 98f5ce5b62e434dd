// The Redis topology settings: each topology is read as named, and every combination that cannot work is
// refused by name (never ignored, never echoing a password).
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config/config.js';
import { redisTopology } from '../../src/app/stores.js';

const refusal = (env: Record<string, string>): string => {
  try {
    loadConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) return error.message;
    throw error;
  }
  return '';
};

describe('Redis topology settings', () => {
  it('reads Sentinel, Cluster and one server as named', () => {
    expect(redisTopology(loadConfig({ REDIS_SENTINELS: '10.0.0.1:26379, sentinel-b:26380,[fd00::1]:26381', REDIS_SENTINEL_MASTER: 'ace', REDIS_PASSWORD: 'pw', REDIS_TLS: 'true' }))).toEqual({
      kind: 'sentinel',
      sentinels: [{ host: '10.0.0.1', port: 26379 }, { host: 'sentinel-b', port: 26380 }, { host: 'fd00::1', port: 26381 }],
      masterName: 'ace',
      password: 'pw',
      sentinelPassword: undefined,
      tls: true,
    });
    expect(redisTopology(loadConfig({ REDIS_CLUSTER_NODES: 'a:7000,b:7001' }))).toMatchObject({ kind: 'cluster', nodes: [{ host: 'a', port: 7000 }, { host: 'b', port: 7001 }] });
    expect(redisTopology(loadConfig({ REDIS_URL: 'redis://r:6379' }))).toMatchObject({ kind: 'standalone', url: 'redis://r:6379' });
    expect(redisTopology(loadConfig({}))).toBeUndefined();
    // More than one process is allowed with any shared topology, refused without one.
    expect(loadConfig({ REDIS_CLUSTER_NODES: 'a:7000', WORKERS: '2' }).workers).toBe(2);
    expect(refusal({ WORKERS: '2' })).toContain('WORKERS > 1 needs REDIS_URL (or REDIS_SENTINELS, REDIS_CLUSTER_NODES)');
  });

  it('refuses what cannot work, naming the setting', () => {
    expect(refusal({ REDIS_URL: 'redis://r:6379', REDIS_CLUSTER_NODES: 'a:7000' })).toContain('REDIS_URL and REDIS_CLUSTER_NODES are exclusive');
    expect(refusal({ REDIS_SENTINELS: 'a:26379' })).toContain('REDIS_SENTINELS needs REDIS_SENTINEL_MASTER');
    expect(refusal({ REDIS_SENTINEL_MASTER: 'ace' })).toContain('REDIS_SENTINEL_MASTER is set but REDIS_SENTINELS is not');
    expect(refusal({ REDIS_SENTINELS: 'a:26379,b', REDIS_SENTINEL_MASTER: 'ace' })).toContain('REDIS_SENTINELS must be a comma-separated list of host:port (got "b")');
    expect(refusal({ REDIS_CLUSTER_NODES: 'a:70000' })).toContain('REDIS_CLUSTER_NODES must be a comma-separated list of host:port');
    expect(refusal({ REDIS_PASSWORD: 'hunter2-secret' })).toContain('REDIS_PASSWORD is set but no Redis is');
    expect(refusal({ REDIS_PASSWORD: 'hunter2-secret' })).not.toContain('hunter2');
    expect(refusal({ REDIS_TLS: '1' })).toContain('REDIS_TLS is set but no Redis is');
    expect(refusal({ REDIS_URL: 'redis://r:6379', REDIS_SENTINEL_PASSWORD: 'x' })).toContain('REDIS_SENTINEL_PASSWORD is set but REDIS_SENTINELS is not');
  });
});
