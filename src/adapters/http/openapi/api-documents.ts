// The two listeners' documents. The public one is checked in as docs/openapi.json (npm run docs:openapi)
// and served at /openapi.json with the deployment's PUBLIC_BASE_URL; the internal one (admin API,
// readiness, metrics) as docs/openapi-internal.json, never served.
//
// A route added to a listener goes in its list below too: test/e2e/openapi-file.test.ts fails when the
// served document (built from the routes the server really has) and the file differ.
import { publicRouteTable } from '../public-routes.js';
import { revocationPollRouteTable } from '../routes/revocation-poll.js';
import { revocationSocketRoute } from '../routes/revocation-socket.js';
import { ssfRouteTable } from '../routes/ssf.js';
import { oauthRouteTable } from '../oauth-routes.js';
import { adminRouteTable } from '../routes/admin/index.js';
import { opsRouteTable } from '../ops-routes.js';
import { TOKEN_PROFILE, TOKEN_PROFILES } from '../schemas/public.js';
import type { RouteDeclaration } from '../types.js';
import { buildOpenApiDocument } from './document.js';

/** The contract's version (info.version), not the package's. */
export const API_VERSION = '1.0.0';

/** Every route of the public listener, including the WebSocket upgrade served beside HttpServer. */
export function publicRouteDeclarations(apiKeyPrefix: string): RouteDeclaration[] {
  return [...Object.values(publicRouteTable(apiKeyPrefix)), ...Object.values(oauthRouteTable), ...Object.values(revocationPollRouteTable), ...Object.values(ssfRouteTable), revocationSocketRoute];
}

export function internalRouteDeclarations(): RouteDeclaration[] {
  return [...Object.values(opsRouteTable), ...Object.values(adminRouteTable)];
}

export function publicApiDocument(options: { routes: RouteDeclaration[]; serverUrl?: string }) {
  const document = buildOpenApiDocument({
    title: 'Agent Credential Exchange Service: public contract',
    description: `Agents trade api_key_id + secret + platform_id for a short-lived RS256 JWT (profile "${TOKEN_PROFILE}" by default, or "oauth-at-jwt": RFC 9068) whose aud is the platform.`,
    version: API_VERSION,
    ...options,
  });
  // The profiles issued, as an enum for generators. The validator keeps a plain string, so that an unknown
  // profile is the contract's 422 unsupported_profile rather than a validation_error.
  const profile = (document as any).components?.requestBodies?.TokenRequest?.content?.['application/json']?.schema?.properties?.profile;
  if (profile) profile.enum = [...TOKEN_PROFILES];
  return document;
}

export function internalApiDocument(options: { routes: RouteDeclaration[]; serverUrl?: string }) {
  return buildOpenApiDocument({
    title: 'Agent Credential Exchange Service: internal port (admin API, readiness, metrics)',
    description: 'Served on the internal port only (ADMIN_PORT), never through an Ingress. docs/admin-api.md describes the admin API.',
    version: API_VERSION,
    ...options,
  });
}

/** The checked-in files' text: stable key order, two-space indent, final newline. */
export const documentText = (document: unknown): string => `${JSON.stringify(document, null, 2)}\n`;
