// One redis-server (or sentinel) process on loopback, and a one-shot command helper the waits use.
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { Redis } from 'ioredis';
import { HOST, Proc, makeTempDir, pollFor, registerHandle, removeDir, unregisterHandle, withPort } from './common.js';

export const REDIS_SERVER_BIN = process.env.TOPOLOGY_REDIS_SERVER_BIN ?? 'redis-server';
export const REDIS_CLI_BIN = process.env.TOPOLOGY_REDIS_CLI_BIN ?? 'redis-cli';

/**
 * Sends one command on a fresh connection with no retries and no offline queue, so a dead node answers
 * with an error at once instead of a reconnect loop; the connection is closed afterwards.
 */
export async function redisCommand(port: number, command: string, ...args: (string | number)[]): Promise<unknown> {
  const client = new Redis({
    host: HOST,
    port,
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    connectTimeout: 2_000,
    commandTimeout: 5_000,
  });
  // Connection errors surface through connect()/call() below; this listener only stops the 'error'
  // event from being unhandled.
  client.on('error', () => {});
  try {
    await client.connect();
    return await client.call(command, ...args);
  } finally {
    client.disconnect();
  }
}

/** Parses an INFO section ("key:value" lines) into an object. */
export function parseInfo(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split(/\r?\n/)) {
    const i = line.indexOf(':');
    if (i > 0 && !line.startsWith('#')) out[line.slice(0, i)] = line.slice(i + 1);
  }
  return out;
}

export async function info(port: number, section: string): Promise<Record<string, string>> {
  return parseInfo(String(await redisCommand(port, 'INFO', section)));
}

/** A redis-server process (server or sentinel) of the kit. */
export class RedisNode {
  constructor(
    readonly port: number,
    readonly proc: Proc,
    /** Its own folder inside the topology's temp folder (config, dump, nodes.conf, log). */
    readonly dir: string,
  ) {}

  get host(): string {
    return HOST;
  }
  get pid(): number {
    return this.proc.pid;
  }
  get running(): boolean {
    return !this.proc.exited;
  }

  command(command: string, ...args: (string | number)[]): Promise<unknown> {
    return redisCommand(this.port, command, ...args);
  }

  info(section: string): Promise<Record<string, string>> {
    return info(this.port, section);
  }

  /** SIGKILL: the node vanishes without a goodbye, as in a crash. */
  async kill(): Promise<void> {
    await this.proc.kill();
  }

  /** SIGTERM (redis shuts down cleanly), SIGKILL if it overruns. */
  async stop(): Promise<void> {
    await this.proc.stop('SIGTERM', 10_000);
  }

  async waitPing(timeoutMs: number): Promise<void> {
    await pollFor(`redis on ${HOST}:${this.port} to answer PING`, async () => {
      this.proc.assertRunning();
      // The pid check: a server of someone else's that won a race for this port must not pass for ours.
      return (await this.command('PING')) === 'PONG' && Number((await this.info('server')).process_id) === this.pid;
    }, { timeoutMs });
  }
}

/**
 * Starts redis-server with a config file written from `config` (one "key value" line each, values as
 * given) in `dir`; `sentinel` runs it in sentinel mode (which rewrites that file, hence a file at all).
 */
export async function startRedisProcess(
  name: string,
  port: number,
  dir: string,
  config: string[],
  { sentinel = false, timeoutMs = 30_000 } = {},
): Promise<RedisNode> {
  const conf = path.join(dir, sentinel ? 'sentinel.conf' : 'redis.conf');
  writeFileSync(conf, [
    `port ${port}`,
    `bind ${HOST}`,
    'daemonize no',
    `dir ${dir}`,
    'logfile ""',
    // No persistence; and a replica's full sync starts at once instead of after Redis 7's default 5 s
    // wait for more replicas to share a diskless transfer.
    ...(sentinel ? [] : ['save ""', 'appendonly no', 'repl-diskless-sync-delay 0']),
    ...config,
  ].join('\n') + '\n');
  const proc = new Proc(`${name} :${port}`, REDIS_SERVER_BIN, sentinel ? [conf, '--sentinel'] : [conf], path.join(dir, 'redis.log'), { cwd: dir });
  const node = new RedisNode(port, proc, dir);
  try {
    await node.waitPing(timeoutMs);
  } catch (err) {
    await proc.kill();
    throw err;
  }
  return node;
}

/** One standalone Redis server of the kit (no persistence), as a handle that stopAll() tears down. */
export class RedisServer extends RedisNode {
  private destroyed = false;

  /** redis://127.0.0.1:<port> */
  url(): string {
    return `redis://${HOST}:${this.port}`;
  }

  /** Stop (SIGTERM, SIGKILL if it overruns) and remove its folder. Idempotent; what stopAll() calls. */
  async destroy(): Promise<void> {
    if (this.destroyed) return;
    this.destroyed = true;
    unregisterHandle(this);
    await this.stop();
    removeDir(this.dir);
  }
}

/** A standalone Redis server on loopback (a free port below 32768 unless `port`), answering PING. */
export async function startRedis(opts: { port?: number; timeoutMs?: number } = {}): Promise<RedisServer> {
  const dir = makeTempDir('redis');
  try {
    const node = await withPort(opts.port, (port) => startRedisProcess('redis', port, dir, [], { timeoutMs: opts.timeoutMs }));
    const server = new RedisServer(node.port, node.proc, node.dir);
    registerHandle(server);
    return server;
  } catch (err) {
    removeDir(dir);
    throw err;
  }
}
