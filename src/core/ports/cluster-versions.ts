// Which live instances can read what this build writes: data older releases cannot read (agents without
// secrets) waits until none of them is live, or an old pod would answer 401 for an agent that exists.
export interface ClusterVersions {
  /** Live connections of instances whose capability level is below `level` (0: every one supports it). */
  olderThan(level: number): Promise<number>;
}

/** Levels: 1 the releases before agents without secrets; 2 client keys and workload identity. */
export const CAPABILITY_CLIENT_KEYS = 2;
