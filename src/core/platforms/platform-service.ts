// Platforms: admin creation and changes (scope catalogue and route rules kept consistent; each change one
// unit of work with its revocation entries and audit event), and an agent's platform listing with
// best-effort enrichment. The scope file is rendered from the record by the HTTP adapter
// (adapters/http/scope-file.ts).
import { ServiceError } from '../errors.js';
import { NO_REVOCATIONS, type Revocations } from '../revocation/revocation-service.js';
import type { AgentView, PlatformInput, PlatformRecord, PlatformStatus, RouteRule, ScopeDefinition, VerificationStatus } from '../model.js';
import type { Store } from '../ports/store.js';
import type { UnitOfWork } from '../ports/unit-of-work.js';
import { NO_TELEMETRY, type Telemetry } from '../ports/telemetry.js';
import { auditEvents, type ChangeBy } from '../audit/events.js';
import { normaliseResource } from '@agent-credential-exchange/protocol/resource-identifier';

/** The HTTP methods a route rule may name (the scope file's set: SvcScopesYaml). */
export const ROUTE_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;

/** A platform as an operator describes it; omitted fields take their defaults. */
export interface PlatformDraft {
  name: string;
  domain?: string | null;
  status?: PlatformStatus;
  verificationStatus?: VerificationStatus;
  scopes: { name: string; description?: string }[];
  routes?: RouteRule[];
  /** Resource identifiers (RFC 8707), e.g. an MCP server's URI; normalised, unique across platforms. */
  resources?: string[];
}

/** The fields an operator changes; the others stay. */
export type PlatformChange = Partial<PlatformDraft>;

/** One platform of an agent's listing; name, hostname and verification status are best-effort. */
export interface ListedPlatform {
  platformId: string;
  grantedScopes: string[];
  status: PlatformStatus;
  name?: string;
  /** The verified domain, else null. */
  hostname: string | null;
  verificationStatus?: VerificationStatus;
}

export interface PlatformServicePorts {
  /** Reads outside a change. */
  store: Store;
  /** Every change: the write, its revocation entries and its audit event commit together. */
  uow: UnitOfWork;
  revocations?: Revocations;
  /** How long the listing waits for platform metadata before answering without it. */
  enrichmentTimeoutMs: number;
  /** Reports a metadata read that failed (the listing answers without it). */
  telemetry?: Telemetry;
}

export class PlatformService {
  private readonly store: Store;
  private readonly uow: UnitOfWork;
  private readonly revocations: Revocations;
  private readonly enrichmentTimeoutMs: number;
  private readonly telemetry: Telemetry;

  constructor(ports: PlatformServicePorts) {
    ({ store: this.store, uow: this.uow, enrichmentTimeoutMs: this.enrichmentTimeoutMs } = ports);
    this.telemetry = ports.telemetry ?? NO_TELEMETRY;
    this.revocations = ports.revocations ?? NO_REVOCATIONS;
  }

  /** `by.fields`: the names of the fields the operator gave, for the audit event. */
  async create(body: PlatformDraft, by: ChangeBy): Promise<PlatformRecord> {
    const scopes = normaliseScopes(body.scopes);
    const input: PlatformInput = {
      name: body.name,
      domain: body.domain ? body.domain.toLowerCase() : null,
      status: body.status ?? 'active',
      verificationStatus: body.verificationStatus ?? 'pending',
      scopes,
      routes: normaliseRoutes(body.routes ?? [], scopes),
      resources: normaliseResources(body.resources ?? []),
    };
    return this.uow.run(async (tx) => {
      const platform = await tx.store.createPlatform(input);
      await tx.audit.insert(
        auditEvents.adminChange('platform.created', { ...by, platformId: platform.id, fields: by.fields ?? Object.keys(body), status: platform.status }),
      );
      return platform;
    });
  }

  async update(platformId: string, body: PlatformChange, by: ChangeBy): Promise<PlatformRecord> {
    return this.uow.run(async (tx) => {
      const current = await tx.store.getPlatform(platformId.toLowerCase());
      if (!current) throw new ServiceError('not_found', 'No platform with this id.');
      const patch: Partial<PlatformInput> = {};
      if (body.name !== undefined) patch.name = body.name;
      if (body.domain !== undefined) patch.domain = body.domain ? body.domain.toLowerCase() : null;
      if (body.status !== undefined) patch.status = body.status;
      if (body.verificationStatus !== undefined) patch.verificationStatus = body.verificationStatus;
      if (body.resources !== undefined) patch.resources = normaliseResources(body.resources);
      const scopes = body.scopes !== undefined ? normaliseScopes(body.scopes) : current.scopes;
      if (body.scopes !== undefined) patch.scopes = scopes;
      if (body.routes !== undefined) patch.routes = normaliseRoutes(body.routes, scopes);
      else if (body.scopes !== undefined) {
        // Routes that require a dropped scope would be unsatisfiable: refuse rather than guess.
        normaliseRoutes(current.routes, scopes);
      }
      // Who loses a scope when the catalogue drops it must be read before the grants are rewritten.
      const dropped = body.scopes !== undefined ? current.scopes.map((s) => s.name).filter((n) => !scopes.some((s) => s.name === n)) : [];
      const losing = dropped.length > 0 ? await tx.revocationLog.agentsHoldingScopes(current.id, dropped) : [];
      const updated = await tx.store.updatePlatform(current.id, patch);
      if (!updated) throw new ServiceError('not_found', 'No platform with this id.');
      if (body.status !== undefined && body.status !== 'active') {
        await this.revocations.platform(tx, updated.id);
      } else {
        for (const agentId of losing) await this.revocations.agent(tx, agentId, [updated.id]);
      }
      await tx.audit.insert(
        auditEvents.adminChange('platform.updated', {
          ...by,
          platformId: updated.id,
          fields: by.fields ?? Object.keys(body),
          ...(body.status ? { status: updated.status } : {}),
        }),
      );
      return updated;
    });
  }

  async get(platformId: string): Promise<PlatformRecord> {
    const platform = await this.store.getPlatform(platformId.toLowerCase());
    if (!platform) throw new ServiceError('not_found', 'No platform with this id.');
    return platform;
  }

  list(): Promise<PlatformRecord[]> {
    return this.store.listPlatforms();
  }

  /** The agent's platforms. Enrichment (name, hostname, verification_status) is dropped if slow. */
  async listing(view: AgentView): Promise<ListedPlatform[]> {
    const ids = Object.keys(view.grants).sort();
    const entries: ListedPlatform[] = ids.map((id) => ({
      platformId: id,
      grantedScopes: [...view.grants[id]!.scopes].sort(),
      status: view.grants[id]!.platformStatus,
      hostname: null,
    }));
    // One shared budget: each platform whose metadata arrives in time is enriched, the others are not.
    let timer: NodeJS.Timeout | undefined;
    const budget = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), this.enrichmentTimeoutMs)));
    const unenriched = (error: unknown) => {
      this.telemetry.record({ type: 'background_failure', what: 'listing_enrichment', error });
      return undefined;
    };
    const metadata = await Promise.all(ids.map((id) => Promise.race([this.store.getPlatform(id).catch(unenriched), budget])));
    clearTimeout(timer);
    entries.forEach((entry, i) => {
      const platform = metadata[i];
      if (!platform) return;
      entry.name = platform.name;
      entry.hostname = platform.verificationStatus === 'verified' ? platform.domain : null;
      entry.verificationStatus = platform.verificationStatus;
    });
    return entries;
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

/** Each identifier in normal form; one given twice (in any spelling) is refused, as a scope defined twice is. */
function normaliseResources(resources: string[]): string[] {
  const seen = new Set<string>();
  return resources.map((text, i) => {
    const check = normaliseResource(text);
    if (!check.ok) throw new ServiceError('validation_error', `resources[${i}] ${check.reason}.`);
    if (seen.has(check.resource)) throw new ServiceError('validation_error', `resources[${i}] repeats ${check.resource}.`);
    seen.add(check.resource);
    return check.resource;
  });
}

function normaliseRoutes(routes: RouteRule[], scopes: ScopeDefinition[]): RouteRule[] {
  const defined = new Set(scopes.map((s) => s.name));
  const seen = new Set<string>();
  return routes.map((route, i) => {
    const method = route.method.toUpperCase();
    if (!(ROUTE_METHODS as readonly string[]).includes(method)) {
      throw new ServiceError('validation_error', `routes[${i}].method must be one of ${ROUTE_METHODS.join(', ')}.`);
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
