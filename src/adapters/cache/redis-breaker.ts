// The breaker around one Redis connection (or a Cluster's). A half-open Redis (connection kept, nothing
// answered: a partition, a dead peer behind a NAT, a hung server) used to cost every command its deadline.
// ioredis's socketTimeout (redis.ts) drops a connection that stays silent with commands out, and a new one
// turns 'ready' only once its handshake answered; until then every command fails at once (no offline
// queue), which sends each caller down the path it takes when Redis is down: in-process rate limits,
// agent views from Postgres, invalidations in process, the verified-secret memory of this process. This
// module makes that state visible: open on such a drop (one warning), closed when a PING answers within
// the client's command deadline (one line), tried every `checkEveryMs` and on each 'ready'.
import { Cluster } from 'ioredis';
import { masters, type RedisClient } from './redis.js';

/** Which connection a breaker watches (ace_redis_breaker_open's `connection`). */
export type BreakerConnection = 'commands' | 'subscriber';

export interface RedisBreakerOptions {
  client: RedisClient;
  connection: BreakerConnection;
  /** How often a PING is sent while open. */
  checkEveryMs: number;
  /** Told once when it opens (with ioredis's reason) and once when it closes. */
  onChange: (open: boolean, why: string) => void;
}

/** ioredis's socketTimeout: the connection stayed silent past the limit and was dropped. */
export function isSilence(error: Error): boolean {
  return error.message.startsWith('Socket timeout');
}

export class RedisBreaker {
  private readonly client: RedisClient;
  private readonly checkEveryMs: number;
  private readonly onChange: (open: boolean, why: string) => void;
  private opened = false;
  private checking = false;
  private timer: NodeJS.Timeout | undefined;

  constructor({ client, checkEveryMs, onChange }: RedisBreakerOptions) {
    this.client = client;
    this.checkEveryMs = checkEveryMs;
    this.onChange = onChange;
    const onError = (error: Error) => {
      if (isSilence(error)) this.open(error.message);
    };
    client.on('error', onError);
    if (client instanceof Cluster) client.on('node error', onError);
    client.on('ready', () => void this.check());
  }

  /** Is Redis being gone around (a connection was dropped for silence and no PING has answered since)? */
  get isOpen(): boolean {
    return this.opened;
  }

  private open(why: string): void {
    if (this.opened) return;
    this.opened = true;
    this.onChange(true, why);
    this.timer = setInterval(() => void this.check(), this.checkEveryMs);
    this.timer.unref();
  }

  /** The health check: every master answers PING within the command deadline (fails at once while not ready). */
  private async check(): Promise<void> {
    if (!this.opened || this.checking) return;
    this.checking = true;
    try {
      const nodes = masters(this.client);
      if (nodes.length === 0) return;
      await Promise.all(nodes.map((node) => node.ping()));
    } catch {
      // Still open: that is the state the gauge shows; the next PING decides again.
      return;
    } finally {
      this.checking = false;
    }
    this.opened = false;
    clearInterval(this.timer);
    this.onChange(false, 'PING answered');
  }

  stop(): void {
    clearInterval(this.timer);
  }
}
