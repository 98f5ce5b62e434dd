// The revocation feed's push half: one WebSocket at a time to the platform's feed (`?since=` our sequence,
// the feed token as a subprotocol), its frames handed to the receiver (revocation-feed.ts), a handshake that
// hangs or a socket gone silent abandoned, every loss counted and followed by a jittered, exponential
// reconnection. The receiver polls meanwhile (feed-poll.ts): a lost socket asks it for a poll at once.
import { CLOSE_CREDENTIAL_REVOKED, FEED_SUBPROTOCOL, FEED_TOKEN_SUBPROTOCOL_PREFIX } from '@agent-credential-exchange/protocol/feed-document';

/** The subset of the WebSocket API used here (browser/undici WebSocket and the `ws` package both have it). */
export interface FeedSocket {
  onopen: ((event: unknown) => void) | null;
  onmessage: ((event: { data: unknown }) => void) | null;
  onclose: ((event: unknown) => void) | null;
  onerror: ((event: unknown) => void) | null;
  close(code?: number, reason?: string): void;
}
/** The WebSocket constructor: `protocols` carries the feed token (browser and undici WebSockets cannot set headers). */
export type FeedSocketConstructor = new (url: string, protocols?: string | string[]) => FeedSocket;

/** The socket's settings, as RevocationFeedOptions names them (documented there). */
export interface FeedSocketSettings {
  webSocket?: FeedSocketConstructor | false;
  reconnectBaseSeconds?: number;
  reconnectMaxSeconds?: number;
  socketSilenceSeconds?: number;
  handshakeTimeoutSeconds?: number;
}

export interface FeedSocketLinkOptions {
  /** ws(s)://…/revocations/ws of the platform. */
  socketUrl: string;
  feedToken: string;
  options: FeedSocketSettings;
  /** Where the runtime has no global WebSocket: another implementation, or undefined (then poll). */
  fallbackWebSocket?: () => Promise<FeedSocketConstructor | undefined>;
  /** The sequence the receiver holds: a new socket resumes after it. */
  seq: () => number;
  /** A frame's text, to check and apply (a rejected SET is counted by the receiver). */
  apply: (text: string) => void;
  /** The socket was closed because the feed credential was deleted. */
  unauthorized: () => void;
  /** A socket was lost: whatever was on its way may be lost too. */
  onLost: () => void;
  warn: (message: string, detail?: Record<string, unknown>) => void;
  /** The receiver's counters (stats()). */
  counters: { socketDrops: number };
}

export class FeedSocketLink {
  /** The socket is open. */
  connected = false;
  /** The reason of the last loss. */
  lastSocketDrop: string | undefined;
  private socket: FeedSocket | undefined;
  private attempt = 0;
  private closed = false;
  private reconnectTimer: ReturnType<typeof setTimeout> | undefined;
  private readonly options: FeedSocketSettings;
  private readonly counters: { socketDrops: number };

  constructor(private readonly link: FeedSocketLinkOptions) {
    this.options = link.options;
    this.counters = link.counters;
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.reconnectTimer);
    const socket = this.socket;
    this.socket = undefined; // so that its close is not counted as a drop
    this.connected = false;
    socket?.close();
  }

  private async socketConstructor(): Promise<FeedSocketConstructor | undefined> {
    if (this.options.webSocket) return this.options.webSocket;
    const global = (globalThis as { WebSocket?: FeedSocketConstructor }).WebSocket;
    if (global) return global;
    // No global WebSocket (Node 20): the Node entry point offers the `ws` package here; the core imports
    // nothing of its own. Without either, the feed is polled.
    return this.link.fallbackWebSocket?.();
  }

  async connect(): Promise<void> {
    if (this.closed) return;
    const Socket = await this.socketConstructor();
    if (this.closed) return;
    if (!Socket) {
      this.link.warn('no WebSocket implementation available: polling the revocation feed instead');
      return;
    }
    const url = `${this.link.socketUrl}?since=${this.link.seq()}`;
    let socket: FeedSocket;
    try {
      socket = new Socket(url, [FEED_SUBPROTOCOL, `${FEED_TOKEN_SUBPROTOCOL_PREFIX}${this.link.feedToken}`]);
    } catch (error) {
      this.counters.socketDrops++;
      this.lastSocketDrop = `not opened: ${(error as Error)?.message ?? String(error)}`;
      return this.scheduleReconnect();
    }
    this.socket = socket;
    let lastMessageAt = 0;
    let watchdog: ReturnType<typeof setInterval> | undefined;
    // An upgrade a proxy accepts and never answers would otherwise hold this socket in "connecting" forever.
    const handshake = setTimeout(() => lost('handshake timeout'), (this.options.handshakeTimeoutSeconds ?? 5) * 1000);
    handshake.unref?.();
    const lost = (reason: string) => {
      if (this.socket !== socket) return; // handled already (error and close both report one loss), or closed by us
      this.socket = undefined;
      this.connected = false;
      clearTimeout(handshake);
      clearInterval(watchdog);
      this.counters.socketDrops++;
      this.lastSocketDrop = reason;
      // Abandoned by us (timeout, silence): dropped without waiting for a closing handshake the peer may
      // never answer (`ws` has terminate; others close). The handlers stay, and see it is no longer ours.
      if (reason === 'handshake timeout' || reason === 'silent') {
        const abandoned = socket as FeedSocket & { terminate?: () => void };
        if (typeof abandoned.terminate === 'function') abandoned.terminate();
        else socket.close();
      }
      if (this.closed) return;
      // Whatever was on its way may be lost: poll now (spaced), then every period until a socket proves the copy.
      this.link.onLost();
      this.scheduleReconnect();
    };
    socket.onopen = () => {
      if (this.socket !== socket) return;
      clearTimeout(handshake);
      this.connected = true;
      this.attempt = 0;
      lastMessageAt = Date.now();
      const silenceMs = (this.options.socketSilenceSeconds ?? 20) * 1000;
      watchdog = setInterval(() => {
        if (Date.now() - lastMessageAt > silenceMs) lost('silent');
      }, Math.min(silenceMs, 5000));
      watchdog.unref?.();
    };
    socket.onmessage = (event) => {
      if (this.socket !== socket) return;
      lastMessageAt = Date.now();
      void messageText(event.data).then((text) => {
        if (text === undefined) return;
        // A rejected SET is counted and warned about in applySet; nothing more to do here. Only a signed
        // head proves the copy current: any other frame (a proxy's keep-alive) proves nothing.
        this.link.apply(text.trim());
      });
    };
    // Node 22's WebSocket (undici) reports a connection that fails to open with `error` and no `close`:
    // waiting for `close` alone would never reconnect.
    socket.onerror = () => lost('error');
    socket.onclose = (event) => {
      const code = (event as { code?: unknown } | null)?.code;
      if (code === CLOSE_CREDENTIAL_REVOKED && this.socket === socket) this.link.unauthorized();
      lost(typeof code === 'number' ? `closed (${code})` : 'closed');
    };
  }

  private scheduleReconnect(): void {
    if (this.closed) return;
    const base = (this.options.reconnectBaseSeconds ?? 0.25) * 1000;
    const max = (this.options.reconnectMaxSeconds ?? 10) * 1000;
    const ceiling = Math.min(max, base * 2 ** this.attempt++);
    // Full jitter on the upper half: many platforms cut off together do not come back together.
    this.reconnectTimer = setTimeout(() => void this.connect(), ceiling / 2 + Math.random() * (ceiling / 2));
    this.reconnectTimer.unref?.();
  }
}

/** A frame's text: string frames as they are, binary ones (ArrayBuffer, a view, `ws`'s Buffer, a Blob) decoded. */
async function messageText(data: unknown): Promise<string | undefined> {
  if (typeof data === 'string') return data;
  if (data instanceof ArrayBuffer) return new TextDecoder().decode(new Uint8Array(data));
  if (ArrayBuffer.isView(data)) return new TextDecoder().decode(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
  if (typeof (data as { text?: unknown } | null)?.text === 'function') return (data as { text(): Promise<string> }).text();
  return undefined;
}
