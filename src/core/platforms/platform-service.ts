// Platforms: admin creation and changes (scope catalogue and route rules kept consistent), the
// SvcScopesYaml scope file, and an agent's platform listing with best-effort enrichment.
import { ServiceError } from '../errors.js';
import { checkAgainst } from '../../adapters/http/schemas/validate.js';
import { HTTP_METHODS, SvcScopesYaml } from '@agent-credential-exchange/middleware/scopes-file';
import { renderScopeFile } from './scope-file-text.js';
import type { PlatformCreate, PlatformPatch } from '../../adapters/http/schemas/admin.js';
import type { PlatformEntry, PlatformListing } from '../../adapters/http/schemas/public.js';
import { BoundedCache } from '../support/bounded-cache.js';
import { strongEtag } from '../support/etag.js';
import { NO_REVOCATIONS, type Revocations } from '../revocation/revocation-service.js';
import type { AgentView, PlatformInput, PlatformRecord, RouteRule, ScopeDefinition, Store } from '../model.js';

const checkScopeFile = checkAgainst(SvcScopesYaml);

export interface ScopeFile {
  body: Buffer;
  etag: string;
}

export class PlatformService {
  private readonly scopeFiles = new BoundedCache<ScopeFile>(1000, 60_000);

  constructor(
    private readonly store: Store,
    private readonly enrichmentTimeoutMs: number,
    private readonly revocations: Revocations = NO_REVOCATIONS,
  ) {}

  async create(body: PlatformCreate): Promise<PlatformRecord> {
    const scopes = normaliseScopes(body.scopes);
    const input: PlatformInput = {
      name: body.name,
      domain: body.domain ? body.domain.toLowerCase() : null,
      status: body.status ?? 'active',
      verificationStatus: body.verification_status ?? 'pending',
      scopes,
      routes: normaliseRoutes(body.routes ?? [], scopes),
    };
    return this.store.createPlatform(input);
  }

  async update(platformId: string, body: PlatformPatch): Promise<PlatformRecord> {
    const current = await this.get(platformId);
    const patch: Partial<PlatformInput> = {};
    if (body.name !== undefined) patch.name = body.name;
    if (body.domain !== undefined) patch.domain = body.domain ? body.domain.toLowerCase() : null;
    if (body.status !== undefined) patch.status = body.status;
    if (body.verification_status !== undefined) patch.verificationStatus = body.verification_status;
    const scopes = body.scopes !== undefined ? normaliseScopes(body.scopes) : current.scopes;
    if (body.scopes !== undefined) patch.scopes = scopes;
    if (body.routes !== undefined) patch.routes = normaliseRoutes(body.routes, scopes);
    else if (body.scopes !== undefined) {
      // Routes that require a dropped scope would be unsatisfiable: refuse rather than guess.
      normaliseRoutes(current.routes, scopes);
    }
    // Who loses a scope when the catalogue drops it must be read before the grants are rewritten.
    const dropped = body.scopes !== undefined ? current.scopes.map((s) => s.name).filter((n) => !scopes.some((s) => s.name === n)) : [];
    const losing = dropped.length > 0 ? await this.revocations.agentsHoldingScopes(current.id, dropped) : [];
    const updated = await this.store.updatePlatform(platformId, patch);
    if (!updated) throw new ServiceError('not_found', 'No platform with this id.');
    if (body.status !== undefined && body.status !== 'active') {
      await this.revocations.platform(updated.id);
    } else {
      for (const agentId of losing) await this.revocations.agent(agentId, [updated.id]);
    }
    return updated;
  }

  async get(platformId: string): Promise<PlatformRecord> {
    const platform = await this.store.getPlatform(platformId.toLowerCase());
    if (!platform) throw new ServiceError('not_found', 'No platform with this id.');
    return platform;
  }

  list(): Promise<PlatformRecord[]> {
    return this.store.listPlatforms();
  }

  /** The platform's SvcScopesYaml v1 document, memoised per platform version. */
  async scopeFile(platformId: string): Promise<ScopeFile> {
    const platform = await this.get(platformId);
    const cacheKey = `${platform.id}@${platform.updatedAt}`;
    const cached = this.scopeFiles.get(cacheKey);
    if (cached) return cached;
    const document = {
      schema: 'SvcScopesYaml',
      version: 1,
      platform_id: platform.id,
      scopes: platform.scopes.map((s) => ({ name: s.name, description: s.description })),
      routes: platform.routes.map((r) => ({ method: r.method, path: r.path, scopes: [...r.scopes] })),
    };
    const problem = checkScopeFile(document);
    if (problem) throw new Error(`scope file of ${platform.id} does not match SvcScopesYaml: ${problem}`);
    const body = Buffer.from(renderScopeFile(platform.name, document));
    const file = { body, etag: strongEtag(body) };
    this.scopeFiles.set(cacheKey, file);
    return file;
  }

  /** The agent's platforms. Enrichment (name, hostname, verification_status) is dropped if slow. */
  async listing(view: AgentView): Promise<PlatformListing> {
    const ids = Object.keys(view.grants).sort();
    const entries: PlatformEntry[] = ids.map((id) => ({
      platform_id: id,
      granted_scopes: [...view.grants[id].scopes].sort(),
      status: view.grants[id].platformStatus,
      hostname: null,
    }));
    // One shared budget: each platform whose metadata arrives in time is enriched, the others are not.
    let timer: NodeJS.Timeout | undefined;
    const budget = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), this.enrichmentTimeoutMs)));
    const metadata = await Promise.all(ids.map((id) => Promise.race([this.store.getPlatform(id).catch(() => undefined), budget])));
    clearTimeout(timer);
    entries.forEach((entry, i) => {
      const platform = metadata[i];
      if (!platform) return;
      entry.name = platform.name;
      entry.hostname = platform.verificationStatus === 'verified' ? platform.domain : null;
      entry.verification_status = platform.verificationStatus;
    });
    return { agent_id: view.agentId, platforms: entries };
  }
}

function normaliseScopes(scopes: { name: string; description?: string }[]): ScopeDefinition[] {
  const seen = new Set<string>();
  return scopes.map((scope, i) => {
    if (seen.has(scope.name)) throw new ServiceError('validation_error', `scopes[${i}].name "${scope.name}" is defined twice.`);
    seen.add(scope.name);
    return { name: scope.name, description: scope.description ?? '' };
  });
}

function normaliseRoutes(routes: RouteRule[], scopes: ScopeDefinition[]): RouteRule[] {
  const defined = new Set(scopes.map((s) => s.name));
  const seen = new Set<string>();
  return routes.map((route, i) => {
    const method = route.method.toUpperCase();
    if (!(HTTP_METHODS as readonly string[]).includes(method)) {
      throw new ServiceError('validation_error', `routes[${i}].method must be one of ${HTTP_METHODS.join(', ')}.`);
    }
    const key = `${method} ${route.path}`;
    if (seen.has(key)) throw new ServiceError('validation_error', `routes[${i}] repeats ${key}.`);
    seen.add(key);
    route.scopes.forEach((scope, j) => {
      if (!defined.has(scope)) {
        throw new ServiceError('validation_error', `routes[${i}].scopes[${j}] names scope "${scope}", which the platform does not define.`);
      }
    });
    return { method, path: route.path, scopes: [...new Set(route.scopes)] };
  });
}
