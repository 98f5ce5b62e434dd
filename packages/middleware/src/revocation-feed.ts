// The receiver of the platform's revocation feed: the service's SSF stream of Security Event Tokens
// (the protocol package's feed-document), kept current over a WebSocket (push) with RFC 8936 polls
// whenever the socket is not open and proving freshness (connecting, backing off, silent), and resumed
// from the last sequence after any gap. This is the connection: it checks each SET's signature and hands it to the rules
// (revocation-rules.ts: what a SET changes, which token is refused, when the copy is current). A head that
// lists live SETs we lack (a proxy dropping them) makes it poll at once; the copy is not fresh until they
// are held, so it ages towards failMode like a cut feed. Checks are in memory: a request costs two map
// lookups, never a call to the service.
// jose's per-operation modules: its root entry also loads the JWE code, whose compression support makes
// edge bundlers (Next.js) warn.
import { jwtVerify } from 'jose/jwt/verify';
import type { JWSHeaderParameters, JWTPayload } from 'jose';
import {
  CLOSE_CREDENTIAL_REVOKED,
  EVENT_STREAM_HEAD,
  FEED_SUBPROTOCOL,
  FEED_TOKEN_SUBPROTOCOL_PREFIX,
  SET_TYP,
  feedPollPath,
  feedSocketPath,
  revocationJti,
  seqOfJti,
  type PollAnswer,
  type SetPayload,
} from '@agent-credential-exchange/protocol/feed-document';
import type { JwksCache } from './jwks-cache.js';
import { readStreamHead, RevocationRules } from './revocation-rules.js';

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

// The wire protocol's names (subprotocols, close code) live in the protocol package's feed-document, shared with the service.
export { CLOSE_CREDENTIAL_REVOKED, FEED_SUBPROTOCOL, FEED_TOKEN_SUBPROTOCOL_PREFIX };

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
   * How old the last proof of freshness may be before failMode applies: a signed head whose live SETs are
   * all held. Default 15 (the service re-signs the head every REVOCATION_HEARTBEAT_SECONDS, default 5).
   * This is the bound on how long a revoked token can be accepted when the feed is cut or its SETs are
   * dropped (failMode "closed").
   */
  staleAfterSeconds?: number;
  /** failMode "open": how long past `staleAfterSeconds` tokens are still accepted. Default 300. */
  openForAtMostSeconds?: number;
  /**
   * Polling period while the WebSocket is not open and proving the copy current (connecting, backing off,
   * silent, or bringing no head that proves freshness), and always with `webSocket: false`. Default 5.
   */
  pollIntervalSeconds?: number;
  /** false: poll only, never open a WebSocket. Default: the global WebSocket, else the `ws` package. */
  webSocket?: FeedSocketConstructor | false;
  /** First and longest wait between WebSocket reconnections (jittered, exponential). Defaults 0.25 and 10. */
  reconnectBaseSeconds?: number;
  reconnectMaxSeconds?: number;
  /** A socket silent this long (the service sends a signed head every 5 s by default) is replaced. Default 20. */
  socketSilenceSeconds?: number;
  /**
   * A WebSocket upgrade not answered within this is abandoned (counted in stats().socketDrops) and tried
   * again later; the feed is polled meanwhile. Default 5.
   */
  handshakeTimeoutSeconds?: number;
  /** Timeout of a document fetch. Default 5000. */
  timeoutMs?: number;
  /** Called on loud events (feed stale, a gap, SET rejected, feed token refused). Default console.warn. */
  warn?: (message: string, detail?: Record<string, unknown>) => void;
}

export interface RevocationFeedStats {
  /** The WebSocket is open. */
  connected: boolean;
  /** Highest contiguous sequence (every SET up to it held, or proven expired by a signed head): polls resume from here. */
  seq: number;
  /** The last signed head lists SETs this copy lacks (dropped in transit): it is not fresh until they arrive. */
  gap: boolean;
  /** ms since the epoch: the copy is proven current as of then (the last signed head whose live SETs were all held; 0: never). */
  lastContactAt: number;
  /** Not proven current for longer than staleAfterSeconds (feed cut, or a gap): failMode applies. */
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
  /** WebSockets lost: failed or refused, closed, silent, or an upgrade not answered in time; the reason of the last one. */
  socketDrops: number;
  lastSocketDrop?: string;
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

/** Gap polls (a head lists SETs we lack) are at least this far apart: a proxy that strips them cannot make us spin. */
const GAP_POLL_SPACING_MS = 1000;
/** A socket counts as proving freshness while its last proving head is at most a poll period + this old. */
const PROOF_SLACK_MS = 2000;

export class RevocationReceiver {
  private readonly rules: RevocationRules;
  private socket: FeedSocket | undefined;
  private connected = false;
  private attempt = 0;
  private closed = false;
  private started: Promise<void> | undefined;
  private reconnectTimer: ReturnType<typeof setTimeout> | undefined;
  private pollTimer: ReturnType<typeof setInterval> | undefined;
  private gapPollTimer: ReturnType<typeof setTimeout> | undefined;
  private lastGapPollAt = 0;
  /** Date.now() of the last head that proved the copy current (whatever carried it). */
  private lastProofAt = 0;
  private fetching: Promise<void> | undefined;
  private pollAgain: Promise<void> | undefined;
  private lastWarnAt = 0;
  private lastUnauthorizedWarnAt = 0;
  private lastGapWarnAt = 0;
  private readonly counters = { documentsRejected: 0, pollFailures: 0, socketDrops: 0 };
  private lastPollError: string | undefined;
  private lastSocketDrop: string | undefined;
  private readonly now: () => number;
  private readonly pollMs: number;
  private readonly feedUrl: string;
  private readonly socketUrl: string;
  private readonly warn: (message: string, detail?: Record<string, unknown>) => void;

  constructor(
    private readonly deps: FeedDependencies,
    private readonly options: RevocationFeedOptions = {},
  ) {
    this.now = deps.now ?? Date.now;
    this.rules = new RevocationRules({
      issuer: deps.issuer,
      clockToleranceSeconds: deps.clockToleranceSeconds,
      failMode: options.failMode ?? 'open',
      staleAfterMs: (options.staleAfterSeconds ?? 15) * 1000,
      openForMs: (options.openForAtMostSeconds ?? 300) * 1000,
      now: this.now,
    });
    this.pollMs = (options.pollIntervalSeconds ?? 5) * 1000;
    this.feedUrl = `${deps.serviceUrl}${feedPollPath(deps.platformId)}`;
    this.socketUrl = `${deps.serviceUrl.replace(/^http/, 'ws')}${feedSocketPath(deps.platformId)}`;
    this.warn = options.warn ?? ((message, detail) => console.warn(`[agent-credential-exchange] ${message}`, detail ?? ''));
  }

  /** Starts the feed once (polling, and the socket) and resolves with the first synchronisation's outcome. */
  start(): Promise<void> {
    if (!this.started) {
      this.started = this.pollNow();
      // Whatever the first synchronisation's outcome (it reaches the caller of start()), the feed goes on:
      // the poll timer runs from now on (it skips its turn while an open socket proves the copy current).
      const goOn = () => {
        if (this.closed) return;
        this.startPolling();
        if (this.options.webSocket !== false) void this.connect();
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
    clearTimeout(this.gapPollTimer);
    clearInterval(this.pollTimer);
    const socket = this.socket;
    this.socket = undefined; // so that its close is not counted as a drop
    this.connected = false;
    socket?.close();
  }

  /** A void kid is refused before its signature is even checked, whatever the JWKS cache holds. */
  isVoidKey(kid: unknown): boolean {
    return this.rules.refuseVoidKey(kid);
  }

  /** The verdict for a verified token's payload. */
  check(payload: JWTPayload): FeedVerdict {
    const verdict = this.rules.check(payload);
    if (verdict !== 'ok-while-stale') return verdict;
    const now = this.now();
    if (now - this.lastWarnAt > 60_000) {
      this.lastWarnAt = now;
      const lastContact = this.rules.lastContactAt;
      this.warn(
        `revocation feed unreachable: accepting tokens without revocation checks (failMode "open") until ${new Date(this.rules.openUntil()).toISOString()} (openForAtMostSeconds: ${(this.options.openForAtMostSeconds ?? 300)} s past staleAfterSeconds), then refusing them with 503`,
        { platform_id: this.deps.platformId, last_contact: lastContact ? new Date(lastContact).toISOString() : null },
      );
    }
    return 'ok';
  }

  stats(): RevocationFeedStats {
    return {
      connected: this.connected,
      seq: this.rules.seq,
      gap: this.rules.hasGap,
      lastContactAt: this.rules.lastContactAt,
      stale: this.rules.isStale(),
      acceptedWhileStale: this.rules.acceptedWhileStale,
      refused: this.rules.refused,
      ...this.counters,
      ...(this.lastPollError === undefined ? {} : { lastPollError: this.lastPollError }),
      ...(this.lastSocketDrop === undefined ? {} : { lastSocketDrop: this.lastSocketDrop }),
      liveEntries: this.rules.liveEntries,
    };
  }

  /**
   * Checks one SET (signature via the JWKS, typ, issuer, audience = this platform) and applies it: a
   * revocation at once; a stream head proves freshness, or shows a gap that a poll at once should close.
   * Throws DocumentRejectedError when the SET must not be trusted.
   */
  async applySet(jws: string): Promise<void> {
    let payload: SetPayload;
    try {
      ({ payload } = (await jwtVerify(jws, (header: JWSHeaderParameters) => {
        if (this.rules.isVoidKey(header.kid)) throw new Error('signed with a void key');
        return this.deps.jwks.keyForFeed(header);
      }, { algorithms: ['RS256'], issuer: this.deps.issuer, audience: this.deps.platformId, typ: SET_TYP, currentDate: new Date(this.now()) })) as unknown as { payload: SetPayload });
    } catch (error) {
      return this.reject(`signature or header: ${(error as Error).message}`);
    }
    const events = payload.events;
    if (!events || typeof events !== 'object' || typeof payload.iat !== 'number') return this.reject('malformed');
    if (Object.hasOwn(events, EVENT_STREAM_HEAD)) {
      const head = readStreamHead(events[EVENT_STREAM_HEAD]);
      if (!head) return this.reject('malformed head');
      if (this.rules.applyHead(head, payload.iat) === 'current') this.lastProofAt = Date.now();
      // SETs were lost (or are still on their way): fetch them now, whatever carries the socket.
      else this.pollSoon();
      return;
    }
    const seq = seqOfJti(payload.jti, this.deps.platformId);
    if (seq === undefined) return this.reject('jti is not one of this stream');
    this.rules.applyRevocation(seq, payload);
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
  private async applyCounted(jws: string): Promise<void> {
    try {
      await this.applySet(jws);
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

  /** A head showed a gap: poll at once, but at most once per GAP_POLL_SPACING_MS while the gap lasts. */
  private pollSoon(): void {
    if (this.closed || this.gapPollTimer) return;
    const wait = this.lastGapPollAt + GAP_POLL_SPACING_MS - Date.now();
    const poll = () => {
      this.gapPollTimer = undefined;
      this.lastGapPollAt = Date.now();
      this.pollInBackground();
    };
    if (wait <= 0) return poll();
    this.gapPollTimer = setTimeout(poll, wait);
    this.gapPollTimer.unref?.();
  }

  private reject(reason: string): never {
    this.counters.documentsRejected++;
    this.warn(`revocation feed SET rejected (${reason})`, { platform_id: this.deps.platformId });
    throw new DocumentRejectedError(reason);
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
        const seq = this.rules.seq;
        const response = await this.deps.fetch(this.feedUrl, {
          method: 'POST',
          headers: { 'content-type': 'application/json', accept: 'application/json', authorization: `Bearer ${this.deps.feedToken}` },
          body: JSON.stringify({ ack: seq > 0 ? [revocationJti(this.deps.platformId, seq)] : [], maxEvents: 1000, returnImmediately: true }),
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
        for (const { jws } of entries) await this.applyCounted(String(jws));
        if (!answer.moreAvailable) break;
      }
      if (this.rules.hasGap) this.warnGap();
    })().finally(() => {
      this.fetching = undefined;
    });
    return this.fetching;
  }

  /** A poll answer whose head lists SETs the answer lacked: something between us and the service drops them. */
  private warnGap(): void {
    const now = Date.now();
    if (now - this.lastGapWarnAt < 60_000) return;
    this.lastGapWarnAt = now;
    this.warn('revocation feed: the signed head lists SETs the poll answer did not carry (a proxy dropping them?): the copy is not current and goes stale', {
      platform_id: this.deps.platformId,
      seq: this.rules.seq,
    });
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
    if (this.closed) return;
    if (!Socket) {
      this.warn('no WebSocket implementation available: polling the revocation feed instead');
      return;
    }
    const url = `${this.socketUrl}?since=${this.rules.seq}`;
    let socket: FeedSocket;
    try {
      socket = new Socket(url, [FEED_SUBPROTOCOL, `${FEED_TOKEN_SUBPROTOCOL_PREFIX}${this.deps.feedToken}`]);
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
      this.pollSoon();
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
        void this.applyCounted(text.trim());
      });
    };
    // Node 22's WebSocket (undici) reports a connection that fails to open with `error` and no `close`:
    // waiting for `close` alone would never reconnect.
    socket.onerror = () => lost('error');
    socket.onclose = (event) => {
      const code = (event as { code?: unknown } | null)?.code;
      if (code === CLOSE_CREDENTIAL_REVOKED && this.socket === socket) this.unauthorized();
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

  /**
   * Every poll period: a poll, unless an open socket brought a head that proved the copy current within
   * the period (plus slack). So the feed is polled while the socket connects, backs off, is silent, or
   * carries only heads that show a gap.
   */
  private startPolling(): void {
    if (this.pollTimer || this.closed) return;
    this.pollTimer = setInterval(() => {
      if (this.connected && Date.now() - this.lastProofAt <= this.pollMs + PROOF_SLACK_MS) return;
      this.pollInBackground();
    }, this.pollMs);
    this.pollTimer.unref?.();
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
