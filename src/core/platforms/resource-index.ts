// Which platform a resource identifier (RFC 8707) names, for the OAuth token endpoint: the core answers
// it from the platforms' registrations, so the HTTP door only reads the request and renders.
import type { PlatformService } from './platform-service.js';

/** How long the index (registered resources, https://<verified domain>) may lag an admin change. */
const RESOURCE_INDEX_TTL_MS = 5000;
const RESOURCE_MISS_REFRESH_MS = 1000;

export interface ResourceIndexPorts {
  platforms: Pick<PlatformService, 'list'>;
}

/**
 * Resource identifier → platform_id: every platform's registered resources and https://<its verified
 * domain>. Re-read at most every RESOURCE_INDEX_TTL_MS, and on a miss at most every
 * RESOURCE_MISS_REFRESH_MS (one registered a moment ago is found within about a second; a flood of
 * unknown ones costs one read a second). One read at a time. An identifier two platforms would answer
 * to (a resource equal to another platform's domain) names neither: the endpoint never picks one of two.
 */
export class ResourceIndex {
  private byResource = new Map<string, string>();
  private readAt = -Infinity;
  private reading: Promise<void> | undefined;

  constructor(private readonly ports: ResourceIndexPorts) {}

  async lookup(resource: string): Promise<string | undefined> {
    if (performance.now() - this.readAt > RESOURCE_INDEX_TTL_MS) await this.read();
    if (!this.byResource.has(resource) && performance.now() - this.readAt > RESOURCE_MISS_REFRESH_MS) await this.read();
    return this.byResource.get(resource) || undefined;
  }

  private read(): Promise<void> {
    return (this.reading ??= this.refresh().finally(() => (this.reading = undefined)));
  }

  private async refresh(): Promise<void> {
    // '' marks an identifier claimed twice. The exchange itself still checks the grant and the platform's
    // status: this only names the platform.
    const index = new Map<string, string>();
    const claim = (resource: string, platformId: string) => index.set(resource, index.has(resource) && index.get(resource) !== platformId ? '' : platformId);
    for (const p of await this.ports.platforms.list()) {
      for (const resource of p.resources) claim(resource, p.id);
      if (p.domain && p.verificationStatus === 'verified') claim(`https://${p.domain.toLowerCase()}`, p.id);
    }
    this.byResource = index;
    this.readAt = performance.now();
  }
}
