// A TCP fault proxy for the tests and the bench: listens on a loopback port, forwards to a target (Postgres,
// PgBouncer, Redis) and can be switched at run time to the network faults operators meet:
//   forward    bytes flow both ways (the healthy state)
//   refuse     nothing listens: new connections get ECONNREFUSED, open ones are reset
//   reset      the port accepts, then resets every connection (open ones at once, new ones on arrival)
//   blackhole  connections stay open (new ones are accepted) and no byte gets through either way: a
//              half-open peer, a partition, a hung server
//   slow       every chunk is held for `delayMs` each way, in order (latency, not loss)
//   truncate   drop mid-response: the next chunk from the target is cut in half, the half is delivered, then
//              both sides are reset (every new connection meets the same on its first answer)
// Switching back to `forward` resets the connections whose byte stream a fault broke (black-holed or cut):
// their protocol state is lost and resuming them would hand a client half a message.
import net from 'node:net';

export type FaultMode = 'forward' | 'refuse' | 'reset' | 'blackhole' | 'slow' | 'truncate';
export const FAULT_MODES: readonly FaultMode[] = ['refuse', 'reset', 'blackhole', 'slow', 'truncate'];

export interface FaultProxyOptions {
  target: { port: number; host?: string };
  /** The port to listen on (loopback); a free one when omitted. */
  port?: number;
}

interface Pair {
  client: net.Socket;
  upstream?: net.Socket;
  /** Bytes were dropped or cut on this pair: the protocol stream is broken, it must not be resumed. */
  broken: boolean;
}

export class FaultProxy {
  private server: net.Server | undefined;
  private readonly pairs = new Set<Pair>();
  private current: FaultMode = 'forward';
  private delayMs = 0;
  /** Client bytes matching this never reach the target (a command swallowed on its way, the rest flowing). */
  private swallowed: RegExp | undefined;
  private readonly target: { port: number; host: string };
  port: number;
  /** Connections accepted and forwarded to the target so far (shows a client reconnected by itself). */
  forwardedConnections = 0;

  private constructor(options: FaultProxyOptions) {
    this.target = { port: options.target.port, host: options.target.host ?? '127.0.0.1' };
    this.port = options.port ?? 0;
  }

  static async start(options: FaultProxyOptions): Promise<FaultProxy> {
    const proxy = new FaultProxy(options);
    await proxy.listen();
    return proxy;
  }

  get mode(): FaultMode {
    return this.current;
  }

  /** host:port of the proxy. */
  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  /** Switches to `mode` (`delayMs` for `slow`, default 300 ms). */
  async set(mode: FaultMode, { delayMs = 300 }: { delayMs?: number } = {}): Promise<void> {
    const previous = this.current;
    this.current = mode;
    this.delayMs = delayMs;
    if (mode === 'refuse' || mode === 'reset') for (const pair of this.pairs) this.destroy(pair);
    if (mode === 'refuse' && this.server) {
      const server = this.server;
      this.server = undefined;
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
    if (mode !== 'refuse' && previous === 'refuse') await this.listen();
    if (mode === 'forward') for (const pair of this.pairs) if (pair.broken) this.destroy(pair);
  }

  /** From now on, a client chunk matching `pattern` is dropped (undefined: none is). */
  swallowClientChunks(pattern: RegExp | undefined): void {
    this.swallowed = pattern;
  }

  /** Back to forwarding. */
  heal(): Promise<void> {
    return this.set('forward');
  }

  async close(): Promise<void> {
    for (const pair of this.pairs) this.destroy(pair);
    const server = this.server;
    this.server = undefined;
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  private async listen(): Promise<void> {
    const server = net.createServer((socket) => this.accept(socket));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ port: this.port, host: '127.0.0.1', exclusive: true }, () => resolve());
    });
    this.port = (server.address() as net.AddressInfo).port;
    this.server = server;
  }

  private destroy(pair: Pair): void {
    if (!pair.client.destroyed) pair.client.resetAndDestroy();
    if (pair.upstream && !pair.upstream.destroyed) pair.upstream.resetAndDestroy();
    this.pairs.delete(pair);
  }

  private accept(client: net.Socket): void {
    // A reset client is what this proxy makes; its error event says nothing new.
    client.on('error', () => {});
    if (this.current === 'reset' || this.current === 'refuse') {
      client.resetAndDestroy();
      return;
    }
    const pair: Pair = { client, broken: this.current === 'blackhole' };
    this.pairs.add(pair);
    client.on('close', () => {
      pair.upstream?.destroy();
      this.pairs.delete(pair);
    });
    if (pair.broken) {
      client.on('data', () => {}); // swallowed until heal() resets it
      return;
    }
    this.forwardedConnections++;
    const upstream = net.connect(this.target.port, this.target.host);
    pair.upstream = upstream;
    upstream.on('error', () => client.destroy());
    upstream.on('close', () => client.destroy());
    this.relay(pair, client, upstream, false);
    this.relay(pair, upstream, client, true);
  }

  /** Chunk by chunk rather than pipe(), so a fault can start in the middle of a connection. */
  private relay(pair: Pair, from: net.Socket, to: net.Socket, fromTarget: boolean): void {
    // Chunks held by `slow` are sent in order: each waits for the one before it.
    let tail: Promise<void> = Promise.resolve();
    from.on('data', (chunk: Buffer) => {
      if (pair.broken) return;
      if (!fromTarget && this.swallowed?.test(chunk.toString('latin1'))) return;
      switch (this.current) {
        case 'blackhole':
          pair.broken = true;
          return;
        case 'truncate':
          if (!fromTarget) break;
          pair.broken = true;
          to.write(chunk.subarray(0, Math.max(1, chunk.length >> 1)), () => this.destroy(pair));
          return;
        case 'slow': {
          const delayMs = this.delayMs;
          from.pause();
          tail = tail.then(() => new Promise<void>((resolve) => setTimeout(resolve, delayMs))).then(() => {
            if (!to.destroyed && !pair.broken) to.write(chunk);
            from.resume();
          });
          return;
        }
        default:
          break;
      }
      if (!to.write(chunk)) {
        from.pause();
        to.once('drain', () => from.resume());
      }
    });
  }
}
