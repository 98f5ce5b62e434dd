// The memory adapter (test/support/memory) against the same conformance suites as Postgres and PGlite
// (test/integration/store-conformance.test.ts): the core's in-process tests are only worth what this proves.
import { describe } from 'vitest';
import { MemoryAuditSink, MemoryRevocationLog, MemoryStore } from '../support/memory/memory-store.js';
import { MemoryUnitOfWork } from '../support/memory/unit-of-work.js';
import { feedCredentialStoreConformance } from '../support/feed-credential-store-conformance.js';
import { storeConformance } from '../support/store-conformance.js';
import { revocationStoreConformance } from '../support/revocation-store-conformance.js';
import { replayGuardConformance } from '../support/replay-guard-conformance.js';
import { MemoryReplayGuard } from '../../src/adapters/cache/replay-guard.js';

/** The memory records with their unit of work, the only way they change. */
function memory() {
  const store = new MemoryStore();
  const revocations = new MemoryRevocationLog(store);
  return { store, revocations, uow: new MemoryUnitOfWork(store, revocations, new MemoryAuditSink()) };
}

describe('Store conformance: memory', () => {
  const { store, uow } = memory();
  storeConformance(() => ({ store, peer: store, uow, concurrentSessions: true }));
});

describe('Revocation store conformance: memory', () => {
  const { revocations, uow } = memory();
  revocationStoreConformance(() => ({ revocations, uow }));
});

describe('Feed credential store conformance: memory', () => {
  const { uow } = memory();
  feedCredentialStoreConformance(() => ({ reads: uow.feedCredentials, uow }));
});

describe('Used assertion jtis: in process (MemoryReplayGuard)', () => {
  const guard = new MemoryReplayGuard();
  replayGuardConformance(() => ({ guard }));
});
