// A bounded (least recently used goes first), time-limited map, used by the in-process caches of the store
// and of verified secrets. The generation counter closes the read/invalidate race: a value loaded before
// an invalidation is never stored after it.

interface Entry<V> {
  value: V;
  expiresAt: number;
}

export interface BoundedCacheOptions {
  /** Entries kept at most; 0 keeps none. */
  readonly maxEntries: number;
  /** How long an entry is served after it was set, unless `set` says otherwise (Infinity: until pushed out). */
  readonly ttlMs: number;
}

export class BoundedCache<V> {
  private readonly entries = new Map<string, Entry<V>>();
  private generationCounter = 0;
  private readonly maxEntries: number;
  private readonly ttlMs: number;

  constructor({ maxEntries, ttlMs }: BoundedCacheOptions) {
    this.maxEntries = maxEntries;
    this.ttlMs = ttlMs;
  }

  get generation(): number {
    return this.generationCounter;
  }

  get(key: string): V | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    if (entry.expiresAt <= Date.now()) {
      this.entries.delete(key);
      return undefined;
    }
    // Re-insert to mark as most recently used (Map keeps insertion order).
    this.entries.delete(key);
    this.entries.set(key, entry);
    return entry.value;
  }

  /** The live value, leaving the recency order (and an expired entry) as they are. */
  peek(key: string): V | undefined {
    const entry = this.entries.get(key);
    return entry && entry.expiresAt > Date.now() ? entry.value : undefined;
  }

  /** Stores unless an invalidation happened since `generation` was read (then the value may be stale). */
  set(key: string, value: V, generation = this.generationCounter, ttlMs = this.ttlMs): void {
    if (generation !== this.generationCounter || this.maxEntries === 0 || ttlMs <= 0) return;
    this.entries.delete(key);
    this.entries.set(key, { value, expiresAt: Date.now() + ttlMs });
    while (this.entries.size > this.maxEntries) this.entries.delete(this.entries.keys().next().value!);
  }

  delete(key: string): void {
    this.generationCounter++;
    this.entries.delete(key);
  }

  deleteWhere(predicate: (key: string, value: V) => boolean): void {
    this.generationCounter++;
    for (const [key, entry] of this.entries) if (predicate(key, entry.value)) this.entries.delete(key);
  }

  clear(): void {
    this.generationCounter++;
    this.entries.clear();
  }
}
