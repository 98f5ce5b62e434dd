// Redis connections, whatever the topology: one server (REDIS_URL), a Sentinel group (the client asks the
// sentinels for the master and follows failovers) or a Cluster (slots routed by ioredis). Fail-fast
// settings: when Redis is away, commands fail at once (no offline queue) so callers fall back to Postgres
// or the in-process limiter instead of waiting.
import { Cluster, Redis, type RedisOptions } from 'ioredis';

export interface RedisAddress {
  host: string;
  port: number;
}

export type RedisTopology =
  | { kind: 'standalone'; url: string; password?: string; tls?: boolean }
  | { kind: 'sentinel'; sentinels: RedisAddress[]; masterName: string; password?: string; sentinelPassword?: string; tls?: boolean }
  | { kind: 'cluster'; nodes: RedisAddress[]; password?: string; tls?: boolean };

export type RedisClient = Redis | Cluster;

/** The setting an operator has to look at for each topology (named in every refusal). */
export const TOPOLOGY_SETTING: Record<RedisTopology['kind'], string> = {
  standalone: 'REDIS_URL',
  sentinel: 'REDIS_SENTINELS / REDIS_SENTINEL_MASTER',
  cluster: 'REDIS_CLUSTER_NODES',
};

/** A Redis setting that is set but cannot work: start-up stops with this message (names the setting). */
export class RedisSettingError extends Error {
  override name = 'RedisSettingError';
}

/**
 * A node that was a master and got demoted answers writes with READONLY: reconnect, so a Sentinel client
 * asks the sentinels again and lands on the new master (the command itself fails; callers handle that).
 */
function reconnectOnReadonly(error: Error): boolean {
  return error.message.startsWith('READONLY');
}

/**
 * How long a connection may stay silent with commands out before ioredis drops it (a reply later than a
 * command's own deadline is already a failure; twice that without a single byte is not load but a dead
 * peer). Also bounds a reconnect's handshake, so a half-open Redis never looks 'ready'.
 */
export function silenceLimitMs(commandTimeoutMs: number): number {
  return Math.max(1000, 2 * commandTimeoutMs);
}

function nodeOptions(commandTimeoutMs: number, password: string | undefined, tls: boolean | undefined): RedisOptions {
  return {
    maxRetriesPerRequest: 1,
    commandTimeout: commandTimeoutMs,
    socketTimeout: silenceLimitMs(commandTimeoutMs),
    connectTimeout: Math.max(1000, commandTimeoutMs),
    reconnectOnError: reconnectOnReadonly,
    // ioredis's own resubscription after a reconnect drops its promise: a SUBSCRIBE that times out there is
    // an unhandled rejection, which ends the process. The invalidation bus subscribes on every 'ready' itself
    // and handles the failure (adapters/cache/invalidation-bus.ts).
    autoResubscribe: false,
    ...(password ? { password } : {}),
    ...(tls ? { tls: {} } : {}),
  };
}

export function connectRedis(target: RedisTopology | string, commandTimeoutMs: number, onHealth?: (up: boolean) => void): RedisClient {
  const topology: RedisTopology = typeof target === 'string' ? { kind: 'standalone', url: target } : target;
  // Reconnect forever, backing off to 500 ms: the service recovers by itself when Redis (or a promoted
  // replica) answers again, and soon enough that a failover is over for us within a second of it.
  const retry = (times: number) => Math.min(50 * times, 500);
  let client: RedisClient;
  switch (topology.kind) {
    case 'standalone':
      client = new Redis(topology.url, {
        ...nodeOptions(commandTimeoutMs, topology.password, topology.tls),
        enableOfflineQueue: false,
        retryStrategy: retry,
        // Commands issued in the same tick (many concurrent requests) share one write and one read.
        enableAutoPipelining: true,
      });
      break;
    case 'sentinel':
      client = new Redis({
        ...nodeOptions(commandTimeoutMs, topology.password, topology.tls),
        sentinels: topology.sentinels,
        name: topology.masterName,
        role: 'master',
        ...(topology.sentinelPassword ? { sentinelPassword: topology.sentinelPassword } : {}),
        ...(topology.tls ? { enableTLSForSentinelMode: true, sentinelTLS: {} } : {}),
        sentinelCommandTimeout: commandTimeoutMs,
        sentinelRetryStrategy: retry,
        // Listens to the sentinels' +switch-master and drops the connection to a master that was replaced,
        // instead of waiting for it to fail.
        failoverDetector: true,
        enableOfflineQueue: false,
        retryStrategy: retry,
        enableAutoPipelining: true,
      });
      break;
    case 'cluster':
      client = new Cluster(topology.nodes, {
        enableOfflineQueue: false,
        enableAutoPipelining: true,
        scaleReads: 'master',
        clusterRetryStrategy: retry,
        retryDelayOnFailover: 100,
        retryDelayOnClusterDown: 100,
        slotsRefreshTimeout: Math.max(1000, commandTimeoutMs),
        // The slot map is also re-read after every MOVED and connection loss; this catches quiet changes.
        slotsRefreshInterval: 5000,
        redisOptions: nodeOptions(commandTimeoutMs, topology.password, topology.tls),
      });
      break;
  }
  client.on('ready', () => onHealth?.(true));
  client.on('close', () => onHealth?.(false));
  client.on('end', () => {
    onHealth?.(false);
    // Observed in the Sentinel failover test: a client can give up for good ('end', every command then
    // fails "Connection is closed") although retryStrategy never stops. Unless we closed it, start over.
    // A restart that fails ends the client again ('end'), which schedules the next one; reported as down meanwhile.
    if (!closing.has(client)) setTimeout(() => void client.connect().catch(() => onHealth?.(false)), 500).unref();
  });
  // Errors surface through failed commands and the reset watch below; an 'error' listener keeps ioredis
  // from logging or throwing. A Cluster reports its nodes' errors as 'node error'.
  client.on('error', () => {});
  if (client instanceof Cluster) client.on('node error', () => {});
  return client;
}

const closing = new WeakSet<RedisClient>();

/** Closes a client for good (connectRedis revives one that ends on its own). */
export function closeRedis(client: RedisClient): void {
  closing.add(client);
  client.disconnect();
}

/**
 * Calls `onReset` whenever what this client saw of Redis may no longer be what Redis holds: a reconnect
 * after the first connection (Redis restarted, or a replica promoted that may not have had the last
 * writes), and in a Cluster a node leaving or joining the connection pool (a master killed, a replica
 * promoted). Invalidation messages may have been lost meanwhile and deletes may have been rolled back.
 */
export function watchResets(client: RedisClient, onReset: (why: string) => void): void {
  let everReady = client.status === 'ready';
  client.on('ready', () => {
    if (everReady) onReset('reconnected');
    everReady = true;
  });
  if (client instanceof Cluster) {
    client.on('-node', () => onReset('cluster node lost'));
    client.on('+node', () => {
      if (everReady) onReset('cluster node added');
    });
  }
}

/**
 * Resolves on the client's next 'ready' or after `ms`, whichever comes first (never rejects: an 'error'
 * meanwhile is just another reason to wait; events.once would reject on it).
 */
export function untilReadyOr(client: RedisClient, ms: number): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      client.off('ready', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    timer.unref();
    client.once('ready', done);
  });
}

/** The masters holding data: every Cluster master, or the one server/master. */
export function masters(client: RedisClient): Redis[] {
  return client instanceof Cluster ? client.nodes('master') : [client];
}

/**
 * Deletes every key matching `pattern` on every master (SCAN is per node). One key per UNLINK: in a
 * Cluster, keys of one node still live in different slots, and multi-key commands must stay in one slot.
 * Throws when any master could not be swept.
 */
export async function sweepKeys(client: RedisClient, pattern: string, count = 1000): Promise<number> {
  let removed = 0;
  const nodes = masters(client);
  if (nodes.length === 0) throw new Error('no Redis master to sweep');
  await Promise.all(
    nodes.map(async (node) => {
      let cursor = '0';
      do {
        const [next, keys] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', count);
        cursor = next;
        if (keys.length > 0) {
          const pipeline = node.pipeline();
          for (const key of keys) pipeline.unlink(key);
          const results = (await pipeline.exec()) ?? [];
          const failed = results.find(([error]) => error);
          if (failed) throw failed[0];
          removed += keys.length;
        }
      } while (cursor !== '0');
    }),
  );
  return removed;
}

export interface RedisReport {
  topology: RedisTopology['kind'];
  /** Is every part of Redis this service needs answering, as a master? */
  up: boolean;
  /** host:port of the master(s) in use (Cluster: every master). */
  primaries: string[];
  /** Why not up, for /readyz (never holds a password). */
  problem?: string;
}

function addressOf(node: Redis): string {
  const stream = node.stream as { remoteAddress?: string; remotePort?: number } | undefined;
  if (stream?.remoteAddress) return `${stream.remoteAddress}:${stream.remotePort}`;
  return `${node.options.host}:${node.options.port}`;
}

/** Asks Redis what it is right now: the readiness check and the topology metric read this. */
export async function inspectRedis(topology: RedisTopology, client: RedisClient): Promise<RedisReport> {
  const report: RedisReport = { topology: topology.kind, up: false, primaries: [] };
  try {
    if (client instanceof Cluster) {
      const info = String(await client.cluster('INFO'));
      const nodes = client.nodes('master');
      report.primaries = nodes.map(addressOf).sort();
      if (!/cluster_state:ok/.test(info)) report.problem = 'cluster_state is not ok';
      else if (nodes.length === 0) report.problem = 'no cluster master known';
      else report.up = true;
      return report;
    }
    const role = (await client.call('ROLE')) as [string, ...unknown[]];
    report.primaries = [addressOf(client)];
    if (role[0] !== 'master') report.problem = `${TOPOLOGY_SETTING[topology.kind]}: the node in use is a ${role[0]}, not a master`;
    else report.up = true;
  } catch (error) {
    report.problem = `not answering: ${(error as Error).message.slice(0, 200)}`;
  }
  return report;
}

/**
 * Start-up check of a topology that answered: refuses (RedisSettingError, naming the setting) what cannot
 * work as configured: a cluster node behind REDIS_URL, a replica or a sentinel behind REDIS_URL, a master
 * name the sentinels do not know, nodes that are not a cluster behind REDIS_CLUSTER_NODES.
 */
export async function verifyRedis(topology: RedisTopology, client: RedisClient): Promise<RedisReport> {
  if (topology.kind === 'standalone') {
    const role = ((await client.call('ROLE')) as [string])[0];
    if (role === 'sentinel') throw new RedisSettingError('REDIS_URL points at a Redis Sentinel: set REDIS_SENTINELS (and REDIS_SENTINEL_MASTER) instead');
    const clusterInfo = await (client as Redis).info('cluster');
    if (/cluster_enabled:1/.test(clusterInfo)) {
      throw new RedisSettingError('REDIS_URL points at a Redis Cluster node: set REDIS_CLUSTER_NODES (host:port,...) instead, so every slot is reached');
    }
    if (role !== 'master') {
      throw new RedisSettingError(`REDIS_URL points at a Redis ${role}, not a master: writes would fail; with Sentinel set REDIS_SENTINELS and REDIS_SENTINEL_MASTER`);
    }
  }
  const report = await inspectRedis(topology, client);
  if (!report.up) throw new RedisSettingError(`${TOPOLOGY_SETTING[topology.kind]}: Redis answered but is not usable (${report.problem})`);
  return report;
}

/**
 * What the sentinels say about `masterName`, one short connection each: the master's address when a
 * sentinel knows it; throws RedisSettingError when every sentinel that answered does not know the name.
 * Resolves undefined when none answered (down, not misconfigured: start-up waits for them).
 */
export async function askSentinels(topology: Extract<RedisTopology, { kind: 'sentinel' }>, timeoutMs: number): Promise<RedisAddress | undefined> {
  let answered = 0;
  for (const sentinel of topology.sentinels) {
    const probe = new Redis({
      ...sentinel,
      lazyConnect: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
      connectTimeout: timeoutMs,
      commandTimeout: timeoutMs,
      ...(topology.sentinelPassword ? { password: topology.sentinelPassword } : {}),
      ...(topology.tls ? { tls: {} } : {}),
    });
    probe.on('error', () => {}); // the failure surfaces through connect()/call() below
    try {
      await probe.connect();
      const reply = (await probe.call('SENTINEL', 'get-master-addr-by-name', topology.masterName)) as [string, string] | null;
      answered++;
      if (reply) return { host: reply[0], port: Number(reply[1]) };
    } catch (error) {
      if (/WRONGPASS|NOAUTH|invalid password/i.test((error as Error).message)) {
        throw new RedisSettingError(`REDIS_SENTINEL_PASSWORD: sentinel ${sentinel.host}:${sentinel.port} refused the password (${(error as Error).message.slice(0, 80)})`);
      }
      // Unreachable or not a sentinel: another one may answer; none answering is reported by the caller.
    } finally {
      probe.disconnect();
    }
  }
  if (answered > 0) throw new RedisSettingError(`REDIS_SENTINEL_MASTER: no sentinel of REDIS_SENTINELS monitors a master named "${topology.masterName}"`);
  return undefined;
}

/** Refusals a client reports while it tries to connect (auth, a node that is not a cluster). */
export function settingErrorFrom(topology: RedisTopology, error: Error): RedisSettingError | undefined {
  const message = error.message;
  if (/WRONGPASS|NOAUTH|invalid password|invalid username-password/i.test(message)) {
    return new RedisSettingError(`REDIS_PASSWORD: Redis refused the credentials (${message.slice(0, 80)})`);
  }
  if (topology.kind === 'cluster' && /cluster support disabled/i.test(message)) {
    return new RedisSettingError('REDIS_CLUSTER_NODES: the nodes are not a Redis Cluster (cluster support disabled); use REDIS_URL or REDIS_SENTINELS');
  }
  return undefined;
}
