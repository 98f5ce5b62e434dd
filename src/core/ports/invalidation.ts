// What changed, told to every instance so that caches drop it: the interface the domain depends on.
// Implementations (in process, Redis pub/sub) are in cache/invalidation-bus.ts.
export type Invalidation =
  | { kind: 'agent'; apiKeyId: string }
  | { kind: 'agents'; apiKeyIds: string[] }
  | { kind: 'platform'; platformId: string }
  | { kind: 'keys' }
  /** Revocation entries were appended for these platforms (`at`: ms, for the publish-to-send metric). */
  | { kind: 'revocation'; platformIds: string[]; at: number }
  /** A revocation-feed credential of this platform was created or deleted. */
  | { kind: 'feed_credentials'; platformId: string }
  /** Trusted workload issuers or their bindings changed (an agent's own keys travel as `agent`). */
  | { kind: 'client_keys' }
  | { kind: 'all' };

export interface InvalidationBus {
  publish(message: Invalidation): Promise<void>;
  subscribe(handler: (message: Invalidation) => void): void;
  close(): Promise<void>;
}
