// The OpenID Shared Signals Framework 1.0 transmitter configuration of the revocation feed: one implicit
// stream per platform, delivered by poll (revocation-poll.ts) and WebSocket push (revocation-socket.ts).
import { Type } from '@sinclair/typebox';
import { fixedHeader, refusals } from '../responses.js';
import {
  DELIVERY_POLL,
  DELIVERY_WEBSOCKET,
  EVENT_PLATFORM_TOKENS_REVOKED,
  EVENT_SESSION_REVOKED,
  EVENT_SIGNING_KEY_RETIRED,
  EVENT_STREAM_HEAD,
} from '@agent-credential-exchange/protocol/feed-document';
import { bindRoutes, type Route, type RouteDeclaration } from '../types.js';
import { FEED_PATH } from './revocation-poll.js';
import { FEED_SOCKET_PATH } from './revocation-socket.js';

export const SSF_CONFIGURATION_PATH = '/.well-known/ssf-configuration';

export const ssfRouteTable = {
  configuration: {
    method: 'GET', path: SSF_CONFIGURATION_PATH, name: 'ssf_configuration', operationId: 'getSsfConfiguration',
    summary: 'OpenID Shared Signals Framework 1.0 transmitter configuration',
    auth: 'none',
    audit: { kind: 'none' },
    responses: {
      200: {
        description: 'issuer, jwks_uri, delivery methods (poll, WebSocket push), supported events and the endpoint templates.',
        headers: { 'Cache-Control': fixedHeader('public, max-age=3600') },
        content: { 'application/json': Type.Object({}, { additionalProperties: true }) },
      },
      ...refusals({ method_not_allowed: 'a method other than GET or HEAD.' }),
    },
  },
} satisfies Record<string, RouteDeclaration>;

/** The SSF 1.0 transmitter configuration (one implicit stream per platform, its `aud`). */
export function ssfConfiguration(issuer: string, publicBaseUrl: string): Record<string, unknown> {
  return {
    spec_version: '1_0',
    issuer,
    jwks_uri: `${publicBaseUrl}/.well-known/jwks.json`,
    delivery_methods_supported: [DELIVERY_POLL, DELIVERY_WEBSOCKET],
    // Streams are implicit: one per platform, the platform id as `aud`, every revocation event of that platform.
    default_subjects: 'ALL',
    events_supported: [EVENT_SESSION_REVOKED, EVENT_PLATFORM_TOKENS_REVOKED, EVENT_SIGNING_KEY_RETIRED, EVENT_STREAM_HEAD],
    // Receivers authenticate with a bearer token (RFC 6750): a feed credential of the platform.
    authorization_schemes: [{ spec_urn: 'urn:ietf:rfc:6750' }],
    poll_endpoint_template: `${publicBaseUrl}${FEED_PATH.replace(':platform_id', '{platform_id}')}`,
    websocket_endpoint_template: `${publicBaseUrl}${FEED_SOCKET_PATH.replace(':platform_id', '{platform_id}')}?since={seq}`,
  };
}

export function ssfRoutes(ssf: { issuer: string; publicBaseUrl: string }): Route[] {
  const configuration = Buffer.from(JSON.stringify(ssfConfiguration(ssf.issuer, ssf.publicBaseUrl)));
  return bindRoutes(ssfRouteTable, {
    configuration: () => ({ status: 200, headers: { 'Content-Type': 'application/json', 'Cache-Control': 'public, max-age=3600' }, body: configuration }),
  });
}
