// A six-node Redis Cluster (3 masters + 3 replicas) on loopback, made with
// `redis-cli --cluster create ... --cluster-replicas 1 --cluster-yes`, for failover tests: kill a master,
// wait until its replica has taken over and the cluster is ok again.
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { HOST, makeTempDir, pickPort, portWasTaken, registerHandle, removeDir, run, unregisterHandle, pollFor } from './common.js';
import { REDIS_CLI_BIN, RedisNode, startRedisProcess } from './redis.js';
import { FaultProxy } from '../fault-proxy.js';

/** The cluster bus of a node listens on its port + 10000, which must stay below 32768 too. */
export const CLUSTER_BUS_OFFSET = 10_000;

export interface RedisClusterOptions {
  /** Nodes on basePort .. basePort+5 (buses on +10000); a free block below 22768 when omitted. */
  basePort?: number;
  /** cluster-node-timeout: how long a master must be unreachable to be failed over (2000 ms). */
  nodeTimeoutMs?: number;
  /** Bound on each wait; default 30 s. */
  timeoutMs?: number;
  /**
   * A fault proxy (kit/fault-proxy.ts) in front of each node, which announces the proxy's port
   * (cluster-announce-port; its bus keeps its own): clients (CLUSTER SLOTS, MOVED) and replication go
   * through the proxies (`proxies`, in node order), the cluster bus does not, so a fault on the client path
   * starts no failover.
   */
  faultProxies?: boolean;
}

/** One line of CLUSTER NODES (`port`: the port the node announces). */
export interface ClusterNodeInfo {
  id: string;
  port: number;
  flags: string[];
  /** The id of its master for a replica, undefined for a master. */
  masterId: string | undefined;
  role: 'master' | 'replica';
  /** Whether the node is flagged fail / pfail by the one asked. */
  failing: boolean;
  /** Slot ranges it serves, e.g. ["0-5460"]. */
  slots: string[];
}

export function parseClusterNodes(text: string): ClusterNodeInfo[] {
  return text.trim().split('\n').map((line) => {
    const [id, addr, flagText, master, , , , , ...slots] = line.trim().split(' ');
    const flags = flagText.split(',');
    return {
      id,
      port: Number(addr.split('@')[0].split(':').pop()),
      flags,
      masterId: master === '-' ? undefined : master,
      role: flags.includes('master') ? 'master' : 'replica',
      failing: flags.includes('fail') || flags.includes('fail?'),
      slots: slots.filter((s) => !s.startsWith('[')),
    } satisfies ClusterNodeInfo;
  });
}

export class RedisCluster {
  private destroyed = false;
  constructor(
    /** The six nodes, basePort first. Roles change with failovers: ask topology(). */
    readonly nodes: RedisNode[],
    readonly dir: string,
    private readonly timeoutMs: number,
    /** With `faultProxies`: the proxy in front of each node, in node order. */
    readonly proxies: FaultProxy[] = [],
  ) {}

  /** Addresses of all six nodes (their proxies' with `faultProxies`), as ioredis wants them: `new Cluster(cluster.startupNodes())`. */
  startupNodes(): { host: string; port: number }[] {
    return this.nodes.map((n, i) => ({ host: HOST, port: this.proxies[i]?.port ?? n.port }));
  }

  get liveNodes(): RedisNode[] {
    return this.nodes.filter((n) => n.running);
  }

  /** The node on `port`, or behind the proxy on `port`. */
  node(port: number): RedisNode {
    const n = this.nodes.find((x, i) => x.port === port || this.proxies[i]?.port === port);
    if (!n) throw new Error(`topology: no cluster node on :${port}`);
    return n;
  }

  /** CLUSTER NODES as seen by a live node (the first that answers). */
  async topology(): Promise<ClusterNodeInfo[]> {
    let last: unknown;
    for (const n of this.liveNodes) {
      try {
        return parseClusterNodes(String(await n.command('CLUSTER', 'NODES')));
      } catch (err) {
        last = err;
      }
    }
    throw new Error(`topology: no cluster node answered CLUSTER NODES${last instanceof Error ? `: ${last.message}` : ''}`);
  }

  /** The live masters that serve slots. */
  async masters(): Promise<RedisNode[]> {
    const topo = await this.topology();
    return topo.filter((t) => t.role === 'master' && !t.failing && t.slots.length > 0).map((t) => this.node(t.port));
  }

  /** The live replica of the master on `masterPort`. */
  async replicaOf(masterPort: number): Promise<RedisNode> {
    const topo = await this.topology();
    const master = topo.find((t) => this.node(t.port) === this.node(masterPort));
    const replica = topo.find((t) => master && t.masterId === master.id && !t.failing);
    if (!replica) throw new Error(`topology: master :${masterPort} has no live replica`);
    return this.node(replica.port);
  }

  /**
   * Resolves when every live node reports cluster_state:ok with all 16384 slots ok, and every slot
   * owner in CLUSTER NODES is a live master (nothing is still served by the dead).
   */
  async waitForClusterOk(timeoutMs = this.timeoutMs): Promise<void> {
    await pollFor('redis cluster state ok on every live node', async () => {
      for (const n of this.liveNodes) {
        const info = (await n.command('CLUSTER', 'INFO')) as string;
        if (!/cluster_state:ok/.test(info) || !/cluster_slots_ok:16384/.test(info)) return false;
      }
      const topo = await this.topology();
      return topo.every((t) => t.slots.length === 0 || (t.role === 'master' && this.node(t.port).running && !t.failing));
    }, { timeoutMs });
  }

  /**
   * SIGKILLs a master (the one on `port`, or the first live master) and returns it with the replica
   * expected to take over.
   */
  async killMaster(port?: number): Promise<{ killed: RedisNode; replica: RedisNode }> {
    const master = port !== undefined ? this.node(port) : (await this.masters())[0];
    if (!master) throw new Error('topology: no live master to kill');
    const replica = await this.replicaOf(master.port);
    await master.kill();
    return { killed: master, replica };
  }

  /** Waits until `replica` is a master serving slots and the cluster is ok again; returns it. */
  async waitForPromotion(replica: RedisNode, timeoutMs = this.timeoutMs): Promise<RedisNode> {
    await pollFor(`redis cluster replica :${replica.port} to be promoted`, async () => {
      const role = (await replica.info('replication')).role;
      return role === 'master';
    }, { timeoutMs });
    await this.waitForClusterOk(timeoutMs);
    return replica;
  }

  /** killMaster() then waitForPromotion(): a master failover in one call. */
  async failover(port?: number, timeoutMs = this.timeoutMs): Promise<{ killed: RedisNode; promoted: RedisNode }> {
    const { killed, replica } = await this.killMaster(port);
    const promoted = await this.waitForPromotion(replica, timeoutMs);
    return { killed, promoted };
  }

  /** Stops every node and removes the temp folder. Idempotent; what stopAll() calls. */
  async destroy(): Promise<void> {
    if (this.destroyed) return;
    this.destroyed = true;
    unregisterHandle(this);
    await Promise.all(this.nodes.map((n) => n.stop()));
    await Promise.all(this.proxies.map((p) => p.close()));
    removeDir(this.dir);
  }
}

async function startCluster(basePort: number, opts: RedisClusterOptions): Promise<RedisCluster> {
  if (basePort + 5 + CLUSTER_BUS_OFFSET >= 32_768) throw new Error(`topology: cluster basePort ${basePort} puts a cluster bus at or above 32768`);
  const timeoutMs = opts.timeoutMs ?? 30_000;
  const dir = makeTempDir('redis-cluster');
  const nodes: RedisNode[] = [];
  const proxies: FaultProxy[] = [];
  try {
    for (let i = 0; i < 6; i++) {
      const port = basePort + i;
      const d = path.join(dir, String(port));
      mkdirSync(d);
      if (opts.faultProxies) proxies.push(await FaultProxy.start({ target: { port }, port: await pickPort() }));
      const announce = opts.faultProxies
        ? [`cluster-announce-ip ${HOST}`, `cluster-announce-port ${proxies[i].port}`, `cluster-announce-bus-port ${port + CLUSTER_BUS_OFFSET}`]
        : [];
      nodes.push(await startRedisProcess('redis cluster node', port, d, [
        'cluster-enabled yes',
        'cluster-config-file nodes.conf',
        `cluster-node-timeout ${opts.nodeTimeoutMs ?? 2_000}`,
        ...announce,
      ], { timeoutMs }));
    }
    const cluster = new RedisCluster(nodes, dir, timeoutMs, proxies);
    await run(REDIS_CLI_BIN, ['--cluster', 'create', ...cluster.startupNodes().map((n) => `${n.host}:${n.port}`), '--cluster-replicas', '1', '--cluster-yes'], { timeoutMs });
    // Every node knows all six, every replica is in sync (so it can take over), and all slots are served.
    await pollFor('redis cluster: six known nodes and replicas in sync', async () => {
      for (const n of nodes) {
        const info = (await n.command('CLUSTER', 'INFO')) as string;
        if (!/cluster_known_nodes:6\r?\n/.test(info)) return false;
        const repl = await n.info('replication');
        if (repl.role === 'slave' && repl.master_link_status !== 'up') return false;
      }
      return (await cluster.masters()).length === 3;
    }, { timeoutMs });
    await cluster.waitForClusterOk(timeoutMs);
    registerHandle(cluster);
    return cluster;
  } catch (err) {
    for (const n of nodes.reverse()) await n.kill();
    await Promise.all(proxies.map((p) => p.close()));
    removeDir(dir);
    throw err;
  }
}

/**
 * Starts six cluster-enabled redis-servers on basePort..basePort+5 and joins them with
 * `redis-cli --cluster create ... --cluster-replicas 1 --cluster-yes`; resolves once the cluster is ok,
 * with three masters whose replicas are in sync.
 */
export async function startRedisCluster(opts: RedisClusterOptions = {}): Promise<RedisCluster> {
  if (opts.basePort !== undefined) return startCluster(opts.basePort, opts);
  for (let attempt = 1; ; attempt++) {
    const base = await pickPort({ min: 12_000, max: 22_760, count: 6, alsoFree: [CLUSTER_BUS_OFFSET] });
    try {
      return await startCluster(base, opts);
    } catch (err) {
      if (attempt >= 3 || !portWasTaken(err)) throw err;
    }
  }
}
