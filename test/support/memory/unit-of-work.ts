// The memory unit of work, the only write path of the memory records: runs an admin change on the memory
// store, revocation log and audit sink, and commits all of it or nothing: on any failure inside, every record, entry, sequence and event
// is put back as it was. Units run one at a time (as if each held every lock); effects queued with
// afterCommit run once the unit has committed. `faults` makes the append or the event insert fail inside
// the unit, as the Postgres test does with triggers.
import { StoreUnavailableError } from '../../../src/core/errors.js';
import { runEffects, type Transaction, type UnitOfWork } from '../../../src/core/ports/unit-of-work.js';
import { MemoryAdminWrites, MemoryClientKeys, MemoryFeedCredentials, type MemoryAuditSink, type MemoryRevocationLog, type MemoryStore } from './memory-store.js';

export interface MemoryFaults {
  append?: boolean;
  auditInsert?: boolean;
}

const clone = <T>(value: T): T => structuredClone(value);

/** Empties `target` and fills it from `source` (the memory ports hold readonly maps and arrays). */
function restoreMap<K, V>(target: Map<K, V>, source: Map<K, V>): void {
  target.clear();
  for (const [k, v] of source) target.set(k, v);
}

export class MemoryUnitOfWork implements UnitOfWork {
  readonly faults: MemoryFaults = {};
  /** Effects that threw after a commit (the change stands). */
  readonly effectFailures: unknown[] = [];
  private queue: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly store: MemoryStore,
    private readonly log: MemoryRevocationLog,
    private readonly audit: MemoryAuditSink,
    readonly feedCredentials: MemoryFeedCredentials = new MemoryFeedCredentials(store),
    readonly clientKeys: MemoryClientKeys = new MemoryClientKeys(store),
  ) {}

  run<T>(fn: (tx: Transaction) => Promise<T>): Promise<T> {
    const turn = this.queue.then(() => this.once(fn));
    // The next unit waits for this one whatever its outcome: a rollback is not a failure of the queue.
    this.queue = turn.then(
      () => undefined,
      () => undefined,
    );
    return turn;
  }

  private async once<T>(fn: (tx: Transaction) => Promise<T>): Promise<T> {
    const { store, log, audit, faults } = this;
    const before = {
      platforms: clone(store.platforms),
      agents: clone(store.agents),
      grants: clone(store.grants),
      keys: clone(store.keys),
      seqs: clone(log.seqs),
      entries: clone(log.entries),
      events: audit.events.length,
      feedCredentials: clone(this.feedCredentials.rows),
      agentKeys: clone(this.clientKeys.agentKeys),
      issuers: clone(this.clientKeys.issuers),
      bindings: clone(this.clientKeys.bindings),
    };
    const effects: (() => Promise<void>)[] = [];
    const tx: Transaction = {
      store: new MemoryAdminWrites(store),
      revocationLog: {
        append: (target, expiresAt) => {
          if (faults.append) throw new StoreUnavailableError('memory', new Error('append refused (injected)'));
          return log.append(target, expiresAt);
        },
        agentsHoldingScopes: (platformId, scopes) => log.agentsHoldingScopes(platformId, scopes),
        databaseNow: async () => Date.now(),
      },
      audit: {
        insert: async (event) => {
          if (faults.auditInsert) throw new StoreUnavailableError('memory', new Error('audit insert refused (injected)'));
          audit.events.push(clone(event));
        },
      },
      keys: store.keyWriter(),
      feedCredentials: this.feedCredentials,
      clientKeys: this.clientKeys,
      lock: async () => {}, // units already run one at a time
      afterCommit: (effect) => void effects.push(effect),
    };
    let result: T;
    try {
      result = await fn(tx);
    } catch (error) {
      // The rollback.
      restoreMap(store.platforms, before.platforms);
      restoreMap(store.agents, before.agents);
      restoreMap(store.grants, before.grants);
      restoreMap(store.keys, before.keys);
      restoreMap(this.feedCredentials.rows, before.feedCredentials);
      restoreMap(this.clientKeys.agentKeys, before.agentKeys);
      restoreMap(this.clientKeys.issuers, before.issuers);
      restoreMap(this.clientKeys.bindings, before.bindings);
      restoreMap(log.seqs, before.seqs);
      log.entries.splice(0, log.entries.length, ...before.entries);
      audit.events.splice(before.events);
      throw error;
    }
    await runEffects(effects, (error) => this.effectFailures.push(error));
    return result;
  }
}
