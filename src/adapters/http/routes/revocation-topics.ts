// The transmitter's transport on a uWS app: one topic per platform, and the count of this process's
// subscribers per platform (the transmitter pushes and heartbeats only platforms that have one). Made
// before the transmitter and the HTTP server (src/app/servers.ts); the socket handlers
// (revocation-socket.ts) subscribe and unsubscribe through it.
import type * as uWS from 'uWebSockets.js';
import type { FeedTransport } from '../../../core/revocation/transmitter.js';

const topicOf = (platformId: string) => `rev:${platformId}`;

export interface SocketTopicsOptions {
  /** The uWS app whose sockets subscribe and whose topics are published to. */
  readonly app: uWS.TemplatedApp;
}

export class SocketTopics implements FeedTransport {
  private readonly subscribers = new Map<string, number>();
  private readonly app: uWS.TemplatedApp;

  constructor({ app }: SocketTopicsOptions) {
    this.app = app;
  }

  publish(platformId: string, message: string): void {
    this.app.publish(topicOf(platformId), message, false);
  }

  subscribedPlatforms(): string[] {
    return [...this.subscribers.keys()];
  }

  /** An open socket joins its platform's topic. */
  subscribe(ws: uWS.WebSocket<unknown>, platformId: string): void {
    ws.subscribe(topicOf(platformId));
    this.subscribers.set(platformId, (this.subscribers.get(platformId) ?? 0) + 1);
  }

  /** A socket of this platform closed (uWS drops its topics itself). */
  unsubscribed(platformId: string): void {
    const left = (this.subscribers.get(platformId) ?? 1) - 1;
    if (left <= 0) this.subscribers.delete(platformId);
    else this.subscribers.set(platformId, left);
  }
}
