// Signing keys: creation on a fresh database, rotation (publish first, activate after the propagation
// window), retirement, the JWKS document, and the key that signs now. Keys are re-read from Postgres
// every KEY_REFRESH_SECONDS and at once on an invalidation message; the last good copy keeps serving
// while Postgres is away.
import { strongEtag } from '../support/etag.js';
import { ServiceError, WriteDeadlineError } from '../errors.js';
import type { InvalidationBus } from '../ports/invalidation.js';
import type { SigningKeyRow } from '../model.js';
import type { Store } from '../ports/store.js';
import type { KeyMaterial } from '../ports/crypto.js';
import type { Telemetry } from '../ports/telemetry.js';
import { computeKeyStates, type KeyStatus } from './key-states.js';
import { NO_REVOCATIONS, type Revocations } from '../revocation/revocation-service.js';
import { auditEvents, SCHEDULER_ACTOR, type AuditSink, type ChangeBy } from '../audit/events.js';
import type { Transaction, UnitOfWork } from '../ports/unit-of-work.js';

const LOCK = 'ace:signing-keys';

export interface KeyManagerPorts {
  store: Store;
  bus: InvalidationBus;
  material: KeyMaterial;
  /** Retiring a key voids its tokens through the revocation log. */
  revocations?: Revocations;
  /** Admin key changes: the write, the revocation entry and the audit event in one transaction. */
  uow: UnitOfWork;
  /** Where scheduled rotations are recorded (admin changes are written in their unit of work). */
  audit: AuditSink;
  telemetry: Telemetry;
  tokenTtlSeconds: number;
  clockSkewSeconds: number;
  propagationSeconds: number;
  rotationIntervalSeconds: number;
  refreshSeconds: number;
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

export class KeyManager {
  private rows: SigningKeyRow[] = [];
  private readonly privatePems = new Map<string, string>();
  private snapshot: Snapshot | undefined;
  private timers: NodeJS.Timeout[] = [];
  private readonly store: Store;
  private readonly uow: UnitOfWork;
  private readonly bus: InvalidationBus;
  private readonly revocations: Revocations;

  constructor(private readonly options: KeyManagerPorts) {
    ({ store: this.store, uow: this.uow, bus: this.bus } = options);
    this.revocations = options.revocations ?? NO_REVOCATIONS;
    this.bus.subscribe((message) => {
      if (message.kind === 'keys' || message.kind === 'all') void this.refresh().catch(this.failed('key_refresh'));
    });
  }

  /** Background work that failed is reported and tried again on its next turn. */
  private failed(what: 'key_refresh' | 'key_rotation') {
    return (error: unknown) => this.options.telemetry.record({ type: 'background_failure', what, error });
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
    const refresh = setInterval(() => void this.refresh().catch(this.failed('key_refresh')), this.options.refreshSeconds * 1000);
    this.timers.push(refresh);
    if (this.options.rotationIntervalSeconds > 0) {
      const every = Math.max(1, Math.min(60, Math.floor(this.options.rotationIntervalSeconds / 10))) * 1000;
      this.timers.push(setInterval(() => void this.rotateIfDue().catch(this.failed('key_rotation')), every));
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
        this.privatePems.set(row.kid, this.options.material.decrypt(row.kid, row.privateKeyEncrypted));
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
    if (!active) throw new ServiceError('service_unavailable', 'No active signing key.', 1);
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

  list(): KeyStatus[] {
    return this.statuses();
  }

  /** Publishes a new key now; it becomes active after the propagation window. */
  async rotate(by: ChangeBy): Promise<KeyStatus> {
    // Generated before the transaction: it is bounded by the store deadline, and RSA generation must not
    // eat into it.
    const created = await this.newKey(this.options.propagationSeconds * 1000);
    const status = await this.adminWrite((tx) => this.inLock(tx, async () => {
      // Timed from publication, so the whole propagation window follows it.
      const published = { ...created, createdAt: new Date(), activatesAt: new Date(Date.now() + this.options.propagationSeconds * 1000) };
      await tx.keys.insertSigningKey(published);
      const after = await this.statusIn(tx, published.kid);
      await tx.audit.insert(auditEvents.adminChange('key.rotated', { ...by, kid: published.kid, status: after.state }));
      return after;
    }));
    await this.afterWrite();
    return status;
  }

  /** Removes a non-active key from the key set, and voids its tokens through the revocation log. */
  async retire(kid: string, by: ChangeBy): Promise<KeyStatus> {
    const status = await this.adminWrite((tx) => this.inLock(tx, async () => {
      const rows = await tx.keys.listSigningKeys();
      const before = computeKeyStates(rows, Date.now(), this.keepPublishedMs).find((s) => s.row.kid === kid);
      if (!before) throw new ServiceError('not_found', 'No signing key with this kid.');
      if (before.state === 'active') {
        throw new ServiceError('conflict', 'The active signing key cannot be retired; rotate first, then retire it once it is retiring.');
      }
      if (before.state !== 'retired') await tx.keys.updateSigningKey(kid, { retiredAt: new Date() });
      // Leaving the JWKS is not enough: verifiers cache it for up to an hour. The feed voids the kid now,
      // in the same transaction as the retirement.
      await this.revocations.key(tx, kid);
      const after = await this.statusIn(tx, kid);
      await tx.audit.insert(auditEvents.adminChange('key.retired', { ...by, kid, status: after.state }));
      return after;
    }));
    await this.afterWrite();
    return status;
  }

  /** Signing-key writes of every instance are serialised by a transaction-scoped lock (works through a pooler). */
  private async inLock<T>(tx: Transaction, fn: () => Promise<T>): Promise<T> {
    await tx.lock(LOCK);
    // Every instance re-reads the keys once the change is committed.
    tx.afterCommit(() => this.bus.publish({ kind: 'keys' }));
    return fn();
  }

  private async statusIn(tx: Transaction, kid: string): Promise<KeyStatus> {
    return computeKeyStates(await tx.keys.listSigningKeys(), Date.now(), this.keepPublishedMs).find((s) => s.row.kid === kid)!;
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
    await this.bus.publish({ kind: 'keys' });
    await this.refresh();
    this.options.audit.emit(auditEvents.adminChange('key.rotated', { actor: SCHEDULER_ACTOR, clientAddress: '', kid: rotated, status: 'next' }));
    return true;
  }

  /**
   * An admin key change: one unit of work under the store deadline. Its failure is a 503
   * (StoreUnavailableError) and nothing was applied; when the outcome is unknown, every instance
   * re-reads the keys anyway (and the periodic refresh follows).
   */
  private async adminWrite<T>(write: (tx: Transaction) => Promise<T>): Promise<T> {
    try {
      return await this.uow.run(write);
    } catch (error) {
      if (error instanceof WriteDeadlineError) {
        const reread = () => void this.bus.publish({ kind: 'keys' }).catch(this.failed('key_refresh'));
        reread();
        void error.settled.then(reread);
      }
      throw error;
    }
  }

  /** After a committed change: this instance's copy now; a failure is reported, the periodic refresh follows. */
  private async afterWrite(): Promise<void> {
    await this.refresh().catch(this.failed('key_refresh'));
  }

  /** A new key that becomes active `activateAfterMs` after it is written (counted from now, after generation). */
  private async newKey(activateAfterMs: number): Promise<SigningKeyRow> {
    const generated = await this.options.material.generate();
    return {
      ...generated,
      // Timed after the (slow) generation, so the whole propagation window follows publication.
      createdAt: new Date(),
      activatesAt: new Date(Date.now() + activateAfterMs),
      retiredAt: null,
    };
  }
}
