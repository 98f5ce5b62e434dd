// The memory adapter (test/support/memory) against the same conformance suites as Postgres and PGlite
// (test/store-conformance.test.ts): the core's in-process tests are only worth what this proves.
import { describe } from 'vitest';
import { MemoryFeedCredentials, MemoryRevocationLog, MemoryStore } from '../support/memory/memory-store.js';
import { feedCredentialStoreConformance } from '../support/feed-credential-store-conformance.js';
import { storeConformance } from '../support/store-conformance.js';
import { revocationStoreConformance } from '../support/revocation-store-conformance.js';

describe('Store conformance: memory', () => {
  const store = new MemoryStore();
  storeConformance(() => ({ store, peer: store, concurrentSessions: true }));
});

describe('Revocation store conformance: memory', () => {
  const store = new MemoryStore();
  const revocations = new MemoryRevocationLog(store);
  revocationStoreConformance(() => ({ store, revocations }));
});

describe('Feed credential store conformance: memory', () => {
  const store = new MemoryStore();
  const feed = new MemoryFeedCredentials(store);
  feedCredentialStoreConformance(() => ({ reads: feed, writes: feed, store }));
});
