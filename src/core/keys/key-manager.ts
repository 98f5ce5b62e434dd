// Signing keys: creation on a fresh database, rotation (publish first, activate after the propagation
// window), retirement, the JWKS document, and the key that signs now. Keys are re-read from Postgres
// every KEY_REFRESH_SECONDS and at once on an invalidation message; the last good copy keeps serving
// while Postgres is away.
import { generateKeyPair } from 'node:crypto';
import { strongEtag } from '../support/etag.js';
import { promisify } from 'node:util';
import { calculateJwkThumbprint, exportJWK } from 'jose';
import { ServiceError } from '../errors.js';
import type { InvalidationBus } from '../ports/invalidation.js';
import { WriteDeadlineError, type SigningKeyRow, type Store } from '../model.js';
import { computeKeyStates, type KeyStatus } from './key-states.js';
import { decryptPrivateKey, encryptPrivateKey } from './key-encryption.js';
import { NO_REVOCATIONS, type Revocations } from '../revocation/revocation-service.js';

const LOCK = 'ace:signing-keys';
// Key generation runs on libuv's thread pool, off the event loop.
const generateRsaKeyPair = promisify(generateKeyPair);

export interface KeyManagerOptions {
  kek: Buffer;
  tokenTtlSeconds: number;
  clockSkewSeconds: number;
  propagationSeconds: number;
  rotationIntervalSeconds: number;
  refreshSeconds: number;
  rsaModulusLength?: number;
}

export interface SigningKey {
  kid: string;
  privateKeyPem: string;
}

interface Snapshot {
  active: SigningKey | undefined;
  jwks: { body: Buffer; etag: string };
  /** Rebuild at this time (ms): the next key state change. */
  validUntil: number;
}

export interface KeyRecordView {
  kid: string;
  state: KeyStatus['state'];
  created_at: string;
  activates_at: string;
  deactivated_at: string | null;
  retires_at: string | null;
  retired_at: string | null;
}

export class KeyManager {
  private rows: SigningKeyRow[] = [];
  private readonly privatePems = new Map<string, string>();
  private snapshot: Snapshot | undefined;
  private timers: NodeJS.Timeout[] = [];
  /** Set once the revocation feed exists (it signs with this manager's keys, so it comes later). */
  revocations: Revocations = NO_REVOCATIONS;

  constructor(
    private readonly store: Store,
    private readonly bus: InvalidationBus,
    private readonly options: KeyManagerOptions,
    private readonly onError: (error: unknown) => void = () => {},
  ) {
    bus.subscribe((message) => {
      if (message.kind === 'keys' || message.kind === 'all') void this.refresh().catch(onError);
    });
  }

  private get keepPublishedMs(): number {
    return (this.options.tokenTtlSeconds + this.options.clockSkewSeconds) * 1000;
  }

  /** Loads the keys, creating the first one on a fresh database. Throws if any key cannot be decrypted. */
  async start(): Promise<void> {
    await this.store.withLock(LOCK, true, async (writer) => {
      const rows = await writer.listSigningKeys();
      const states = computeKeyStates(rows, Date.now(), this.keepPublishedMs);
      if (!states.some((s) => s.state === 'active') && !states.some((s) => s.state === 'next')) {
        // Fresh database: no instance can have signed anything, so the first key is active at once.
        await writer.insertSigningKey(await this.newKey(0));
      }
    });
    await this.refresh();
    const refresh = setInterval(() => void this.refresh().catch(this.onError), this.options.refreshSeconds * 1000);
    this.timers.push(refresh);
    if (this.options.rotationIntervalSeconds > 0) {
      const every = Math.max(1, Math.min(60, Math.floor(this.options.rotationIntervalSeconds / 10))) * 1000;
      this.timers.push(setInterval(() => void this.rotateIfDue().catch(this.onError), every));
    }
    for (const timer of this.timers) timer.unref();
  }

  stop(): void {
    this.timers.forEach(clearInterval);
    this.timers = [];
  }

  async refresh(): Promise<void> {
    const rows = await this.store.listSigningKeys();
    for (const row of rows) {
      if (!this.privatePems.has(row.kid) && row.retiredAt === null) {
        this.privatePems.set(row.kid, decryptPrivateKey(this.options.kek, row.privateKeyEncrypted, row.kid));
      }
    }
    this.rows = rows;
    this.snapshot = undefined; // rebuilt on next use
  }

  statuses(now = Date.now()): KeyStatus[] {
    return computeKeyStates(this.rows, now, this.keepPublishedMs);
  }

  /** The key that signs now; 503 when none is active (which only a misconfigured database can cause). */
  activeKey(): SigningKey {
    const { active } = this.current();
    if (!active) throw new ServiceError('service_unavailable', 'No active signing key.', { 'Retry-After': '1' });
    return active;
  }

  /** The JWKS body (active first, then next and retiring keys) and its strong ETag. */
  jwks(): { body: Buffer; etag: string } {
    return this.current().jwks;
  }

  /**
   * What the hot paths need, computed once per change instead of per request: on every refresh, and when
   * the clock reaches the next state change (a key activating or leaving the key set).
   */
  private current(): Snapshot {
    const now = Date.now();
    if (!this.snapshot || now >= this.snapshot.validUntil) this.snapshot = this.buildSnapshot(now);
    return this.snapshot;
  }

  private buildSnapshot(now: number): Snapshot {
    const statuses = this.statuses(now);
    const activeStatus = statuses.find((s) => s.state === 'active');
    const pem = activeStatus && this.privatePems.get(activeStatus.row.kid);
    const order = { active: 0, next: 1, retiring: 2, retired: 3 } as const;
    const published = statuses
      .filter((s) => s.state !== 'retired')
      .sort((a, b) => order[a.state] - order[b.state] || b.row.activatesAt.getTime() - a.row.activatesAt.getTime());
    const keys = published.map(({ row }) => ({ kty: 'RSA', use: 'sig', alg: 'RS256', kid: row.kid, n: row.publicJwk.n, e: row.publicJwk.e }));
    const body = Buffer.from(JSON.stringify({ keys }));
    const etag = strongEtag(body);
    // The next instant at which some state changes: a key activates or leaves the key set.
    const upcoming = statuses
      .flatMap((s) => [s.row.activatesAt.getTime(), s.retiresAt?.getTime() ?? Infinity, s.row.retiredAt?.getTime() ?? Infinity])
      .filter((t) => t > now);
    return {
      active: activeStatus && pem ? { kid: activeStatus.row.kid, privateKeyPem: pem } : undefined,
      jwks: { body, etag },
      validUntil: Math.min(...upcoming, Infinity),
    };
  }

  keyInfo(): { activeAgeSeconds: number; rotationIntervalSeconds: number; byState: Record<string, number> } {
    const statuses = this.statuses();
    const active = statuses.find((s) => s.state === 'active');
    const byState: Record<string, number> = {};
    for (const s of statuses) byState[s.state] = (byState[s.state] ?? 0) + 1;
    return {
      activeAgeSeconds: active ? (Date.now() - active.row.activatesAt.getTime()) / 1000 : 0,
      rotationIntervalSeconds: this.options.rotationIntervalSeconds,
      byState,
    };
  }

  list(): KeyRecordView[] {
    return this.statuses().map(toView);
  }

  /** Publishes a new key now; it becomes active after the propagation window. */
  async rotate(): Promise<KeyRecordView> {
    // Generated before the lock: the admin call's transaction is bounded by the store deadline, and RSA
    // generation must not eat into it.
    const created = await this.newKey(this.options.propagationSeconds * 1000);
    const row = await this.adminWrite(() =>
      this.store.withLock(
        LOCK,
        true,
        async (writer) => {
          // Timed from publication, so the whole propagation window follows it.
          const published = { ...created, createdAt: new Date(), activatesAt: new Date(Date.now() + this.options.propagationSeconds * 1000) };
          await writer.insertSigningKey(published);
          return published;
        },
        { bounded: true },
      ),
    );
    await this.afterWrite();
    return toView(this.statuses().find((s) => s.row.kid === row!.kid)!);
  }

  /** Removes a non-active key from the key set. */
  async retire(kid: string): Promise<KeyRecordView> {
    const outcome = await this.adminWrite(() =>
      this.store.withLock(
        LOCK,
        true,
        async (writer) => {
          const rows = await writer.listSigningKeys();
          const status = computeKeyStates(rows, Date.now(), this.keepPublishedMs).find((s) => s.row.kid === kid);
          if (!status) return 'not_found' as const;
          if (status.state === 'active') return 'active' as const;
          if (status.state !== 'retired') await writer.updateSigningKey(kid, { retiredAt: new Date() });
          return 'ok' as const;
        },
        { bounded: true },
      ),
    );
    if (outcome === 'not_found') throw new ServiceError('not_found', 'No signing key with this kid.');
    if (outcome === 'active') {
      throw new ServiceError('conflict', 'The active signing key cannot be retired; rotate first, then retire it once it is retiring.');
    }
    await this.afterWrite();
    // Leaving the JWKS is not enough: verifiers cache it for up to an hour. The feed voids the kid now.
    await this.revocations.key(kid);
    return toView(this.statuses().find((s) => s.row.kid === kid)!);
  }

  /** Scheduled rotation: one instance at a time (try-lock), only when the newest key is older than the interval. */
  async rotateIfDue(): Promise<boolean> {
    const rotated = await this.store.withLock(LOCK, false, async (writer) => {
      const rows = await writer.listSigningKeys();
      const newest = rows.filter((r) => r.retiredAt === null).sort((a, b) => b.createdAt.getTime() - a.createdAt.getTime())[0];
      if (newest && Date.now() - newest.createdAt.getTime() < this.options.rotationIntervalSeconds * 1000) return false;
      const created = await this.newKey(this.options.propagationSeconds * 1000);
      await writer.insertSigningKey(created);
      return created.kid;
    });
    if (!rotated) return false;
    await this.afterWrite();
    this.onScheduledRotation(rotated);
    return true;
  }

  /** Told the kid of every key this instance's schedule published (for the audit trail). */
  onScheduledRotation: (kid: string) => void = () => {};

  /**
   * An admin key write under the store deadline. Its failure is a 503 (StoreUnavailableError); when the
   * outcome is unknown, every instance re-reads the keys anyway (and the periodic refresh follows).
   */
  private async adminWrite<T>(write: () => Promise<T>): Promise<T> {
    try {
      return await write();
    } catch (error) {
      if (error instanceof WriteDeadlineError) {
        const reread = () => void this.bus.publish({ kind: 'keys' }).catch(this.onError);
        reread();
        void error.settled.then(reread);
      }
      throw error;
    }
  }

  private async afterWrite(): Promise<void> {
    await this.bus.publish({ kind: 'keys' });
    await this.refresh();
  }

  /** A new key that becomes active `activateAfterMs` after it is written (counted from now, after generation). */
  private async newKey(activateAfterMs: number): Promise<SigningKeyRow> {
    const { publicKey, privateKey } = await generateRsaKeyPair('rsa', { modulusLength: this.options.rsaModulusLength ?? 2048 });
    const jwk = await exportJWK(publicKey);
    const kid = await calculateJwkThumbprint({ kty: 'RSA', n: jwk.n!, e: jwk.e! }, 'sha256');
    const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
    return {
      kid,
      publicJwk: { kty: 'RSA', n: jwk.n!, e: jwk.e! },
      privateKeyEncrypted: encryptPrivateKey(this.options.kek, pem, kid),
      // Timed after the (slow) generation, so the whole propagation window follows publication.
      createdAt: new Date(),
      activatesAt: new Date(Date.now() + activateAfterMs),
      retiredAt: null,
    };
  }
}

function toView(status: KeyStatus): KeyRecordView {
  return {
    kid: status.row.kid,
    state: status.state,
    created_at: status.row.createdAt.toISOString(),
    activates_at: status.row.activatesAt.toISOString(),
    deactivated_at: status.deactivatedAt?.toISOString() ?? null,
    retires_at: status.retiresAt?.toISOString() ?? null,
    retired_at: status.row.retiredAt?.toISOString() ?? null,
  };
}
