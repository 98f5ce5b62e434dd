// The middleware's copy of its platform's revocation feed. Kept current over a WebSocket (push), with
// polling of the signed document while the socket is down, and resumed from the last sequence after any
// gap. Checks are in memory: a request costs two map lookups, never a call to the service.
import { jwtVerify, type JWSHeaderParameters, type JWTPayload } from 'jose';
import { FEED_TYP, type FeedEntry, type FeedPayload } from './feed-document.js';
import type { JwksCache } from './jwks-cache.js';

/** The subset of the WebSocket API used here (browser/undici WebSocket and the `ws` package both have it). */
export interface FeedSocket {
  onopen: ((event: unknown) => void) | null;
  onmessage: ((event: { data: unknown }) => void) | null;
  onclose: ((event: unknown) => void) | null;
  onerror: ((event: unknown) => void) | null;
  close(code?: number, reason?: string): void;
}
export type FeedSocketConstructor = new (url: string) => FeedSocket;

export interface RevocationFeedOptions {
  /**
   * When the feed has been unreachable for longer than `staleAfterSeconds`:
   * - "open" (default): keep accepting tokens, warn loudly (once a minute) and count them in stats();
   * - "closed": refuse every token with 503 until the feed is back.
   */
  failMode?: 'open' | 'closed';
  /** How long the feed may be unreachable before failMode applies. Default 60. */
  staleAfterSeconds?: number;
  /** Polling period of the signed document while the WebSocket is down. Default 5. */
  pollIntervalSeconds?: number;
  /** false: poll only, never open a WebSocket. Default: the global WebSocket, else the `ws` package. */
  webSocket?: FeedSocketConstructor | false;
  /** First and longest wait between WebSocket reconnections (jittered, exponential). Defaults 0.25 and 10. */
  reconnectBaseSeconds?: number;
  reconnectMaxSeconds?: number;
  /** A socket silent this long (the service sends a heartbeat every 15 s) is replaced. Default 40. */
  socketSilenceSeconds?: number;
  /** Timeout of a document fetch. Default 5000. */
  timeoutMs?: number;
  /** Called on loud events (feed stale, document rejected). Default console.warn. */
  warn?: (message: string, detail?: Record<string, unknown>) => void;
}

export interface RevocationFeedStats {
  /** The WebSocket is open. */
  connected: boolean;
  /** Last sequence applied: the feed resumes from here. */
  seq: number;
  /** ms since the epoch of the last sign of life of the feed (0: never). */
  lastContactAt: number;
  /** Unreachable for longer than the bound. */
  stale: boolean;
  /** Tokens accepted while stale (failMode "open"). */
  acceptedWhileStale: number;
  /** Tokens refused because of an entry or a void key. */
  refused: number;
  /** Feed documents refused (bad signature, another platform, older than one already applied). */
  documentsRejected: number;
  liveEntries: number;
}

export type FeedVerdict = 'ok' | 'revoked' | 'unavailable';

/** A revocation feed document that was forged, tampered with, for another platform, or older than one applied. */
export class DocumentRejectedError extends Error {
  readonly code = 'ERR_ACE_FEED_DOCUMENT_REJECTED';
  constructor(reason: string) {
    super(`revocation feed document rejected: ${reason}`);
    this.name = 'DocumentRejectedError';
  }
}

interface Cutoff {
  iatMax: number;
  expiresAt: number;
}

export interface FeedDependencies {
  serviceUrl: string;
  platformId: string;
  issuer: string;
  jwks: JwksCache;
  fetch: typeof fetch;
  clockToleranceSeconds: number;
  /** Where the runtime has no global WebSocket: another implementation, or undefined (then poll). */
  fallbackWebSocket?: () => Promise<FeedSocketConstructor | undefined>;
}

export class RevocationFeed {
  private seq = 0;
  private lastIat = 0;
  private lastContact = 0;
  private readonly agents = new Map<string, Cutoff>();
  private platform: Cutoff | undefined;
  private readonly kids = new Map<string, number>();
  private socket: FeedSocket | undefined;
  private connected = false;
  private attempt = 0;
  private closed = false;
  private started: Promise<void> | undefined;
  private reconnectTimer: ReturnType<typeof setTimeout> | undefined;
  private pollTimer: ReturnType<typeof setInterval> | undefined;
  private watchdog: ReturnType<typeof setInterval> | undefined;
  private lastMessageAt = 0;
  private fetching: Promise<void> | undefined;
  private lastWarnAt = 0;
  private readonly counters = { acceptedWhileStale: 0, refused: 0, documentsRejected: 0 };
  private readonly failMode: 'open' | 'closed';
  private readonly staleAfterMs: number;
  private readonly pollMs: number;
  private readonly feedUrl: string;
  private readonly warn: (message: string, detail?: Record<string, unknown>) => void;

  constructor(
    private readonly deps: FeedDependencies,
    private readonly options: RevocationFeedOptions = {},
  ) {
    this.failMode = options.failMode ?? 'open';
    this.staleAfterMs = (options.staleAfterSeconds ?? 60) * 1000;
    this.pollMs = (options.pollIntervalSeconds ?? 5) * 1000;
    this.feedUrl = `${deps.serviceUrl}/api/v1/platforms/${deps.platformId}/revocations`;
    this.warn = options.warn ?? ((message, detail) => console.warn(`[agent-credential-exchange] ${message}`, detail ?? ''));
  }

  /** Starts the feed once (socket, or polling) and resolves with the first synchronisation's outcome. */
  start(): Promise<void> {
    if (!this.started) {
      this.started = this.fetchDocument();
      this.started
        .catch(() => {})
        .finally(() => {
          if (this.closed) return;
          if (this.options.webSocket === false) this.startPolling();
          else void this.connect();
        });
    }
    return this.started;
  }

  /** For ready(): started, and synchronised at least once (retrying now if the first attempt failed). */
  async sync(): Promise<void> {
    await this.start().catch(() => this.fetchDocument());
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.reconnectTimer);
    clearInterval(this.pollTimer);
    clearInterval(this.watchdog);
    this.socket?.close();
  }

  /** A void kid is refused before its signature is even checked, whatever the JWKS cache holds. */
  isVoidKey(kid: unknown): boolean {
    if (!this.keyIsVoid(kid)) return false;
    this.counters.refused++;
    return true;
  }

  private keyIsVoid(kid: unknown): boolean {
    if (typeof kid !== 'string') return false;
    const expiresAt = this.kids.get(kid);
    if (expiresAt === undefined) return false;
    if (expiresAt * 1000 + this.deps.clockToleranceSeconds * 1000 < Date.now()) {
      this.kids.delete(kid);
      return false;
    }
    return true;
  }

  /** The verdict for a verified token's payload. */
  check(payload: JWTPayload): FeedVerdict {
    const iat = typeof payload.iat === 'number' ? payload.iat : 0;
    const now = Date.now();
    if (this.platform && iat <= this.platform.iatMax && !this.expired(this.platform, now)) return this.refuse();
    const agent = typeof payload.sub === 'string' ? this.agents.get(payload.sub) : undefined;
    if (agent) {
      if (this.expired(agent, now)) this.agents.delete(payload.sub as string);
      else if (iat <= agent.iatMax) return this.refuse();
    }
    if (this.isStale(now)) {
      if (this.failMode === 'closed') return 'unavailable';
      this.counters.acceptedWhileStale++;
      if (now - this.lastWarnAt > 60_000) {
        this.lastWarnAt = now;
        this.warn('revocation feed unreachable: accepting tokens without revocation checks (failMode "open")', {
          platform_id: this.deps.platformId,
          last_contact: this.lastContact ? new Date(this.lastContact).toISOString() : null,
        });
      }
    }
    return 'ok';
  }

  stats(): RevocationFeedStats {
    return {
      connected: this.connected,
      seq: this.seq,
      lastContactAt: this.lastContact,
      stale: this.isStale(Date.now()),
      ...this.counters,
      liveEntries: this.agents.size + this.kids.size + (this.platform ? 1 : 0),
    };
  }

  /**
   * Checks a signed document (signature via the JWKS, typ, issuer, platform, no step back in sequence or
   * time) and applies its entries. Throws DocumentRejectedError when it must not be trusted.
   */
  async applyDocument(jws: string): Promise<void> {
    let payload: FeedPayload;
    try {
      ({ payload } = (await jwtVerify(jws, (header: JWSHeaderParameters) => {
        if (this.keyIsVoid(header.kid)) throw new Error('signed with a void key');
        return this.deps.jwks.keyFor(header);
      }, { algorithms: ['RS256'], issuer: this.deps.issuer, typ: FEED_TYP })) as unknown as { payload: FeedPayload });
    } catch (error) {
      return this.reject(`signature or header: ${(error as Error).message}`);
    }
    if (payload.platform_id !== this.deps.platformId) return this.reject('meant for another platform');
    if (!Number.isSafeInteger(payload.seq) || !Number.isSafeInteger(payload.since) || !Array.isArray(payload.entries)) {
      return this.reject('malformed');
    }
    const tolerance = this.deps.clockToleranceSeconds;
    // A replayed older document would hide entries: never step back in sequence, nor in time.
    if (payload.seq < this.seq) return this.reject(`sequence ${payload.seq} is older than ${this.seq}`);
    if (payload.iat < this.lastIat - tolerance) return this.reject('issued before a document already applied');
    // iat has one-second granularity; a document older than the staleness bound proves nothing current.
    if ((payload.iat + 1 + tolerance) * 1000 < Date.now() - this.staleAfterMs) return this.reject('too old');
    for (const entry of payload.entries) this.applyEntry(entry);
    this.lastIat = Math.max(this.lastIat, payload.iat);
    this.touch();
    if (payload.since > this.seq) {
      // Entries between our sequence and the document's start are missing: fetch them.
      void this.fetchDocument().catch(() => {});
      return;
    }
    this.seq = Math.max(this.seq, payload.seq);
  }

  private reject(reason: string): never {
    this.counters.documentsRejected++;
    this.warn(`revocation feed document rejected (${reason})`, { platform_id: this.deps.platformId });
    throw new DocumentRejectedError(reason);
  }

  private applyEntry(entry: FeedEntry): void {
    if (!entry || typeof entry.expires_at !== 'number') return;
    if (entry.type === 'key' && typeof entry.kid === 'string') {
      this.kids.set(entry.kid, Math.max(this.kids.get(entry.kid) ?? 0, entry.expires_at));
    } else if (entry.type === 'platform' && typeof entry.iat_max === 'number') {
      this.platform = merge(this.platform, entry.iat_max, entry.expires_at);
    } else if (entry.type === 'agent' && typeof entry.agent_id === 'string' && typeof entry.iat_max === 'number') {
      this.agents.set(entry.agent_id, merge(this.agents.get(entry.agent_id), entry.iat_max, entry.expires_at)!);
    }
  }

  private refuse(): FeedVerdict {
    this.counters.refused++;
    return 'revoked';
  }

  private expired(cutoff: Cutoff, now: number): boolean {
    return cutoff.expiresAt * 1000 + this.deps.clockToleranceSeconds * 1000 < now;
  }

  private isStale(now: number): boolean {
    return now - this.lastContact > this.staleAfterMs;
  }

  private touch(): void {
    this.lastContact = Date.now();
  }

  /** GET the signed document from our sequence; one at a time. */
  private fetchDocument(): Promise<void> {
    this.fetching ??= (async () => {
      const response = await this.deps.fetch(`${this.feedUrl}?since=${this.seq}`, {
        headers: { accept: 'application/jwt' },
        signal: AbortSignal.timeout(this.options.timeoutMs ?? 5000),
      });
      if (response.status !== 200) {
        await response.body?.cancel();
        throw new Error(`revocation feed answered HTTP ${response.status}`);
      }
      await this.applyDocument((await response.text()).trim());
    })().finally(() => {
      this.fetching = undefined;
    });
    return this.fetching;
  }

  private async socketConstructor(): Promise<FeedSocketConstructor | undefined> {
    if (this.options.webSocket) return this.options.webSocket;
    const global = (globalThis as { WebSocket?: FeedSocketConstructor }).WebSocket;
    if (global) return global;
    // No global WebSocket (Node 20): the Node entry point offers the `ws` package here; the core imports
    // nothing of its own. Without either, the feed is polled.
    return this.deps.fallbackWebSocket?.();
  }

  private async connect(): Promise<void> {
    if (this.closed) return;
    const Socket = await this.socketConstructor();
    if (!Socket) {
      this.warn('no WebSocket implementation available: polling the revocation feed instead');
      return this.startPolling();
    }
    const url = `${this.feedUrl.replace(/^http/, 'ws')}/ws?since=${this.seq}`;
    let socket: FeedSocket;
    try {
      socket = new Socket(url);
    } catch {
      return this.scheduleReconnect();
    }
    this.socket = socket;
    socket.onopen = () => {
      this.connected = true;
      this.attempt = 0;
      this.lastMessageAt = Date.now();
      this.touch();
      this.stopPolling();
      clearInterval(this.watchdog);
      const silenceMs = (this.options.socketSilenceSeconds ?? 40) * 1000;
      this.watchdog = setInterval(() => {
        if (Date.now() - this.lastMessageAt > silenceMs) socket.close();
      }, Math.min(silenceMs, 5000));
      this.watchdog.unref?.();
    };
    socket.onmessage = (event) => {
      this.lastMessageAt = Date.now();
      void messageText(event.data).then((text) => {
        if (text === undefined) return;
        if (text.startsWith('{')) return this.touch(); // heartbeat
        // A rejected document is counted and warned about in applyDocument; nothing more to do here.
        this.applyDocument(text).catch(() => {});
      });
    };
    const lost = () => {
      if (this.socket !== socket) return; // handled already (error and close both report one loss)
      this.socket = undefined;
      this.connected = false;
      clearInterval(this.watchdog);
      if (this.closed) return;
      this.startPolling();
      this.scheduleReconnect();
    };
    // Node 22's WebSocket (undici) reports a connection that fails to open with `error` and no `close`:
    // waiting for `close` alone would never reconnect.
    socket.onerror = lost;
    socket.onclose = lost;
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

  private startPolling(): void {
    if (this.pollTimer || this.closed) return;
    this.pollTimer = setInterval(() => void this.fetchDocument().then(() => this.touch(), () => {}), this.pollMs);
    this.pollTimer.unref?.();
  }

  private stopPolling(): void {
    clearInterval(this.pollTimer);
    this.pollTimer = undefined;
  }
}

function merge(current: Cutoff | undefined, iatMax: number, expiresAt: number): Cutoff {
  if (!current) return { iatMax, expiresAt };
  return { iatMax: Math.max(current.iatMax, iatMax), expiresAt: Math.max(current.expiresAt, expiresAt) };
}

/** A frame's text: string frames as they are, binary ones (ArrayBuffer, a view, `ws`'s Buffer, a Blob) decoded. */
async function messageText(data: unknown): Promise<string | undefined> {
  if (typeof data === 'string') return data;
  if (data instanceof ArrayBuffer) return new TextDecoder().decode(new Uint8Array(data));
  if (ArrayBuffer.isView(data)) return new TextDecoder().decode(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
  if (typeof (data as { text?: unknown } | null)?.text === 'function') return (data as { text(): Promise<string> }).text();
  return undefined;
}
