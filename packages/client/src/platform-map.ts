// Which platform a URL belongs to: explicit overrides first (by origin, then by hostname), then the
// verified hostnames from the platform listing. A hostname claimed by two platforms maps to neither:
// guessing would send one platform's token to the other.
import type { PlatformEntry } from './service-api.js';

export class PlatformMap {
  private readonly byOrigin = new Map<string, string>();
  private readonly byOverrideHost = new Map<string, string>();
  private readonly byListedHost = new Map<string, string>();

  constructor(
    listing: PlatformEntry[],
    overrides: Record<string, string>,
    /** Listed hostnames are used for https: URLs only, unless this is set (tokens must not cross the wire in clear). */
    private readonly allowInsecureHttp: boolean,
  ) {
    for (const [key, platformId] of Object.entries(overrides)) {
      if (key.includes('://')) this.byOrigin.set(new URL(key).origin, platformId);
      else this.byOverrideHost.set(normalizeHost(key), platformId);
    }
    const ambiguous = new Set<string>();
    for (const platform of listing) {
      if (!platform.hostname) continue;
      const host = normalizeHost(platform.hostname);
      const seen = this.byListedHost.get(host);
      if (seen !== undefined && seen !== platform.platform_id) ambiguous.add(host);
      this.byListedHost.set(host, platform.platform_id);
    }
    for (const host of ambiguous) this.byListedHost.delete(host);
  }

  lookup(url: URL): string | undefined {
    const byOrigin = this.byOrigin.get(url.origin);
    if (byOrigin) return byOrigin;
    const host = normalizeHost(url.host);
    const hostname = normalizeHost(url.hostname);
    const override = this.byOverrideHost.get(host) ?? this.byOverrideHost.get(hostname);
    if (override) return override;
    if (url.protocol !== 'https:' && !(this.allowInsecureHttp && url.protocol === 'http:')) return undefined;
    return this.byListedHost.get(host) ?? this.byListedHost.get(hostname);
  }
}

function normalizeHost(host: string): string {
  return host.trim().toLowerCase().replace(/\.$/, '');
}
