// The middleware's copy of its platform's revocation feed: the service's SSF stream of Security Event
// Tokens (feed-document.ts). Kept current over a WebSocket (push), with RFC 8936 polling while the socket is
// down, and resumed from the last sequence after any gap. Freshness is proven only by the signed stream
// head: a head above our sequence means SETs were lost (a proxy dropping them) and we poll at once; while
// no head at or below our sequence arrives, the copy ages and failMode applies after staleAfterSeconds.
// Checks are in memory: a request costs two map lookups, never a call to the service.
// jose's per-operation modules: its root entry also loads the JWE code, whose compression support makes
// edge bundlers (Next.js) warn.
import { jwtVerify } from 'jose/jwt/verify';
import type { JWSHeaderParameters, JWTPayload } from 'jose';
import {
  EVENT_PLATFORM_TOKENS_REVOKED,
  EVENT_SESSION_REVOKED,
  EVENT_SIGNING_KEY_RETIRED,
  EVENT_STREAM_HEAD,
  SET_TYP,
  revocationJti,
  seqOfJti,
  type PollAnswer,
  type RevocationEventBody,
  type SetPayload,
} from './feed-document.js';
import type { JwksCache } from './jwks-cache.js';

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

/** The subprotocol the service answers, and the prefix of the one that carries the feed token. */
export const FEED_SUBPROTOCOL = 'ace-feed';
export const FEED_TOKEN_SUBPROTOCOL_PREFIX = 'ace-feed-token.';
/** The service closes a socket with this code when the feed credential it was opened with is deleted. */
export const CLOSE_CREDENTIAL_REVOKED = 4401;

/** The feed refused our feed token (401): missing, wrong, deleted, or another platform's. */
export class FeedUnauthorizedError extends Error {
  readonly code = 'ERR_ACE_FEED_UNAUTHORIZED';
  constructor() {
    super('revocation feed refused the feed token (HTTP 401): check the feedToken option (a live feed credential of this platform)');
    this.name = 'FeedUnauthorizedError';
  }
}

export interface RevocationFeedOptions {
  /**
   * The platform's feed token (`acef_...`, from POST /admin/v1/platforms/{id}/feed-credentials or
   * `ace platform feed-token`): sent as Authorization: Bearer on polls and offered as the WebSocket
   * subprotocol `ace-feed-token.<token>`. Required while the feed is on (also accepted as the verifier's
   * top-level `feedToken`).
   */
  feedToken?: string | undefined;
  /**
   * When no signed stream head proves the copy current for longer than `staleAfterSeconds`:
   * - "open" (default): keep accepting tokens, warn loudly (once a minute) and count them in stats(), but
   *   for at most `openForAtMostSeconds` more: then refuse with 503 like "closed";
   * - "closed": refuse every token with 503 until the feed is back.
   */
  failMode?: 'open' | 'closed';
  /**
   * How old the last signed head (at or below our sequence) may be before failMode applies. Default 15
   * (the service re-signs the head every REVOCATION_HEARTBEAT_SECONDS, default 5). This is the bound on how
   * long a revoked token can be accepted when the feed is cut or its SETs are dropped (failMode "closed").
   */
  staleAfterSeconds?: number;
  /** failMode "open": how long past `staleAfterSeconds` tokens are still accepted. Default 300. */
  openForAtMostSeconds?: number;
  /** Polling period of the signed document while the WebSocket is down. Default 5. */
  pollIntervalSeconds?: number;
  /** false: poll only, never open a WebSocket. Default: the global WebSocket, else the `ws` package. */
  webSocket?: FeedSocketConstructor | false;
  /** First and longest wait between WebSocket reconnections (jittered, exponential). Defaults 0.25 and 10. */
  reconnectBaseSeconds?: number;
  reconnectMaxSeconds?: number;
  /** A socket silent this long (the service sends a signed head every 5 s by default) is replaced. Default 20. */
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
  /** ms since the epoch: the copy is proven current as of then (the last signed head we were in sync with; 0: never). */
  lastContactAt: number;
  /** Unreachable for longer than the bound. */
  stale: boolean;
  /** Tokens accepted while stale (failMode "open"). */
  acceptedWhileStale: number;
  /** Tokens refused because of an entry or a void key. */
  refused: number;
  /** SETs refused (bad signature or typ, another platform or issuer, malformed). */
  documentsRejected: number;
  /** Polls that failed (network, HTTP status, a malformed answer); the message of the last one. */
  pollFailures: number;
  lastPollError?: string;
  liveEntries: number;
}

export type FeedVerdict = 'ok' | 'revoked' | 'unavailable';

/** A feed SET that was forged, tampered with, for another platform or issuer, or malformed. */
export class DocumentRejectedError extends Error {
  readonly code = 'ERR_ACE_FEED_DOCUMENT_REJECTED';
  constructor(reason: string) {
    super(`revocation feed SET rejected: ${reason}`);
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
  /** The feed token (RevocationFeedOptions.feedToken or the verifier's top-level one). */
  feedToken: string;
  /** The clock of the entries' lifetimes and of freshness (ms since the epoch). Default Date.now. */
  now?: () => number;
  /** Where the runtime has no global WebSocket: another implementation, or undefined (then poll). */
  fallbackWebSocket?: () => Promise<FeedSocketConstructor | undefined>;
}

export class RevocationFeed {
  private seq = 0;
  /** Revocation SETs received above `seq` (a gap below them): applied already, counted once the gap closes. */
  private readonly ahead = new Set<number>();
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
  private pollAgain: Promise<void> | undefined;
  private lastWarnAt = 0;
  private lastUnauthorizedWarnAt = 0;
  private readonly counters = { acceptedWhileStale: 0, refused: 0, documentsRejected: 0, pollFailures: 0 };
  private lastPollError: string | undefined;
  private readonly failMode: 'open' | 'closed';
  private readonly staleAfterMs: number;
  private readonly openForMs: number;
  private readonly createdAt: number;
  private readonly now: () => number;
  private readonly pollMs: number;
  private readonly feedUrl: string;
  private readonly warn: (message: string, detail?: Record<string, unknown>) => void;

  constructor(
    private readonly deps: FeedDependencies,
    private readonly options: RevocationFeedOptions = {},
  ) {
    this.now = deps.now ?? Date.now;
    this.createdAt = this.now();
    this.failMode = options.failMode ?? 'open';
    this.staleAfterMs = (options.staleAfterSeconds ?? 15) * 1000;
    this.openForMs = (options.openForAtMostSeconds ?? 300) * 1000;
    this.pollMs = (options.pollIntervalSeconds ?? 5) * 1000;
    this.feedUrl = `${deps.serviceUrl}/api/v1/platforms/${deps.platformId}/revocations`;
    this.warn = options.warn ?? ((message, detail) => console.warn(`[agent-credential-exchange] ${message}`, detail ?? ''));
  }

  /** Starts the feed once (socket, or polling) and resolves with the first synchronisation's outcome. */
  start(): Promise<void> {
    if (!this.started) {
      this.started = this.pollNow();
      // Whatever the first synchronisation's outcome (it reaches the caller of start()), the feed goes on.
      const goOn = () => {
        if (this.closed) return;
        if (this.options.webSocket === false) this.startPolling();
        else void this.connect();
      };
      this.started.then(goOn, goOn);
    }
    return this.started;
  }

  /** For ready(): started, and synchronised at least once (retrying now if the first attempt failed). */
  async sync(): Promise<void> {
    await this.start().catch(() => this.pollNow());
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
    if (expiresAt * 1000 + this.deps.clockToleranceSeconds * 1000 < this.now()) {
      this.kids.delete(kid);
      return false;
    }
    return true;
  }

  /** The verdict for a verified token's payload. */
  check(payload: JWTPayload): FeedVerdict {
    const iat = typeof payload.iat === 'number' ? payload.iat : 0;
    const now = this.now();
    if (this.platform && iat <= this.platform.iatMax && !this.expired(this.platform, now)) return this.refuse();
    const agent = typeof payload.sub === 'string' ? this.agents.get(payload.sub) : undefined;
    if (agent) {
      if (this.expired(agent, now)) this.agents.delete(payload.sub as string);
      else if (iat <= agent.iatMax) return this.refuse();
    }
    if (this.isStale(now)) {
      // The open bound counts from the last proof of freshness, or from the start for a feed never synchronised.
      if (this.failMode === 'closed' || now - Math.max(this.lastContact, this.createdAt) > this.staleAfterMs + this.openForMs) return 'unavailable';
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
      stale: this.isStale(this.now()),
      ...this.counters,
      ...(this.lastPollError === undefined ? {} : { lastPollError: this.lastPollError }),
      liveEntries: this.agents.size + this.kids.size + (this.platform ? 1 : 0),
    };
  }

  /**
   * Checks one SET (signature via the JWKS, typ, issuer, audience = this platform) and applies it: a
   * revocation is applied at once (applying one twice, or early, changes nothing); the stream head proves
   * freshness, or reveals a gap that is closed by polling at once. Throws DocumentRejectedError when the
   * SET must not be trusted.
   */
  async applySet(jws: string, complete = false): Promise<void> {
    let payload: SetPayload;
    try {
      ({ payload } = (await jwtVerify(jws, (header: JWSHeaderParameters) => {
        if (this.keyIsVoid(header.kid)) throw new Error('signed with a void key');
        return this.deps.jwks.keyForFeed(header);
      }, { algorithms: ['RS256'], issuer: this.deps.issuer, audience: this.deps.platformId, typ: SET_TYP, currentDate: new Date(this.now()) })) as unknown as { payload: SetPayload });
    } catch (error) {
      return this.reject(`signature or header: ${(error as Error).message}`);
    }
    const events = payload.events;
    if (!events || typeof events !== 'object' || typeof payload.iat !== 'number') return this.reject('malformed');
    const head = events[EVENT_STREAM_HEAD] as { seq?: unknown } | undefined;
    if (head) {
      if (!Number.isSafeInteger(head.seq)) return this.reject('malformed head');
      return this.applyHead(head.seq as number, payload.iat, complete);
    }
    const seq = seqOfJti(payload.jti, this.deps.platformId);
    if (seq === undefined) return this.reject('jti is not one of this stream');
    // An event type we do not know is ignored, as SSF asks, but its SET still counts in the sequence (it is
    // acknowledged like the others: otherwise it would stay a gap until the next complete poll answer).
    this.applyEvents(payload);
    if (seq === this.seq + 1) {
      this.seq = seq;
      while (this.ahead.delete(this.seq + 1)) this.seq++;
    } else if (seq > this.seq) {
      this.ahead.add(seq);
    }
  }

  /** @deprecated since the SET feed: use applySet. */
  applyDocument(jws: string): Promise<void> {
    return this.applySet(jws);
  }

  /**
   * `complete`: the head came at the end of a poll answer that held every live SET above our sequence, so
   * any sequence still missing below it belongs to an entry that has expired (purged): nothing to wait for.
   */
  private applyHead(headSeq: number, iat: number, complete: boolean): void {
    if (complete && headSeq > this.seq) {
      this.seq = headSeq;
      for (const seq of this.ahead) if (seq <= headSeq) this.ahead.delete(seq);
    }
    if (headSeq > this.seq) {
      // SETs were lost (or are still on their way): fetch them now, whatever carries the socket.
      this.pollInBackground();
      return;
    }
    // In sync as of the head's signing time (never later than now: a service clock ahead proves nothing more).
    this.lastContact = Math.max(this.lastContact, Math.min(this.now(), (iat + 1) * 1000));
  }

  /** The feed token was refused (a 401, or a socket closed because its credential was deleted): warned once a minute. */
  private unauthorized(): void {
    const now = Date.now();
    if (now - this.lastUnauthorizedWarnAt < 60_000) return;
    this.lastUnauthorizedWarnAt = now;
    this.warn('revocation feed refused the feed token (401): the copy goes stale and failMode applies; set feedToken to a live feed credential of this platform', {
      platform_id: this.deps.platformId,
    });
  }

  /** A SET from a poll answer or the socket: one that is rejected is counted and warned about (reject). */
  private async applyCounted(jws: string, complete = false): Promise<void> {
    try {
      await this.applySet(jws, complete);
    } catch (error) {
      // A DocumentRejectedError was counted and warned about in reject(); anything else is counted the same way.
      if (error instanceof DocumentRejectedError) return;
      this.counters.documentsRejected++;
      this.warn(`revocation feed SET not applied (${(error as Error)?.message})`, { platform_id: this.deps.platformId });
    }
  }

  /** A poll nobody waits for: a failure is counted in stats(); staleness (failMode) does the rest. */
  private pollInBackground(): void {
    this.pollNow().then(
      () => (this.lastPollError = undefined),
      (error: unknown) => {
        this.counters.pollFailures++;
        this.lastPollError = (error as Error)?.message ?? String(error);
      },
    );
  }

  private reject(reason: string): never {
    this.counters.documentsRejected++;
    this.warn(`revocation feed SET rejected (${reason})`, { platform_id: this.deps.platformId });
    throw new DocumentRejectedError(reason);
  }

  /** Applies the revocation events of a SET; false when it holds none we know. */
  private applyEvents(payload: SetPayload): boolean {
    let known = false;
    const subject = payload.sub_id as Record<string, unknown> | undefined;
    for (const [type, raw] of Object.entries(payload.events)) {
      const event = raw as Partial<RevocationEventBody>;
      if (!event || typeof event.expires_at !== 'number') continue;
      if (type === EVENT_SIGNING_KEY_RETIRED && subject?.format === 'opaque' && typeof subject.id === 'string') {
        this.kids.set(subject.id, Math.max(this.kids.get(subject.id) ?? 0, event.expires_at));
        known = true;
      } else if (type === EVENT_PLATFORM_TOKENS_REVOKED && typeof event.iat_max === 'number') {
        this.platform = merge(this.platform, event.iat_max, event.expires_at);
        known = true;
      } else if (
        type === EVENT_SESSION_REVOKED &&
        typeof event.iat_max === 'number' &&
        subject?.format === 'iss_sub' &&
        subject.iss === this.deps.issuer &&
        typeof subject.sub === 'string'
      ) {
        this.agents.set(subject.sub, merge(this.agents.get(subject.sub), event.iat_max, event.expires_at));
        known = true;
      }
    }
    return known;
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

  /**
   * RFC 8936 poll from our sequence (acknowledging it), page after page; one at a time. A poll that
   * starts while another runs waits for it and polls again, so a gap seen during a poll is not missed.
   */
  private pollNow(): Promise<void> {
    if (this.fetching) {
      const again = () => {
        this.pollAgain = undefined;
        return this.pollNow();
      };
      this.pollAgain ??= this.fetching.then(again, again);
      return this.pollAgain;
    }
    this.fetching = (async () => {
      for (let page = 0; page < 100; page++) {
        const response = await this.deps.fetch(this.feedUrl, {
          method: 'POST',
          headers: { 'content-type': 'application/json', accept: 'application/json', authorization: `Bearer ${this.deps.feedToken}` },
          body: JSON.stringify({ ack: this.seq > 0 ? [revocationJti(this.deps.platformId, this.seq)] : [], maxEvents: 1000, returnImmediately: true }),
          signal: AbortSignal.timeout(this.options.timeoutMs ?? 5000),
        });
        if (response.status === 401) {
          await response.body?.cancel();
          // Loud: the copy goes stale and failMode applies; never read as "no revocations".
          this.unauthorized();
          throw new FeedUnauthorizedError();
        }
        if (response.status !== 200) {
          await response.body?.cancel();
          throw new Error(`revocation feed answered HTTP ${response.status}`);
        }
        const answer = (await response.json()) as PollAnswer;
        if (!answer || typeof answer.sets !== 'object' || answer.sets === null) throw new Error('revocation poll answer has no "sets"');
        // Revocations in sequence order, then the head (it proves freshness only once they are applied).
        const entries = Object.entries(answer.sets).map(([jti, jws]) => ({ seq: seqOfJti(jti, this.deps.platformId) ?? Infinity, jws }));
        entries.sort((a, b) => a.seq - b.seq);
        // A rejected SET is counted and warned about in applySet; the rest of the answer still applies.
        for (const { jws, seq } of entries) await this.applyCounted(String(jws), seq === Infinity);
        if (!answer.moreAvailable) return;
      }
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
      socket = new Socket(url, [FEED_SUBPROTOCOL, `${FEED_TOKEN_SUBPROTOCOL_PREFIX}${this.deps.feedToken}`]);
    } catch {
      return this.scheduleReconnect();
    }
    this.socket = socket;
    socket.onopen = () => {
      this.connected = true;
      this.attempt = 0;
      this.lastMessageAt = Date.now();
      this.stopPolling();
      clearInterval(this.watchdog);
      const silenceMs = (this.options.socketSilenceSeconds ?? 20) * 1000;
      this.watchdog = setInterval(() => {
        if (Date.now() - this.lastMessageAt > silenceMs) socket.close();
      }, Math.min(silenceMs, 5000));
      this.watchdog.unref?.();
    };
    socket.onmessage = (event) => {
      this.lastMessageAt = Date.now();
      void messageText(event.data).then((text) => {
        if (text === undefined) return;
        // A rejected SET is counted and warned about in applySet; nothing more to do here. Only a signed
        // head proves the copy current: any other frame (a proxy's keep-alive) proves nothing.
        void this.applyCounted(text.trim());
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
    socket.onclose = (event) => {
      if ((event as { code?: unknown } | null)?.code === CLOSE_CREDENTIAL_REVOKED) this.unauthorized();
      lost();
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

  private startPolling(): void {
    if (this.pollTimer || this.closed) return;
    this.pollTimer = setInterval(() => this.pollInBackground(), this.pollMs);
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
