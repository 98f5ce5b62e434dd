// How many revocation polls a feed credential may send to this process: a token bucket per credential.
// A receiver needs about one poll a second (more while paging); a holder of a valid credential that
// floods, or varies its requests to defeat the answer cache, gets 429 + Retry-After (RFC 8936 §2.4.4
// permits an error answer) and costs a map lookup. Only verified credentials get a bucket, so the map is
// bounded by the credentials operators created; a deleted credential's bucket is released.

interface Bucket {
  platformId: string;
  tokens: number;
  at: number;
}

export interface PollBudgetOptions {
  /** Polls a credential's bucket gains a second. */
  readonly perSecond: number;
  /** Polls the bucket holds at most. */
  readonly burst: number;
}

export class PollBudget {
  private readonly buckets = new Map<string, Bucket>();

  constructor(private readonly limits: PollBudgetOptions) {}

  /** Takes one poll from the credential's bucket: false when it is empty (answer 429). */
  take(credentialId: string, platformId: string, now = Date.now()): boolean {
    let bucket = this.buckets.get(credentialId);
    if (bucket === undefined) {
      bucket = { platformId, tokens: this.limits.burst, at: now };
      this.buckets.set(credentialId, bucket);
    } else {
      bucket.tokens = Math.min(this.limits.burst, bucket.tokens + ((now - bucket.at) / 1000) * this.limits.perSecond);
      bucket.at = now;
    }
    if (bucket.tokens < 1) return false;
    bucket.tokens -= 1;
    return true;
  }

  /** Forgets the buckets of credentials no longer live (of one platform, or of all after a full reload). */
  release(platformId: string | undefined, isLive: (platformId: string, credentialId: string) => boolean): void {
    for (const [credentialId, bucket] of this.buckets) {
      if ((platformId === undefined || bucket.platformId === platformId) && !isLive(bucket.platformId, credentialId)) this.buckets.delete(credentialId);
    }
  }

  /** Credentials holding a bucket now. */
  get size(): number {
    return this.buckets.size;
  }
}
