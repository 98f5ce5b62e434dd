// The internal admin API (docs/admin-api.md). Every /admin/v1/* route declares the admin bearer token
// (auth: 'admin_bearer'); the server runs adminBearerGuard before the handler: the token is compared in
// constant time (admin-auth.ts), with a per-address budget of wrong tokens.
import { Type, type TSchema } from '@sinclair/typebox';
import { ServiceError } from '../../../../core/errors.js';
import {
  AgentCreate,
  AgentCreated,
  AgentList,
  AgentPatch,
  AgentView,
  ClientKeyAdd,
  ClientKeysView,
  EventPage,
  EventQueryParams,
  FeedCredentialCreated,
  FeedCredentialList,
  GrantList,
  GrantPut,
  GrantView,
  KeyList,
  KeyView,
  PlatformCreate,
  PlatformList,
  PlatformPatch,
  PlatformView,
  SecretRotate,
  SecretRotated,
  WorkloadBindingCreate,
  WorkloadBindingList,
  WorkloadBindingQuery,
  WorkloadBindingView,
  WorkloadIssuerCreate,
  WorkloadIssuerList,
  WorkloadIssuerView,
} from '../../schemas/admin.js';
import { UUID_PATTERN } from '../../schemas/public.js';
import { compileValidator } from '../../schemas/validate.js';
import type { AgentService } from '../../../../core/agents/agent-service.js';
import type { ClientKeyService } from '../../../../core/agents/client-key-service.js';
import type { KeySource, PublicJwk, TrustedIssuer, WorkloadBinding } from '../../../../core/ports/client-keys.js';
import type { KeyManager } from '../../../../core/keys/key-manager.js';
import type { KeyStatus } from '../../../../core/keys/key-states.js';
import type { PlatformChange, PlatformDraft, PlatformService } from '../../../../core/platforms/platform-service.js';
import type { FeedCredentialService } from '../../../../core/revocation/feed-credential-service.js';
import type { FeedCredential } from '../../../../core/ports/feed-credentials.js';
import type { AgentRecord, GrantRecord, PlatformRecord } from '../../../../core/model.js';
import type { AdminAuthLimiter } from '../../../ratelimit/index.js';
import { adminTokenCheck } from '../../admin-auth.js';
import { ADMIN_ACTOR, auditEvents, type AuditSink, type ChangeBy, type EventType } from '../../../../core/audit/events.js';
import { parseEventQuery, presentEvent, readEvents } from '../../audit-query.js';
import type { AuditStore } from '../../../../core/ports/audit-store.js';
import { parseJsonBody } from '../../json-body.js';
import { JSON_BODY_REFUSALS, refusals, type RefusalNotes } from '../../responses.js';
import { HttpError } from '../../errors.js';
import { allowHeader, bindRoutes, json, refusalReply, routesByPath, type Guard, type HttpRequest, type ResponseSpec, type Route, type RouteDeclaration } from '../../types.js';

export interface AdminGuardDeps {
  adminToken: string;
  authLimiter: Pick<AdminAuthLimiter, 'assertAllowed' | 'recordFailure'>;
  /** Metric and log of a wrong token (never the token itself). */
  onAuthFailure: (address: string) => void;
  audit: AuditSink;
}

export interface AdminDeps {
  platforms: PlatformService;
  agents: AgentService;
  clientKeys: ClientKeyService;
  keys: KeyManager;
  feedCredentials: FeedCredentialService;
  audit: AuditSink;
  auditStore: AuditStore;
}

const UUID = new RegExp(UUID_PATTERN);

/** The admin body's snake_case fields as the core's platform change (only the fields given). */
function toPlatformChange(body: PlatformPatch): PlatformChange {
  const { verification_status, ...rest } = body;
  return { ...rest, ...(verification_status !== undefined ? { verificationStatus: verification_status } : {}) };
}

export const presentPlatform = (p: PlatformRecord) => ({
  platform_id: p.id,
  name: p.name,
  domain: p.domain,
  status: p.status,
  verification_status: p.verificationStatus,
  scopes: p.scopes,
  routes: p.routes,
  resources: p.resources,
  created_at: p.createdAt,
  updated_at: p.updatedAt,
});

export const presentKey = (status: KeyStatus) => ({
  kid: status.row.kid,
  state: status.state,
  created_at: status.row.createdAt.toISOString(),
  activates_at: status.row.activatesAt.toISOString(),
  deactivated_at: status.deactivatedAt?.toISOString() ?? null,
  retires_at: status.retiresAt?.toISOString() ?? null,
  retired_at: status.row.retiredAt?.toISOString() ?? null,
});

export const presentAgent = (a: AgentRecord) => ({
  agent_id: a.id,
  name: a.name,
  status: a.status,
  api_key_id: a.apiKeyId,
  created_at: a.createdAt,
  updated_at: a.updatedAt,
});

/** A key source as RFC 7591 metadata: `jwks` or `jwks_uri`. */
const presentKeySource = (source: KeySource) => (source.jwksUri !== undefined ? { jwks_uri: source.jwksUri } : { jwks: { keys: source.keys } });
const presentIssuer = (i: TrustedIssuer) => ({ issuer_id: i.id, issuer: i.issuer, audience: i.audience, ...presentKeySource(i.source), created_at: i.createdAt.toISOString() });
const presentBinding = (b: WorkloadBinding) => ({ issuer_id: b.issuerId, subject: b.subject, agent_id: b.agentId, created_at: b.createdAt.toISOString() });

/** `jwks` or `jwks_uri`, exactly one. */
function keySource(body: { jwks?: { keys: unknown[] }; jwks_uri?: string }): KeySource {
  if ((body.jwks === undefined) === (body.jwks_uri === undefined)) throw new ServiceError('validation_error', 'Give exactly one of jwks and jwks_uri.');
  return body.jwks_uri !== undefined ? { jwksUri: body.jwks_uri } : { keys: body.jwks!.keys as PublicJwk[] };
}

const presentFeedCredential = (c: FeedCredential) => ({ feed_credential_id: c.id, platform_id: c.platformId, created_at: c.createdAt.toISOString() });

const presentGrant = (g: GrantRecord) => ({ agent_id: g.agentId, platform_id: g.platformId, scopes: g.scopes, updated_at: g.updatedAt });

function uuidParam(request: HttpRequest, name: string): string {
  const value = request.params[name];
  if (!UUID.test(value)) throw new ServiceError('not_found', `No record with this ${name}.`);
  return value.toLowerCase();
}

/** The check of `auth: 'admin_bearer'` routes (HttpServerOptions.guards). */
export function adminBearerGuard(deps: AdminGuardDeps): Guard {
  const authorised = adminTokenCheck(deps.adminToken);
  return async (request) => {
    // A blocked address is refused before its token is looked at, so a lucky guess is not confirmed.
    await deps.authLimiter.assertAllowed(request.address);
    if (!authorised(request.headers.authorization)) {
      deps.onAuthFailure(request.address);
      deps.audit.emit(auditEvents.adminAuthFailed({ clientAddress: request.address, method: request.method, path: request.path }));
      await deps.authLimiter.recordFailure(request.address);
      throw new HttpError('unauthorized', undefined, { 'WWW-Authenticate': 'Bearer realm="admin"' });
    }
  };
}

const AGENT_ID = { agent_id: Type.String({ format: 'uuid' }) };
const PLATFORM_ID = { platform_id: Type.String({ format: 'uuid' }) };
/** Every admin route can answer these: the guard's, the stores'. */
const GUARD_REFUSALS: RefusalNotes = {
  unauthorized: 'the bearer token is missing or wrong.',
  rate_limited: 'too many wrong tokens from this address.',
  service_unavailable: '',
};
const ok = (description: string, schema: TSchema): ResponseSpec => ({ description, content: { 'application/json': schema } });
const NO_STORE = { 'Cache-Control': { schema: Type.Literal('no-store') } };
const change = (...events: EventType[]) => ({ kind: 'before_answer' as const, events });
const jsonBody = <S extends TSchema>(schema: S, required = true) => ({ schema, contentType: 'application/json' as const, required });
const admin = { auth: 'admin_bearer', audit: { kind: 'none' } } as const;

/** The admin routes as data. */
export const adminRouteTable = {
  platformCreate: {
    ...admin, method: 'POST', path: '/admin/v1/platforms', name: 'admin_platforms', operationId: 'adminCreatePlatform',
    summary: 'Register a platform', body: jsonBody(PlatformCreate), audit: change('platform.created'),
    responses: { 201: ok('Created.', PlatformView), ...refusals({ ...GUARD_REFUSALS, ...JSON_BODY_REFUSALS, validation_error: '', conflict: '' }) },
  },
  platformList: {
    ...admin, method: 'GET', path: '/admin/v1/platforms', name: 'admin_platforms', operationId: 'adminListPlatforms',
    summary: 'List platforms', responses: { 200: ok('Every platform.', PlatformList), ...refusals(GUARD_REFUSALS) },
  },
  platformGet: {
    ...admin, method: 'GET', path: '/admin/v1/platforms/:platform_id', name: 'admin_platform', operationId: 'adminGetPlatform',
    summary: 'Read a platform', params: PLATFORM_ID,
    responses: { 200: ok('The platform.', PlatformView), ...refusals({ ...GUARD_REFUSALS, not_found: '' }) },
  },
  platformPatch: {
    ...admin, method: 'PATCH', path: '/admin/v1/platforms/:platform_id', name: 'admin_platform', operationId: 'adminUpdatePlatform',
    summary: 'Change a platform (only the fields given)', params: PLATFORM_ID, body: jsonBody(PlatformPatch), audit: change('platform.updated'),
    responses: { 200: ok('The changed platform.', PlatformView), ...refusals({ ...GUARD_REFUSALS, ...JSON_BODY_REFUSALS, not_found: '', validation_error: '', conflict: '' }) },
  },
  feedCredentialCreate: {
    ...admin, method: 'POST', path: '/admin/v1/platforms/:platform_id/feed-credentials', name: 'admin_platform_feed_credentials', operationId: 'adminCreateFeedCredential',
    summary: "Create a credential for the platform's revocation feed (its token is shown once)", params: PLATFORM_ID,
    // The body, if any, is not read.
    body: jsonBody(Type.Object({}), false), audit: change('feed_credential.created'),
    responses: { 201: { ...ok('Created.', FeedCredentialCreated), headers: NO_STORE }, ...refusals({ ...GUARD_REFUSALS, not_found: '', conflict: 'the platform has 10 feed credentials already.' }) },
  },
  feedCredentialList: {
    ...admin, method: 'GET', path: '/admin/v1/platforms/:platform_id/feed-credentials', name: 'admin_platform_feed_credentials', operationId: 'adminListFeedCredentials',
    summary: "List the platform's feed credentials (ids and creation times, never a token)", params: PLATFORM_ID,
    responses: { 200: ok('Its feed credentials, oldest first.', FeedCredentialList), ...refusals({ ...GUARD_REFUSALS, not_found: '' }) },
  },
  feedCredentialDelete: {
    ...admin, method: 'DELETE', path: '/admin/v1/platforms/:platform_id/feed-credentials/:feed_credential_id', name: 'admin_platform_feed_credential', operationId: 'adminDeleteFeedCredential',
    summary: 'Revoke a feed credential (polls with it are refused and sockets that used it are closed, on every instance)',
    params: { ...PLATFORM_ID, feed_credential_id: Type.String({ format: 'uuid' }) }, audit: change('feed_credential.deleted'),
    responses: { 204: { description: 'Deleted.' }, ...refusals({ ...GUARD_REFUSALS, not_found: '' }) },
  },
  agentCreate: {
    ...admin, method: 'POST', path: '/admin/v1/agents', name: 'admin_agents', operationId: 'adminCreateAgent',
    summary: 'Create an agent (its secret is shown once)', body: jsonBody(AgentCreate), audit: change('agent.created'),
    responses: { 201: { ...ok('Created.', AgentCreated), headers: NO_STORE }, ...refusals({ ...GUARD_REFUSALS, ...JSON_BODY_REFUSALS, validation_error: '', conflict: 'a private_key_jwt agent while instances of an older release are still connected (agents without secrets wait for the rollout).' }) },
  },
  agentList: {
    ...admin, method: 'GET', path: '/admin/v1/agents', name: 'admin_agents', operationId: 'adminListAgents',
    summary: 'List agents', responses: { 200: ok('Every agent.', AgentList), ...refusals(GUARD_REFUSALS) },
  },
  agentGet: {
    ...admin, method: 'GET', path: '/admin/v1/agents/:agent_id', name: 'admin_agent', operationId: 'adminGetAgent',
    summary: 'Read an agent', params: AGENT_ID,
    responses: { 200: ok('The agent.', AgentView), ...refusals({ ...GUARD_REFUSALS, not_found: '' }) },
  },
  agentPatch: {
    ...admin, method: 'PATCH', path: '/admin/v1/agents/:agent_id', name: 'admin_agent', operationId: 'adminUpdateAgent',
    summary: 'Rename, deactivate or reactivate an agent', params: AGENT_ID, body: jsonBody(AgentPatch), audit: change('agent.updated'),
    responses: { 200: ok('The changed agent.', AgentView), ...refusals({ ...GUARD_REFUSALS, ...JSON_BODY_REFUSALS, not_found: '', validation_error: '' }) },
  },
  secretRotate: {
    ...admin, method: 'POST', path: '/admin/v1/agents/:agent_id/secret/rotate', name: 'admin_agent_secret_rotate', operationId: 'adminRotateAgentSecret',
    summary: "Rotate an agent's secret (the old one may stay valid for grace_seconds)", params: AGENT_ID,
    // An empty body means "no options".
    body: jsonBody(SecretRotate, false), audit: change('agent.secret_rotated'),
    responses: { 200: { ...ok('The new secret.', SecretRotated), headers: NO_STORE }, ...refusals({ ...GUARD_REFUSALS, ...JSON_BODY_REFUSALS, not_found: '', validation_error: '' }) },
  },
  grantList: {
    ...admin, method: 'GET', path: '/admin/v1/agents/:agent_id/grants', name: 'admin_agent_grants', operationId: 'adminListGrants',
    summary: "List an agent's grants", params: AGENT_ID,
    responses: { 200: ok('Its grants.', GrantList), ...refusals({ ...GUARD_REFUSALS, not_found: '' }) },
  },
  grantPut: {
    ...admin, method: 'PUT', path: '/admin/v1/agents/:agent_id/grants/:platform_id', name: 'admin_agent_grant', operationId: 'adminPutGrant',
    summary: 'Grant scopes of a platform to an agent (replaces the grant)', params: { ...AGENT_ID, ...PLATFORM_ID }, body: jsonBody(GrantPut), audit: change('grant.put'),
    responses: { 200: ok('The grant.', GrantView), ...refusals({ ...GUARD_REFUSALS, ...JSON_BODY_REFUSALS, not_found: '', validation_error: '' }) },
  },
  grantDelete: {
    ...admin, method: 'DELETE', path: '/admin/v1/agents/:agent_id/grants/:platform_id', name: 'admin_agent_grant', operationId: 'adminDeleteGrant',
    summary: 'Take a grant back', params: { ...AGENT_ID, ...PLATFORM_ID }, audit: change('grant.deleted'),
    responses: { 204: { description: 'Deleted.' }, ...refusals({ ...GUARD_REFUSALS, not_found: '' }) },
  },
  clientKeyList: {
    ...admin, method: 'GET', path: '/admin/v1/agents/:agent_id/keys', name: 'admin_agent_keys', operationId: 'adminListAgentKeys',
    summary: "A private_key_jwt agent's public keys (jwks) or its jwks_uri", params: AGENT_ID,
    responses: { 200: ok('Its keys.', ClientKeysView), ...refusals({ ...GUARD_REFUSALS, not_found: '', conflict: 'the agent authenticates with a secret.' }) },
  },
  clientKeyAdd: {
    ...admin, method: 'POST', path: '/admin/v1/agents/:agent_id/keys', name: 'admin_agent_keys', operationId: 'adminAddAgentKey',
    summary: 'Add a public key to a private_key_jwt agent (several live keys: rotation with overlap)', params: AGENT_ID, body: jsonBody(ClientKeyAdd), audit: change('agent.key_added'),
    responses: { 201: ok('Its keys now.', ClientKeysView), ...refusals({ ...GUARD_REFUSALS, ...JSON_BODY_REFUSALS, not_found: '', validation_error: '', conflict: 'a key with this kid exists, 10 keys already, the agent uses a secret or a jwks_uri, or instances of an older release are still connected (agents without secrets wait for the rollout).' }) },
  },
  clientKeyRemove: {
    ...admin, method: 'DELETE', path: '/admin/v1/agents/:agent_id/keys/:kid', name: 'admin_agent_key', operationId: 'adminRemoveAgentKey',
    summary: "Remove an agent's key: assertions it signs are refused, and the agent's tokens are taken back (revocation feed)", params: { ...AGENT_ID, kid: Type.String() }, audit: change('agent.key_removed'),
    responses: { 204: { description: 'Removed.' }, ...refusals({ ...GUARD_REFUSALS, not_found: '', conflict: 'the agent authenticates with a secret.' }) },
  },
  workloadIssuerCreate: {
    ...admin, method: 'POST', path: '/admin/v1/workload-issuers', name: 'admin_workload_issuers', operationId: 'adminCreateWorkloadIssuer',
    summary: 'Trust a workload identity issuer (Kubernetes service accounts, SPIFFE, a CI OIDC issuer)', body: jsonBody(WorkloadIssuerCreate), audit: change('workload_issuer.created'),
    responses: { 201: ok('Created.', WorkloadIssuerView), ...refusals({ ...GUARD_REFUSALS, ...JSON_BODY_REFUSALS, validation_error: '', conflict: 'this issuer is trusted already, or instances of an older release are still connected (agents without secrets wait for the rollout).' }) },
  },
  workloadIssuerList: {
    ...admin, method: 'GET', path: '/admin/v1/workload-issuers', name: 'admin_workload_issuers', operationId: 'adminListWorkloadIssuers',
    summary: 'List trusted workload identity issuers', responses: { 200: ok('Every trusted issuer.', WorkloadIssuerList), ...refusals(GUARD_REFUSALS) },
  },
  workloadIssuerDelete: {
    ...admin, method: 'DELETE', path: '/admin/v1/workload-issuers/:issuer_id', name: 'admin_workload_issuer', operationId: 'adminDeleteWorkloadIssuer',
    summary: 'Stop trusting an issuer (its bindings go, and the bound agents\' tokens are taken back)', params: { issuer_id: Type.String({ format: 'uuid' }) }, audit: change('workload_issuer.deleted'),
    responses: { 204: { description: 'Deleted.' }, ...refusals({ ...GUARD_REFUSALS, not_found: '' }) },
  },
  workloadBindingCreate: {
    ...admin, method: 'POST', path: '/admin/v1/workload-issuers/:issuer_id/bindings', name: 'admin_workload_bindings', operationId: 'adminBindWorkload',
    summary: "Let a workload (the issuer's subject) act as an agent", params: { issuer_id: Type.String({ format: 'uuid' }) }, body: jsonBody(WorkloadBindingCreate), audit: change('workload_binding.created'),
    responses: { 201: ok('Bound.', WorkloadBindingView), ...refusals({ ...GUARD_REFUSALS, ...JSON_BODY_REFUSALS, not_found: '', validation_error: '', conflict: 'the subject is bound already, or instances of an older release are still connected (agents without secrets wait for the rollout).' }) },
  },
  workloadBindingList: {
    ...admin, method: 'GET', path: '/admin/v1/workload-issuers/:issuer_id/bindings', name: 'admin_workload_bindings', operationId: 'adminListWorkloadBindings',
    summary: "List an issuer's bindings", params: { issuer_id: Type.String({ format: 'uuid' }) },
    responses: { 200: ok('Its bindings.', WorkloadBindingList), ...refusals(GUARD_REFUSALS) },
  },
  workloadBindingDelete: {
    ...admin, method: 'DELETE', path: '/admin/v1/workload-issuers/:issuer_id/bindings', name: 'admin_workload_bindings', operationId: 'adminUnbindWorkload',
    summary: 'Unbind a workload (?subject=...): its agent\'s tokens are taken back', params: { issuer_id: Type.String({ format: 'uuid' }) }, query: WorkloadBindingQuery, audit: change('workload_binding.deleted'),
    responses: { 204: { description: 'Unbound.' }, ...refusals({ ...GUARD_REFUSALS, not_found: '', validation_error: '' }) },
  },
  keyList: {
    ...admin, method: 'GET', path: '/admin/v1/keys', name: 'admin_keys', operationId: 'adminListKeys',
    summary: 'List signing keys and their states', responses: { 200: ok('Every key.', KeyList), ...refusals(GUARD_REFUSALS) },
  },
  keyRotate: {
    ...admin, method: 'POST', path: '/admin/v1/keys/rotate', name: 'admin_keys_rotate', operationId: 'adminRotateKey',
    // The body, if any, is not read.
    summary: 'Create the next signing key', body: jsonBody(Type.Object({}), false), audit: change('key.rotated'),
    responses: { 200: ok('The new key.', KeyView), ...refusals({ ...GUARD_REFUSALS, conflict: '' }) },
  },
  keyRetire: {
    ...admin, method: 'POST', path: '/admin/v1/keys/:kid/retire', name: 'admin_key_retire', operationId: 'adminRetireKey',
    summary: 'Retire a signing key now (tokens it signed stop verifying)', params: { kid: Type.String() },
    body: jsonBody(Type.Object({}), false), audit: change('key.retired'),
    responses: { 200: ok('The retired key.', KeyView), ...refusals({ ...GUARD_REFUSALS, not_found: '', conflict: '' }) },
  },
  events: {
    ...admin, method: 'GET', path: '/admin/v1/events', name: 'admin_events', operationId: 'adminListEvents',
    summary: 'Read the audit trail, newest first, a page at a time', query: EventQueryParams,
    responses: { 200: { ...ok('A page of events.', EventPage), headers: NO_STORE }, ...refusals({ ...GUARD_REFUSALS, validation_error: '' }) },
  },
  // Unknown admin paths answer 401 without the token, 404 with it: nothing is learned unauthenticated.
  unmatched: {
    ...admin, method: 'ANY', path: '/admin/v1/*', name: 'admin_unmatched', summary: 'Any other admin path',
    responses: refusals({ ...GUARD_REFUSALS, not_found: '' }),
  },
} satisfies Record<string, RouteDeclaration>;

export function adminRoutes(deps: AdminDeps): Route[] {
  // Who made a change, for its audit event, which the core writes in the change's own transaction: a
  // change is acknowledged only with its event, and a 503 means neither was written.
  const by = (r: HttpRequest, body?: object): ChangeBy => ({ actor: ADMIN_ACTOR, clientAddress: r.address, ...(body ? { fields: Object.keys(body) } : {}) });

  const t = adminRouteTable;
  const platformCreate = compileValidator(t.platformCreate.body.schema);
  const platformPatch = compileValidator(t.platformPatch.body.schema);
  const agentCreate = compileValidator(t.agentCreate.body.schema);
  const agentPatch = compileValidator(t.agentPatch.body.schema);
  const grantPut = compileValidator(t.grantPut.body.schema);
  const secretRotate = compileValidator(t.secretRotate.body.schema);
  const clientKeyAdd = compileValidator(t.clientKeyAdd.body.schema);
  const workloadIssuerCreate = compileValidator(t.workloadIssuerCreate.body.schema);
  const workloadBindingCreate = compileValidator(t.workloadBindingCreate.body.schema);
  // An empty body on the rotate endpoints means "no options".
  const optionalBody = (request: HttpRequest) => (request.body && request.body.length > 0 ? parseJsonBody(request) : {});

  const routes = bindRoutes(adminRouteTable, {
    platformCreate: async (r) => {
      const body = platformCreate(parseJsonBody(r));
      const platform = await deps.platforms.create(toPlatformChange(body) as PlatformDraft, by(r, body));
      return json(201, presentPlatform(platform));
    },
    platformList: async () => json(200, { platforms: (await deps.platforms.list()).map(presentPlatform) }),
    platformGet: async (r) => json(200, presentPlatform(await deps.platforms.get(uuidParam(r, 'platform_id')))),
    platformPatch: async (r) => {
      const id = uuidParam(r, 'platform_id');
      const body = platformPatch(parseJsonBody(r));
      const platform = await deps.platforms.update(id, toPlatformChange(body), by(r, body));
      return json(200, presentPlatform(platform));
    },
    feedCredentialCreate: async (r) => {
      const { credential, token } = await deps.feedCredentials.create(uuidParam(r, 'platform_id'), by(r));
      return json(201, { ...presentFeedCredential(credential), feed_token: token }, { 'Cache-Control': 'no-store' });
    },
    feedCredentialList: async (r) => {
      const platform = await deps.platforms.get(uuidParam(r, 'platform_id'));
      return json(200, { feed_credentials: (await deps.feedCredentials.list(platform.id)).map(presentFeedCredential) });
    },
    feedCredentialDelete: async (r) => {
      await deps.feedCredentials.delete(uuidParam(r, 'platform_id'), uuidParam(r, 'feed_credential_id'), by(r));
      return { status: 204 };
    },
    agentCreate: async (r) => {
      const body = agentCreate(parseJsonBody(r));
      if (body.token_endpoint_auth_method === 'private_key_jwt') {
        const agent = await deps.clientKeys.createKeyAgent(body.name, keySource(body), by(r, body));
        return json(201, { ...presentAgent(agent), token_endpoint_auth_method: 'private_key_jwt' }, { 'Cache-Control': 'no-store' });
      }
      if (body.jwks !== undefined || body.jwks_uri !== undefined) throw new ServiceError('validation_error', 'jwks and jwks_uri go with token_endpoint_auth_method private_key_jwt.');
      const { agent, secret } = await deps.agents.create(body.name, by(r));
      return json(201, { ...presentAgent(agent), token_endpoint_auth_method: body.token_endpoint_auth_method ?? 'client_secret_basic', secret }, { 'Cache-Control': 'no-store' });
    },
    agentList: async () => json(200, { agents: (await deps.agents.list()).map(presentAgent) }),
    agentGet: async (r) => json(200, presentAgent(await deps.agents.get(uuidParam(r, 'agent_id')))),
    agentPatch: async (r) => {
      const id = uuidParam(r, 'agent_id');
      const body = agentPatch(parseJsonBody(r));
      const agent = await deps.agents.update(id, body, by(r, body));
      return json(200, presentAgent(agent));
    },
    secretRotate: async (r) => {
      const id = uuidParam(r, 'agent_id');
      const { grace_seconds } = secretRotate(optionalBody(r));
      const { apiKeyId, secret } = await deps.agents.rotateSecret(id, grace_seconds ?? 0, by(r));
      return json(200, { api_key_id: apiKeyId, secret }, { 'Cache-Control': 'no-store' });
    },
    grantList: async (r) => json(200, { grants: (await deps.agents.listGrants(uuidParam(r, 'agent_id'))).map(presentGrant) }),
    grantPut: async (r) => {
      const agentId = uuidParam(r, 'agent_id');
      const platformId = uuidParam(r, 'platform_id');
      const { scopes } = grantPut(parseJsonBody(r));
      const grant = await deps.agents.putGrant(agentId, platformId, scopes, by(r));
      return json(200, presentGrant(grant));
    },
    grantDelete: async (r) => {
      const [agentId, platformId] = [uuidParam(r, 'agent_id'), uuidParam(r, 'platform_id')];
      await deps.agents.deleteGrant(agentId, platformId, by(r));
      return { status: 204 };
    },
    clientKeyList: async (r) => {
      const id = uuidParam(r, 'agent_id');
      const source = await deps.clientKeys.keysOf(id);
      if (!source) throw new ServiceError('conflict', 'This agent authenticates with a secret, not with keys.');
      return json(200, { agent_id: id, token_endpoint_auth_method: 'private_key_jwt', ...presentKeySource(source) });
    },
    clientKeyAdd: async (r) => {
      const id = uuidParam(r, 'agent_id');
      const source = await deps.clientKeys.addKey(id, clientKeyAdd(parseJsonBody(r)), by(r));
      return json(201, { agent_id: id, token_endpoint_auth_method: 'private_key_jwt', ...presentKeySource(source) });
    },
    clientKeyRemove: async (r) => {
      await deps.clientKeys.removeKey(uuidParam(r, 'agent_id'), r.params.kid, by(r));
      return { status: 204 };
    },
    workloadIssuerCreate: async (r) => {
      const body = workloadIssuerCreate(parseJsonBody(r));
      const issuer = await deps.clientKeys.createIssuer({ issuer: body.issuer, audience: body.audience, source: keySource(body) }, by(r, body));
      return json(201, presentIssuer(issuer));
    },
    workloadIssuerList: async () => json(200, { workload_issuers: (await deps.clientKeys.listIssuers()).map(presentIssuer) }),
    workloadIssuerDelete: async (r) => {
      await deps.clientKeys.deleteIssuer(uuidParam(r, 'issuer_id'), by(r));
      return { status: 204 };
    },
    workloadBindingCreate: async (r) => {
      const body = workloadBindingCreate(parseJsonBody(r));
      const binding = await deps.clientKeys.bind(uuidParam(r, 'issuer_id'), body.subject, body.agent_id, by(r));
      return json(201, presentBinding(binding));
    },
    workloadBindingList: async (r) => json(200, { bindings: (await deps.clientKeys.listBindings(uuidParam(r, 'issuer_id'))).map(presentBinding) }),
    workloadBindingDelete: async (r) => {
      const subject = new URLSearchParams(r.query).get('subject');
      if (!subject) throw new ServiceError('validation_error', 'The subject query parameter is required.');
      await deps.clientKeys.unbind(uuidParam(r, 'issuer_id'), subject, by(r));
      return { status: 204 };
    },
    keyList: () => json(200, { keys: deps.keys.list().map(presentKey) }),
    keyRotate: async (r) => {
      const key = await deps.keys.rotate(by(r));
      return json(200, presentKey(key));
    },
    keyRetire: async (r) => {
      const key = await deps.keys.retire(r.params.kid, by(r));
      return json(200, presentKey(key));
    },
    events: async (r) => {
      const page = await readEvents(deps.auditStore, parseEventQuery(r.query));
      return json(200, { events: page.events.map(presentEvent), next_cursor: page.nextCursor }, { 'Cache-Control': 'no-store' });
    },
    unmatched: () => {
      throw new ServiceError('not_found');
    },
  });
  // A known path with another method: 405 with Allow, but only after the token check, so the API cannot
  // be mapped without the token. (First matching route wins, so these catch only the missing methods.)
  for (const [path, group] of routesByPath(routes.filter((r) => r.method !== 'ANY'))) {
    const allow = allowHeader(group);
    routes.push({
      ...admin, method: 'ANY', path, name: group[0].name, summary: 'Any other method',
      responses: refusals({ ...GUARD_REFUSALS, method_not_allowed: '' }),
      handler: () => refusalReply(new ServiceError('method_not_allowed'), { headers: { Allow: allow } }),
    });
  }
  return routes;
}
