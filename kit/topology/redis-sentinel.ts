// Redis primary + replica watched by three sentinels (quorum 2), for failover tests: kill the primary,
// wait until the sentinels have promoted the replica.
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { HOST, makeTempDir, pickPort, portWasTaken, registerHandle, removeDir, unregisterHandle, pollFor } from './common.js';
import { RedisNode, startRedisProcess } from './redis.js';
import { FaultProxy } from '../fault-proxy.js';

export interface RedisSentinelOptions {
  /**
   * [primary, replica, sentinel1, sentinel2, sentinel3] on 127.0.0.1; a free block below 32768 when
   * omitted.
   */
  ports?: [number, number, number, number, number];
  /** Sentinel master name; 'acemaster' unless told. */
  masterName?: string;
  /** sentinel down-after-milliseconds: how long the primary must be silent to be declared down (1000). */
  downAfterMs?: number;
  /** sentinel failover-timeout (10000). */
  failoverTimeoutMs?: number;
  /** Bound on each wait; default 30 s. */
  timeoutMs?: number;
  /**
   * A fault proxy (kit/fault-proxy.ts) in front of each data node, which announces the proxy's port
   * (replica-announce-port) and is monitored there by the sentinels: whoever asks them for the master, and
   * the replication stream, goes through the proxies (`proxies`), so their faults are not bypassed.
   */
  faultProxies?: boolean;
}

export interface Address {
  host: string;
  port: number;
}

export class RedisSentinelGroup {
  private destroyed = false;
  constructor(
    readonly masterName: string,
    /** The primary at start (after a failover it is dead or a replica: ask getMaster()). */
    readonly primary: RedisNode,
    /** The replica at start. */
    readonly replica: RedisNode,
    readonly sentinels: RedisNode[],
    readonly dir: string,
    private readonly timeoutMs: number,
    /** With `faultProxies`: the proxies of the primary and the replica (as started), in that order. */
    readonly proxies: FaultProxy[] = [],
  ) {}

  /** The data nodes (primary and replica as started). */
  get nodes(): RedisNode[] {
    return [this.primary, this.replica];
  }

  /** The data node on `port`, or behind the proxy on `port`. */
  nodeAt(port: number): RedisNode | undefined {
    return this.nodes.find((n, i) => n.port === port || this.proxies[i]?.port === port);
  }

  /** The sentinels' addresses, as ioredis wants them: `new Redis({ sentinels, name: masterName })`. */
  sentinelAddresses(): Address[] {
    return this.sentinels.map((s) => ({ host: HOST, port: s.port }));
  }

  /** The master address every live sentinel that answers reports (SENTINEL get-master-addr-by-name). */
  async getMaster(): Promise<Address> {
    const answers = await this.askSentinels();
    if (answers.length === 0) throw new Error('topology: no sentinel answered get-master-addr-by-name');
    const first = answers[0];
    if (answers.some((a) => a.port !== first.port)) throw new Error(`topology: sentinels disagree on the master: ${answers.map((a) => a.port).join(', ')}`);
    return first;
  }

  /** The node object of the current master. */
  async currentMaster(): Promise<RedisNode> {
    const { port } = await this.getMaster();
    const node = this.nodeAt(port);
    if (!node) throw new Error(`topology: sentinels report a master :${port} that is not in this group`);
    return node;
  }

  /** SIGKILLs the current master (as the sentinels report it) and returns it. */
  async killPrimary(): Promise<RedisNode> {
    const master = await this.currentMaster();
    await master.kill();
    return master;
  }

  /**
   * Waits until every live sentinel reports a master other than `old` and that node says role:master;
   * returns it.
   */
  async waitForNewMaster(old: Address | RedisNode, timeoutMs = this.timeoutMs): Promise<RedisNode> {
    return pollFor(`sentinels of ${this.masterName} to report a master other than :${old.port}`, async () => {
      const answers = await this.askSentinels();
      const live = this.sentinels.filter((s) => s.running).length;
      if (answers.length < live || answers.some((a) => a.port === old.port || a.port !== answers[0].port)) return undefined;
      const node = this.nodeAt(answers[0].port);
      if (!node?.running) return undefined;
      return (await node.info('replication')).role === 'master' ? node : undefined;
    }, { timeoutMs });
  }

  /** killPrimary() then waitForNewMaster(): the sentinel failover in one call. */
  async failover(timeoutMs = this.timeoutMs): Promise<{ killed: RedisNode; promoted: RedisNode }> {
    const killed = await this.killPrimary();
    const promoted = await this.waitForNewMaster(killed, timeoutMs);
    return { killed, promoted };
  }

  /** Stops every process and removes the temp folder. Idempotent; what stopAll() calls. */
  async destroy(): Promise<void> {
    if (this.destroyed) return;
    this.destroyed = true;
    unregisterHandle(this);
    // Sentinels first, so that none starts a failover while the data nodes go down.
    await Promise.all(this.sentinels.map((s) => s.stop()));
    await Promise.all([this.replica.stop(), this.primary.stop()]);
    await Promise.all(this.proxies.map((p) => p.close()));
    removeDir(this.dir);
  }

  private async askSentinels(): Promise<Address[]> {
    const out: Address[] = [];
    for (const s of this.sentinels) {
      if (!s.running) continue;
      try {
        const reply = (await s.command('SENTINEL', 'get-master-addr-by-name', this.masterName)) as [string, string] | null;
        if (reply) out.push({ host: reply[0], port: Number(reply[1]) });
      } catch {
        // A sentinel that does not answer right now just has no vote in this round; waits poll again.
      }
    }
    return out;
  }
}

/** Flat [k1, v1, k2, v2, ...] reply (SENTINEL MASTER) to an object. */
function pairs(reply: unknown): Record<string, string> {
  const arr = reply as string[];
  const out: Record<string, string> = {};
  for (let i = 0; i + 1 < arr.length; i += 2) out[arr[i]] = arr[i + 1];
  return out;
}

async function startGroup(ports: number[], opts: RedisSentinelOptions): Promise<RedisSentinelGroup> {
  const masterName = opts.masterName ?? 'acemaster';
  const timeoutMs = opts.timeoutMs ?? 30_000;
  const dir = makeTempDir('redis-sentinel');
  const started: RedisNode[] = [];
  const sub = (name: string) => {
    const d = path.join(dir, name);
    mkdirSync(d);
    return d;
  };
  const proxies: FaultProxy[] = [];
  try {
    const [pPort, rPort, ...sPorts] = ports;
    if (opts.faultProxies) for (const port of [pPort, rPort]) proxies.push(await FaultProxy.start({ target: { port }, port: await pickPort() }));
    // Where the others reach each data node: its proxy's port, or its own.
    const [pFront, rFront] = [pPort, rPort].map((port, i) => proxies[i]?.port ?? port);
    const announce = (front: number) => (proxies.length > 0 ? [`replica-announce-ip ${HOST}`, `replica-announce-port ${front}`] : []);
    const primary = await startRedisProcess('redis primary', pPort, sub('primary'), announce(pFront), { timeoutMs });
    started.push(primary);
    const replica = await startRedisProcess('redis replica', rPort, sub('replica'), [`replicaof ${HOST} ${pFront}`, ...announce(rFront)], { timeoutMs });
    started.push(replica);
    // Replica in sync before the sentinels start, so their first INFO of the primary already lists it.
    await pollFor(`redis replica :${rPort} to sync from :${pPort}`, async () => {
      const r = await replica.info('replication');
      const p = await primary.info('replication');
      return r.master_link_status === 'up' && /state=online/.test(p.slave0 ?? '');
    }, { timeoutMs });
    const sentinels: RedisNode[] = [];
    for (const [i, port] of sPorts.entries()) {
      const s = await startRedisProcess(`redis sentinel ${i + 1}`, port, sub(`sentinel${i + 1}`), [
        `sentinel monitor ${masterName} ${HOST} ${pFront} 2`,
        `sentinel down-after-milliseconds ${masterName} ${opts.downAfterMs ?? 1_000}`,
        `sentinel failover-timeout ${masterName} ${opts.failoverTimeoutMs ?? 10_000}`,
        `sentinel parallel-syncs ${masterName} 1`,
      ], { sentinel: true, timeoutMs });
      started.push(s);
      sentinels.push(s);
    }
    // A failover needs a majority of sentinels that know each other (hello messages, every 2 s) and the
    // replica: wait until each one sees the other two and the replica.
    await pollFor(`sentinels of ${masterName} to see the replica and each other`, async () => {
      for (const s of sentinels) {
        const m = pairs(await s.command('SENTINEL', 'MASTER', masterName));
        if (m['num-slaves'] !== '1' || m['num-other-sentinels'] !== '2' || m.flags !== 'master') return false;
      }
      return true;
    }, { timeoutMs });
    const group = new RedisSentinelGroup(masterName, primary, replica, sentinels, dir, timeoutMs, proxies);
    registerHandle(group);
    return group;
  } catch (err) {
    for (const node of started.reverse()) await node.kill();
    await Promise.all(proxies.map((p) => p.close()));
    removeDir(dir);
    throw err;
  }
}

/**
 * Starts a Redis primary, a replica of it and three sentinels (quorum 2) monitoring it as `masterName`;
 * resolves once the replica is in sync and every sentinel knows the replica and the two other sentinels.
 */
export async function startRedisSentinelGroup(opts: RedisSentinelOptions = {}): Promise<RedisSentinelGroup> {
  if (opts.ports) {
    if (opts.ports.length !== 5) throw new Error('topology: startRedisSentinelGroup wants 5 ports: primary, replica, 3 sentinels');
    return startGroup(opts.ports, opts);
  }
  for (let attempt = 1; ; attempt++) {
    const base = await pickPort({ count: 5 });
    try {
      return await startGroup([0, 1, 2, 3, 4].map((i) => base + i), opts);
    } catch (err) {
      if (attempt >= 3 || !portWasTaken(err)) throw err;
    }
  }
}
