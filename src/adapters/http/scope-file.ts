// The platform's SvcScopesYaml v1 document (GET /api/v1/platforms/{id}/scopes.yaml), rendered from the
// platform record and memoised per platform version.
// The same validator as the middleware's (the protocol package's, compiled ahead of time from the schema).
import { scopeFileProblems } from '@agent-credential-exchange/protocol/scope-file-validator';
import type { PlatformService } from '../../core/platforms/platform-service.js';
import type { PlatformRecord } from '../../core/model.js';
import { BoundedCache } from '../../core/support/bounded-cache.js';
import { strongEtag } from '../../core/support/etag.js';
import { renderScopeFile } from './scope-file-text.js';

export interface ScopeFile {
  body: Buffer;
  etag: string;
}

/** What the token endpoint accepts as `resource` for the platform (besides urn:uuid:), when there is any. */
function resourcesMember(platform: PlatformRecord): { resources?: string[] } {
  const resources = [...platform.resources];
  if (platform.domain && platform.verificationStatus === 'verified') resources.push(`https://${platform.domain.toLowerCase()}`);
  return resources.length > 0 ? { resources } : {};
}

export interface ScopeFilesOptions {
  readonly platforms: PlatformService;
}

export class ScopeFiles {
  private readonly files = new BoundedCache<ScopeFile>({ maxEntries: 1000, ttlMs: 60_000 });

  private readonly platforms: PlatformService;

  constructor({ platforms }: ScopeFilesOptions) {
    this.platforms = platforms;
  }

  async file(platformId: string): Promise<ScopeFile> {
    const platform = await this.platforms.get(platformId);
    const cacheKey = `${platform.id}@${platform.updatedAt}`;
    const cached = this.files.get(cacheKey);
    if (cached) return cached;
    const document = {
      schema: 'SvcScopesYaml',
      version: 1,
      platform_id: platform.id,
      scopes: platform.scopes.map((s) => ({ name: s.name, description: s.description })),
      routes: platform.routes.map((r) => ({ method: r.method, path: r.path, scopes: [...r.scopes] })),
      ...resourcesMember(platform),
    };
    const problems = scopeFileProblems(document);
    if (problems.length > 0) throw new Error(`scope file of ${platform.id} does not match SvcScopesYaml: ${problems.join('; ')}`);
    const body = Buffer.from(renderScopeFile(platform.name, document));
    const file = { body, etag: strongEtag(body) };
    this.files.set(cacheKey, file);
    return file;
  }
}
