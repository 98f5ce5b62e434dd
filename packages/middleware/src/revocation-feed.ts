// The receiver of the platform's revocation feed: the service's SSF stream of Security Event Tokens
// (the protocol package's feed-document), kept current over a WebSocket (push) with RFC 8936 polls
// whenever the socket is not open and proving freshness (connecting, backing off, silent), and resumed
// from the last sequence after any gap. This is the receiver's state: it checks each SET's signature and
// hands it to the rules (revocation-rules.ts: what a SET changes, which token is refused, when the copy is
// current); the polls are feed-poll.ts, the socket feed-socket.ts. A head that
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
  seqOfJti,
  type SetPayload,
} from '@agent-credential-exchange/protocol/feed-document';
import type { JwksCache } from './jwks-cache.js';
import { readStreamHead, RevocationRules } from './revocation-rules.js';
import { FeedPoller } from './feed-poll.js';
import { FeedSocketLink, type FeedSocketConstructor } from './feed-socket.js';

export { FeedUnauthorizedError } from './feed-poll.js';
export type { FeedSocket, FeedSocketConstructor } from './feed-socket.js';

// The wire protocol's names (subprotocols, close code) live in the protocol package's feed-document, shared with the service.
export { CLOSE_CREDENTIAL_REVOKED, FEED_SUBPROTOCOL, FEED_TOKEN_SUBPROTOCOL_PREFIX };

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

/** A socket counts as proving freshness while its last proving head is at most a poll period + this old. */
const PROOF_SLACK_MS = 2000;

export class RevocationReceiver {
  private readonly rules: RevocationRules;
  /** The poll half (feed-poll.ts) and the push half (feed-socket.ts). */
  private readonly poller: FeedPoller;
  private readonly link: FeedSocketLink;
  private closed = false;
  private started: Promise<void> | undefined;
  /** Date.now() of the last head that proved the copy current (whatever carried it). */
  private lastProofAt = 0;
  private lastWarnAt = 0;
  private lastUnauthorizedWarnAt = 0;
  private readonly counters = { documentsRejected: 0, pollFailures: 0, socketDrops: 0 };
  private readonly now: () => number;
  private readonly pollMs: number;
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
    this.warn = options.warn ?? ((message, detail) => console.warn(`[agent-credential-exchange] ${message}`, detail ?? ''));
    const apply = (jws: string) => this.applyCounted(jws);
    const unauthorized = () => this.unauthorized();
    this.poller = new FeedPoller({
      feedUrl: `${deps.serviceUrl}${feedPollPath(deps.platformId)}`,
      platformId: deps.platformId,
      feedToken: deps.feedToken,
      fetch: deps.fetch,
      options,
      pollMs: this.pollMs,
      rules: this.rules,
      apply,
      unauthorized,
      proven: () => this.link.connected && Date.now() - this.lastProofAt <= this.pollMs + PROOF_SLACK_MS,
      warn: this.warn,
      counters: this.counters,
    });
    this.link = new FeedSocketLink({
      socketUrl: `${deps.serviceUrl.replace(/^http/, 'ws')}${feedSocketPath(deps.platformId)}`,
      feedToken: deps.feedToken,
      options,
      ...(deps.fallbackWebSocket ? { fallbackWebSocket: deps.fallbackWebSocket } : {}),
      seq: () => this.rules.seq,
      apply: (text) => void apply(text),
      unauthorized,
      onLost: () => this.poller.pollSoon(),
      warn: this.warn,
      counters: this.counters,
    });
  }

  /** Starts the feed once (polling, and the socket) and resolves with the first synchronisation's outcome. */
  start(): Promise<void> {
    if (!this.started) {
      this.started = this.pollNow();
      // Whatever the first synchronisation's outcome (it reaches the caller of start()), the feed goes on:
      // the poll timer runs from now on (it skips its turn while an open socket proves the copy current).
      const goOn = () => {
        if (this.closed) return;
        this.poller.startPolling();
        if (this.options.webSocket !== false) void this.link.connect();
      };
      this.started.then(goOn, goOn);
    }
    return this.started;
  }

  /** For ready(): started, and synchronised at least once (retrying now if the first attempt failed). */
  async sync(): Promise<void> {
    await this.start().catch(() => this.pollNow());
  }

  /** One RFC 8936 poll (page after page) now, after the one that runs, if any (feed-poll.ts). */
  private pollNow(): Promise<void> {
    return this.poller.pollNow();
  }

  close(): void {
    this.closed = true;
    this.poller.close();
    this.link.close();
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
      connected: this.link.connected,
      seq: this.rules.seq,
      gap: this.rules.hasGap,
      lastContactAt: this.rules.lastContactAt,
      stale: this.rules.isStale(),
      acceptedWhileStale: this.rules.acceptedWhileStale,
      refused: this.rules.refused,
      ...this.counters,
      ...(this.poller.lastPollError === undefined ? {} : { lastPollError: this.poller.lastPollError }),
      ...(this.link.lastSocketDrop === undefined ? {} : { lastSocketDrop: this.link.lastSocketDrop }),
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
      else this.poller.pollSoon();
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

  private reject(reason: string): never {
    this.counters.documentsRejected++;
    this.warn(`revocation feed SET rejected (${reason})`, { platform_id: this.deps.platformId });
    throw new DocumentRejectedError(reason);
  }
}
