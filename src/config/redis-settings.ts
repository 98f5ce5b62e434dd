// The Redis topology settings (REDIS_URL, REDIS_SENTINELS + REDIS_SENTINEL_MASTER, REDIS_CLUSTER_NODES and
// their password/TLS companions): which one is in use, and every combination that cannot work, reported by
// name. A Redis setting that is set is never ignored: the service refuses rather than fall back silently to
// in-process state.
import type { Config } from './types.js';

export interface HostPort {
  host: string;
  port: number;
}

export type RedisTopologyKind = 'standalone' | 'sentinel' | 'cluster';

/** The topology the settings ask for, or undefined (no Redis: in-process cache, limits and bus). */
export function redisTopologyKind(config: Pick<Config, 'redisUrl' | 'redisSentinels' | 'redisClusterNodes'>): RedisTopologyKind | undefined {
  if (config.redisSentinels) return 'sentinel';
  if (config.redisClusterNodes) return 'cluster';
  if (config.redisUrl) return 'standalone';
  return undefined;
}

/** "host:port,host:port" (IPv6 as [addr]:port) to addresses; problems name `setting`, never echo more than an entry. */
export function parseHostPorts(text: string, setting: string, problems: string[]): HostPort[] {
  const out: HostPort[] = [];
  for (const raw of text.split(',')) {
    const entry = raw.trim();
    const match = /^(?:\[([0-9a-fA-F:.]+)\]|([^\s:[\]/@]+)):(\d{1,5})$/.exec(entry);
    const port = match ? Number(match[3]) : 0;
    if (!match || port < 1 || port > 65_535) {
      problems.push(`${setting} must be a comma-separated list of host:port (got "${entry.slice(0, 64)}")`);
      continue;
    }
    out.push({ host: match[1] ?? match[2], port });
  }
  return out;
}

/** The rules between the Redis settings; appended to loadConfig's problems. */
export function redisSettingProblems(config: Config): string[] {
  const problems: string[] = [];
  const chosen = [
    config.redisUrl && 'REDIS_URL',
    config.redisSentinels && 'REDIS_SENTINELS',
    config.redisClusterNodes && 'REDIS_CLUSTER_NODES',
  ].filter(Boolean);
  if (chosen.length > 1) problems.push(`${chosen.join(' and ')} are exclusive: set the one that names your Redis topology`);
  if (config.redisSentinels) parseHostPorts(config.redisSentinels, 'REDIS_SENTINELS', problems);
  if (config.redisClusterNodes) parseHostPorts(config.redisClusterNodes, 'REDIS_CLUSTER_NODES', problems);
  if (config.redisSentinels && !config.redisSentinelMaster) problems.push('REDIS_SENTINELS needs REDIS_SENTINEL_MASTER (the master name the sentinels monitor)');
  if (config.redisSentinelMaster && !config.redisSentinels) problems.push('REDIS_SENTINEL_MASTER is set but REDIS_SENTINELS is not: list the sentinels as host:port,host:port');
  if (config.redisSentinelMaster && !/^[A-Za-z0-9._-]{1,128}$/.test(config.redisSentinelMaster)) {
    problems.push('REDIS_SENTINEL_MASTER must be a sentinel master name (letters, digits, ".", "_", "-")');
  }
  if (config.redisSentinelPassword && !config.redisSentinels) problems.push('REDIS_SENTINEL_PASSWORD is set but REDIS_SENTINELS is not');
  const anyRedis = chosen.length > 0;
  if (config.redisPassword && !anyRedis) problems.push('REDIS_PASSWORD is set but no Redis is: set REDIS_URL, REDIS_SENTINELS or REDIS_CLUSTER_NODES');
  if (config.redisTls && !anyRedis) problems.push('REDIS_TLS is set but no Redis is: set REDIS_URL, REDIS_SENTINELS or REDIS_CLUSTER_NODES');
  return problems;
}
