// The platform server as an OAuth protected resource (RFC 8707, RFC 9728): the `resource` option in normal
// form, what `aud` may name beside the platform id, the protected-resource metadata (answered at
// /.well-known/oauth-protected-resource inserted before the resource's path, named in a 401's challenge),
// and `ready()`'s check that the service issues tokens for the resource at all.
import { normaliseResource } from '@agent-credential-exchange/protocol/resource-identifier';
import type { SvcScopesYaml } from '@agent-credential-exchange/protocol/scopes-file';
import { resourceMetadataAnswer, withResourceMetadata, type Refusal } from './challenge.js';
import { loadScopeFile } from './scope-map.js';

export const PROTECTED_RESOURCE_PATH = '/.well-known/oauth-protected-resource';

/** The `resource` option in normal form, or a TypeError saying why the service would never issue for it. */
function resourceOption(text: string): string {
  const check = normaliseResource(text);
  if (!check.ok) throw new TypeError(`createVerifier: resource ${JSON.stringify(text.slice(0, 200))} ${check.reason}`);
  return check.resource;
}

/** The scope file's `resources` (written by the service, so already normal; a foreign spelling is normalised or left out). */
function knownResources(listed: readonly string[]): string[] {
  return listed.flatMap((text) => {
    const check = normaliseResource(text);
    return check.ok ? [check.resource] : [];
  });
}

/**
 * `aud` as the service writes it: the platform id alone, or [resource, platform id] with a resource of
 * this platform. Undefined for anything else (another shape, a stranger's resource, no platform id).
 */
export function tokenAudience(aud: unknown, platformId: string, resources: readonly string[]): { resource: string | undefined } | undefined {
  if (aud === platformId) return { resource: undefined };
  if (!Array.isArray(aud) || aud.length !== 2 || aud[1] !== platformId) return undefined;
  const [resource] = aud as unknown[];
  return typeof resource === 'string' && resources.includes(resource) ? { resource } : undefined;
}

/** Rejects unless the service's own scope file (public, current) lists the resource for this platform. */
async function checkResourceRegistered(args: { serviceUrl: string; platformId: string; resource: string; fetch: typeof fetch; timeoutMs: number }): Promise<void> {
  const url = `${args.serviceUrl}/api/v1/platforms/${args.platformId}/scopes.yaml`;
  const response = await args.fetch(url, { signal: AbortSignal.timeout(args.timeoutMs), headers: { accept: 'text/yaml' } });
  if (!response.ok) throw new ResourceNotRegisteredError(`ready(): the service answered ${response.status} for ${url}; cannot check the resource option`);
  const document = loadScopeFile({ scopesYaml: await response.text(), scopesOrigin: url });
  const known = new Set([...knownResources(document.resources ?? []), `urn:uuid:${args.platformId}`]);
  if (!known.has(args.resource)) {
    throw new ResourceNotRegisteredError(
      `ready(): the service issues no token for resource ${args.resource} on platform ${args.platformId} ` +
        `(it knows ${[...known].join(', ')}): register it (ace platform update ${args.platformId} --resource ${args.resource}) or fix the resource option`,
    );
  }
}

/** `ready()` found that the service would not issue tokens for the `resource` option (or could not ask). */
export class ResourceNotRegisteredError extends Error {
  readonly code = 'ERR_ACE_RESOURCE_NOT_REGISTERED';
  override name = 'ResourceNotRegisteredError';
}

export interface ProtectedResourceOptions {
  /** The `resource` option as given (normalised here; a TypeError when the service could never issue for it). */
  resource: string | undefined;
  issuer: string;
  platformId: string;
  scopeFile: SvcScopesYaml;
}

export interface ProtectedResource {
  /** The `resource` option in normal form. */
  readonly resource: string | undefined;
  /** What `aud` may name beside the platform id: this server and the platform's other servers. */
  readonly resources: string[];
  /** Every `aud` a token may carry: the platform id and `resources`. */
  readonly audiences: string[];
  /** The metadata document, when the request asks for it (GET or HEAD of its path, query ignored). */
  answerFor(method: string, requested: string | undefined): Refusal | undefined;
  /** RFC 9728 §5.1: a 401 names where the resource's metadata is. */
  challenge(refusal: Refusal): Refusal;
  /** A copy of the metadata (undefined without the `resource` option). */
  metadata(): Record<string, unknown> | undefined;
  /** Rejects unless the service lists the resource for this platform (nothing to check without one). */
  checkRegistered(args: { serviceUrl: string; fetch: typeof fetch; timeoutMs: number }): Promise<void>;
}

export function protectedResource({ resource: text, issuer, platformId, scopeFile }: ProtectedResourceOptions): ProtectedResource {
  // RFC 9728: the metadata lives at /.well-known/oauth-protected-resource inserted before the resource's path.
  const resource = text === undefined ? undefined : resourceOption(text);
  const resourceUrl = resource === undefined ? undefined : new URL(resource);
  const metadataPath = resourceUrl && `${PROTECTED_RESOURCE_PATH}${resourceUrl.pathname === '/' ? '' : resourceUrl.pathname}`;
  const metadataUrl = resourceUrl && `${resourceUrl.origin}${metadataPath}`;
  // No jwks_uri: in RFC 9728 it names the resource's own signing keys, and this resource has none (the
  // tokens' keys are the authorization server's, found through its RFC 8414 metadata).
  const metadata = resource && {
    resource,
    authorization_servers: [issuer],
    scopes_supported: scopeFile.scopes.map((scope) => scope.name),
    bearer_methods_supported: ['header'],
  };
  const metadataAnswer = metadata && resourceMetadataAnswer(metadata);
  const resources = [...new Set([...(resource === undefined ? [] : [resource]), ...knownResources(scopeFile.resources ?? []), `urn:uuid:${platformId}`])];
  return {
    resource,
    resources,
    audiences: [platformId, ...resources],
    answerFor(method, requested) {
      if (!metadataAnswer || (method !== 'GET' && method !== 'HEAD')) return undefined;
      return requested !== undefined && requested.split('?', 1)[0] === metadataPath ? metadataAnswer : undefined;
    },
    challenge: (refusal) => (metadataUrl ? withResourceMetadata(refusal, metadataUrl) : refusal),
    metadata: () => (metadata ? { ...metadata } : undefined),
    async checkRegistered({ serviceUrl, fetch, timeoutMs }) {
      if (resource !== undefined) await checkResourceRegistered({ serviceUrl, platformId, resource, fetch, timeoutMs });
    },
  };
}
